#!/usr/bin/env bash
# Installs the Debian packages tessera's build, tests and benchmarks need. Idempotent: packages
# already present are skipped, so a second run does nothing. Runs apt-get as root (or via sudo).
#   tools/setup.sh            everything (build, tests, optional parts, benchmark peers)
#   tools/setup.sh --minimal  only what core + local + tests need
# Without --minimal it also makes sure Debian's alternatives give libtorch OpenBLAS, not the
# reference BLAS (see use_openblas below and bench/README.md).
set -euo pipefail

minimal=0
[ "${1:-}" = "--minimal" ] && minimal=1

required=(build-essential cmake ninja-build pkg-config libeigen3-dev catch2 libcli11-dev nlohmann-json3-dev libboost-graph-dev python3
          libjpeg62-turbo-dev libpng-dev)   # the image datasets' decoders
optional=(
  libucx-dev ucx-utils            # UCX backend and ucx_perftest
  libdnnl-dev                     # oneDNN: the cpu backend's bf16 and f32 matrix products
  ocl-icd-opencl-dev              # ... whose CMake config requires OpenCL (only Recommended)
  openmpi-bin libopenmpi-dev      # OpenMPI: the collectives peer in bench/comm
  libtorch-dev                    # libtorch: the CPU-kernel peer in bench/
  libopenblas0-pthread            # ... and the BLAS its users run it on (else: reference BLAS)
  qt6-base-dev                    # Qt 6 Widgets: tessera studio (gui/)
  python3-dev python3-pip         # the Python bindings (their PyPI packages: setup_python below)
  clang libfuzzer-14-dev          # the fuzz targets: clang and its libFuzzer (tools/fuzz.sh)
  patchelf                        # the GPU check bundle's library paths (tests/gpu/make_bundle.sh)
  python3-torch python3-torchvision python3-pil   # the peers in Debian's Python: timm's models
                                  # (setup_timm), torchvision's DataLoader (bench/bench_loader)
)

want=("${required[@]}")
[ $minimal -eq 1 ] || want+=("${optional[@]}")

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

# Runs a command as root: directly, or through sudo.
as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null; then
    sudo "$@"
  else
    echo "setup: need root or sudo to run: $*" >&2
    return 1
  fi
}

# Points libblas.so.3 and liblapack.so.3 at OpenBLAS where they point at Debian's reference
# implementation (libblas3/liblapack3: one thread, several times slower) or at the serial
# OpenBLAS (libopenblas0-serial: one thread), which bench_conv/bench_train refuse. Installing
# libopenblas0-pthread does this itself (priority 100 against 10) unless an alternative was set
# by hand, so usually this only prints where they point. Any other hand-picked BLAS (BLIS, MKL,
# ...) is left alone. Skipped with --minimal.
use_openblas() {
  [ $minimal -eq 0 ] || return 0
  dpkg-query -W -f='${Status}' libopenblas0-pthread 2>/dev/null | grep -q "install ok installed" || return 0
  local lib target alt value
  for lib in libblas.so.3 liblapack.so.3; do
    target=$(dpkg -L libopenblas0-pthread | grep "/openblas-pthread/$lib\$") || continue
    alt="$lib-$(basename "$(dirname "$(dirname "$target")")")"  # libblas.so.3-x86_64-linux-gnu
    value=$(update-alternatives --query "$alt" 2>/dev/null | sed -n 's/^Value: //p')
    case "$value" in
      */blas/libblas.so.3 | */lapack/liblapack.so.3 | */openblas-serial/* | "")
        echo "setup: $alt pointed at ${value:-nothing} (single-threaded); pointing it at OpenBLAS (pthread)"
        as_root update-alternatives --quiet --auto "$alt"
        value=$(update-alternatives --query "$alt" | sed -n 's/^Value: //p')
        if [ "$value" != "$target" ]; then
          as_root update-alternatives --quiet --set "$alt" "$target"
          value=$target
        fi
        ;;
    esac
    echo "setup: $lib -> $value"
  done
}

# The Python bindings' build and test packages from PyPI (pybind11, numpy, pytest, nbclient, ...;
# prometheus-client parses the live metrics in tests/cli_live_metrics.sh),
# installed with the python3 on PATH when missing. Skipped with --minimal (bindings are optional).
setup_python() {
  [ $minimal -eq 0 ] || return 0
  command -v python3 >/dev/null || return 0
  local pkgs=(pybind11 numpy pytest nbclient nbformat ipykernel matplotlib scikit-build-core prometheus-client) need=() p
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

# timm and safetensors from PyPI for Debian's own Python (/usr/bin/python3, where python3-torch
# lives), without their dependencies: the reference the weight tests compare against
# (tests/timm/). Pinned, so the reference does not move under the tests. Skipped with --minimal.
setup_timm() {
  [ $minimal -eq 0 ] || return 0
  [ -x /usr/bin/python3 ] && /usr/bin/python3 -c "import torch" 2>/dev/null || return 0
  if /usr/bin/python3 -c "import timm, safetensors, sys; sys.exit(timm.__version__ != '1.0.12')" 2>/dev/null; then
    echo "setup: timm 1.0.12 and safetensors already installed for /usr/bin/python3"
    return 0
  fi
  echo "setup: pip installing timm 1.0.12 and safetensors 0.8.0 for /usr/bin/python3 (--no-deps)"
  as_root /usr/bin/python3 -m pip install --quiet --disable-pip-version-check --break-system-packages --no-deps \
    timm==1.0.12 safetensors==0.8.0
}

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#want[@]} packages already installed"
  use_openblas
  setup_python
  setup_timm
  exit 0
fi

if [ "$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null; then
  echo "setup: need root or sudo to install: ${missing[*]}" >&2
  exit 1
fi
echo "setup: installing ${missing[*]}"
as_root apt-get update -qq
as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
use_openblas
setup_python
setup_timm
echo "setup: done"
