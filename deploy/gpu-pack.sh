#!/usr/bin/env bash
# Packs a CUDA build of zshard for a GPU machine that has the NVIDIA driver
# but not zshard's build dependencies (gRPC, protobuf, absl, Gloo, SQLite):
# the binaries, every gpu-labelled test and the helpers it runs, the ctest files,
# and the shared libraries they load that such a machine may lack, into one
# archive of paths relative to the repository root.
#
#   bash deploy/gpu-pack.sh [--build-dir DIR] OUT.tar.gz
#
# On the GPU machine, in a checkout of the same commit at the same path as
# the build (ctest's files and the tests name absolute paths):
#
#   tar -xzf OUT.tar.gz && bash deploy/gpu-check.sh --no-build
#
# gpu-check.sh puts DIR/lib-bundle on the library path. Left out, as the GPU
# machine's own: the C library and the loader, the CUDA driver (libcuda) and
# NCCL (libnccl, over 200 MB; gpu-check.sh finds the machine's, also the one
# PyTorch's wheels install).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=$root/build-gpu
out=""
while (($#)); do
  case $1 in
    --build-dir)
      (($# >= 2)) || { echo "gpu-pack: --build-dir needs a value" >&2; exit 2; }
      build_dir=$(cd "$2" && pwd) || exit 2
      shift 2
      ;;
    -h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' && exit 0 ;;
    -*) echo "gpu-pack: unknown argument '$1'" >&2 && exit 2 ;;
    *) out=$1 && shift ;;
  esac
done
[[ -n $out ]] || { echo "gpu-pack: name the archive to write (see --help)" >&2; exit 2; }
[[ -f $build_dir/CTestTestfile.cmake ]] ||
  { echo "gpu-pack: '$build_dir' is not a configured build" >&2; exit 2; }
case $build_dir in
  "$root"/*) rel=${build_dir#"$root"/} ;;
  *) echo "gpu-pack: the build directory must be inside $root" >&2 && exit 2 ;;
esac

# The binaries, the gpu-labelled tests' executables, and the test helpers
# they spawn by path (executables of tests/ not named *_test, such as
# cuda_ipc_peer).
mapfile -t exes < <(
  {
    find "$build_dir/bin" -maxdepth 1 -type f -perm -u+x
    find "$build_dir/tests" -type f -perm -u+x ! -name '*_test' ! -name '*.so*' \
      ! -path '*/CMakeFiles/*'
    ctest --test-dir "$build_dir" --show-only=json-v1 -L gpu 2>/dev/null |
      python3 -c 'import json, sys
for t in json.load(sys.stdin).get("tests", []):
    print(t.get("command", [""])[0])'
  } | sort -u | while IFS= read -r f; do [[ -x $f ]] && echo "$f"; done
)
((${#exes[@]})) || { echo "gpu-pack: no executable in $build_dir (not built?)" >&2; exit 1; }

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/$rel/lib-bundle"
for f in "${exes[@]}"; do
  dest=$stage/${f#"$root"/}
  mkdir -p "$(dirname "$dest")"
  # Stripped: the symbols are for this machine's debugger, not the GPU's.
  strip --strip-unneeded -o "$dest" "$f" 2>/dev/null || cp "$f" "$dest"
done
while IFS= read -r f; do
  dest=$stage/${f#"$root"/}
  mkdir -p "$(dirname "$dest")"
  cp "$f" "$dest"
done < <(find "$build_dir" -name CTestTestfile.cmake ! -path '*/CMakeFiles/*')

# Shared libraries, as the loader resolves them here.
declare -A libs=()
for f in "${exes[@]}"; do
  while read -r name path; do
    case $name in
      linux-vdso* | ld-linux* | libc.so* | libm.so* | libdl.so* | libpthread.so* | \
        librt.so* | libcuda.so* | libnccl.so*) continue ;;
    esac
    [[ -n $path && -f $path ]] && libs[$path]=1
  done < <(ldd "$f" 2>/dev/null | awk '$2 == "=>" {print $1, $3}')
done
for path in "${!libs[@]}"; do
  cp -L "$path" "$stage/$rel/lib-bundle/$(basename "$path")"
done
tar -czf "$out" -C "$stage" .
echo "gpu-pack: ${#exes[@]} executables, ${#libs[@]} libraries, $(du -h "$out" | cut -f1) in $out (from $build_dir)"
