#!/usr/bin/env bash
# cmake/FindNCCL.cmake and FindCUDNN.cmake find a library shipped only under its versioned name,
# as NVIDIA's wheels ship them (libnccl.so.2, libcudnn.so.9; no unversioned link), in NCCL_HOME /
# CUDNN_HOME, ahead of the toolkit's own copy, and read the version from the headers.
#   tests/cmake/find_versioned.sh <source dir>
set -euo pipefail
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/nccl/include" "$tmp/nccl/lib" "$tmp/cudnn/include" "$tmp/cudnn/lib" "$tmp/proj"
printf '#define NCCL_MAJOR 2\n#define NCCL_MINOR 77\n' >"$tmp/nccl/include/nccl.h"
printf '#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 77\n' >"$tmp/cudnn/include/cudnn_version.h"
touch "$tmp/cudnn/include/cudnn.h"
cp /dev/null "$tmp/nccl/lib/libnccl.so.2"
cp /dev/null "$tmp/cudnn/lib/libcudnn.so.9"
cat >"$tmp/proj/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.22)
project(find_versioned NONE)
list(APPEND CMAKE_MODULE_PATH "$src/cmake")
find_package(NCCL REQUIRED)
find_package(CUDNN REQUIRED)
message(STATUS "result NCCL \${NCCL_LIBRARY} \${NCCL_VERSION}")
message(STATUS "result CUDNN \${CUDNN_LIBRARY} \${CUDNN_VERSION}")
CMAKE
out=$(NCCL_HOME=$tmp/nccl CUDNN_HOME=$tmp/cudnn cmake -S "$tmp/proj" -B "$tmp/build" 2>&1) ||
  { echo "$out"; echo "FAIL: configure"; exit 1; }
grep -q "result NCCL $tmp/nccl/lib/libnccl.so.2 2.77" <<<"$out" || { echo "$out"; echo "FAIL: NCCL"; exit 1; }
grep -q "result CUDNN $tmp/cudnn/lib/libcudnn.so.9 9.77" <<<"$out" || { echo "$out"; echo "FAIL: CUDNN"; exit 1; }
echo "FindNCCL/FindCUDNN: versioned names found in NCCL_HOME/CUDNN_HOME"
