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
)

want=("${required[@]}")
[ $minimal -eq 1 ] || want+=("${optional[@]}")

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#want[@]} packages already installed"
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
echo "setup: done"
