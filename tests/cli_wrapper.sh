#!/usr/bin/env bash
# tools/tessera builds what each subcommand needs: the targets it names for `backends`, `launch`,
# `--backend ucx` and `studio` contain the link of the ucx plugin (and of tessera-studio), those
# for `train` do not, nor the cuda compute backend's unless `--device cuda` asks for it; then `tools/tessera backends` run through the wrapper shows ucx loaded.
#   tests/cli_wrapper.sh <source dir> <build dir> <ninja> <studio: 0|1>
#
# How this proves it without a second full build: tools/tessera takes its build tree from
# TESSERA_BUILD_DIR, so it is pointed at the tree this test runs in (build/ci in CI), which the
# suite has already built. TESSERA_PRINT_TARGETS=1 makes it print the targets it would build, and
# `ninja -t commands` lists every command that building those targets runs, whether up to date
# or not: the plugin's link must be among them. Running it for real then goes through the
# wrapper's staleness check and (a no-op) build before the command, as a user's first call does.
set -euo pipefail
src=$1 build=$2 ninja=$3 studio=$4
wrapper="$src/tools/tessera"
export TESSERA_BUILD_DIR=$build
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

targets_of() { TESSERA_PRINT_TARGETS=1 "$wrapper" "$@"; }
# links ARGS...: the output files of the link commands building the targets `tessera ARGS` needs.
links() {
  local t
  mapfile -t t < <(targets_of "$@")
  [ ${#t[@]} -gt 0 ] || { echo "tools/tessera $*: printed no targets"; exit 1; }
  "$ninja" -C "$build" -t commands "${t[@]}" >"$tmp/commands"
  { grep -oE -- ' -o [^ ]*(\.so|/tessera|/tessera-studio)( |$)' "$tmp/commands" || true; } |
    sed 's/^ -o //; s/ $//' | sort -u
}
has() {  # has FILE ARGS...: building for `tessera ARGS` links FILE
  local file=$1 l; shift
  l=$(links "$@")
  grep -qx -- "$file" <<<"$l" || { echo "tools/tessera $* does not build $file; it links:"; echo "$l"; exit 1; }
}
lacks() {  # lacks FILE ARGS...: building for `tessera ARGS` does not link FILE
  local file=$1 l; shift
  l=$(links "$@")
  ! grep -qx -- "$file" <<<"$l" || { echo "tools/tessera $* builds $file, which it does not need"; exit 1; }
}

ucx=lib/tessera/plugins/libtessera-comm-ucx.so
has tools/tessera train --steps 3
lacks "$ucx" train --steps 3
lacks "$ucx" train --backend local
lacks "$ucx" halo --kernel 3
has "$ucx" backends
has "$ucx" launch --nproc 2 -- train --backend ucx --steps 3
has "$ucx" train --backend ucx
has "$ucx" calibrate --backend=ucx
# The cuda compute backend (where CUDA was found): only for --device cuda and backends, so the
# first `tools/tessera train` compiles no CUDA.
cuda=lib/tessera/plugins/libtessera_compute_cuda.so
if [ -f "$build/$cuda" ]; then
  lacks "$cuda" train --steps 3
  lacks "$cuda" train --device cpu
  has "$cuda" train --device cuda --steps 3
  has "$cuda" train --device=cuda:1
  has "$cuda" calibrate --device cuda
  has "$cuda" backends
fi
if [ "$studio" = 1 ]; then
  has tools/tessera-studio studio --screenshot shots
  lacks tools/tessera-studio backends
fi
echo "cli_wrapper: targets per subcommand check out ($(targets_of backends | tr '\n' ' '))"

# The real thing, through the wrapper: its build step (a no-op here) and then the command.
out=$("$wrapper" backends 2>&1) || { echo "tools/tessera backends failed:"; echo "$out"; exit 1; }
echo "$out"
echo "$out" | grep -qE '^  ucx +loaded ' || { echo "ucx is not loaded"; exit 1; }
