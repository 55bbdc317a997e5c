#!/usr/bin/env bash
# Installs the Debian packages tessera's build, tests and benchmarks need. Idempotent: packages
# already present are skipped, so a second run does nothing. Runs apt-get as root (or via sudo).
#   tools/setup.sh            everything (build, tests, optional parts, benchmark peers)
#   tools/setup.sh --minimal  only what core + local + tests need
set -euo pipefail

minimal=0
[ "${1:-}" = "--minimal" ] && minimal=1

required=(build-essential cmake ninja-build pkg-config libeigen3-dev catch2 libcli11-dev nlohmann-json3-dev libboost-graph-dev python3)
optional=(
  libucx-dev ucx-utils            # UCX backend and ucx_perftest
  openmpi-bin libopenmpi-dev      # OpenMPI: the collectives peer in bench/comm
  libtorch-dev                    # libtorch: the CPU-kernel peer in bench/
  qt6-base-dev                    # Qt 6 Widgets: tessera studio (gui/)
  python3-dev python3-pip         # the Python bindings (their PyPI packages: setup_python below)
)

want=("${required[@]}")
[ $minimal -eq 1 ] || want+=("${optional[@]}")

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

# The Python bindings' build and test packages from PyPI (pybind11, numpy, pytest, nbclient, ...),
# installed with the python3 on PATH when missing. Skipped with --minimal (bindings are optional).
setup_python() {
  [ $minimal -eq 0 ] || return 0
  command -v python3 >/dev/null || return 0
  local pkgs=(pybind11 numpy pytest nbclient nbformat ipykernel matplotlib scikit-build-core) need=() p
  for p in "${pkgs[@]}"; do
    python3 -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('${p//-/_}') is None)" 2>/dev/null \
      || need+=("$p")
  done
  if [ ${#need[@]} -eq 0 ]; then
    echo "setup: all ${#pkgs[@]} Python packages already installed"
    return 0
  fi
  local flags=(--quiet --disable-pip-version-check)
  # Debian's system Python refuses pip without this (PEP 668); a venv or pyenv Python does not.
  python3 -c "import sys, sysconfig, os; sys.exit(not (sys.prefix == sys.base_prefix and os.path.exists(os.path.join(sysconfig.get_path('stdlib'), 'EXTERNALLY-MANAGED'))))" \
    && flags+=(--break-system-packages)
  echo "setup: pip installing ${need[*]}"
  python3 -m pip install "${flags[@]}" "${need[@]}"
}

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#want[@]} packages already installed"
  setup_python
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
setup_python
echo "setup: done"
