#!/usr/bin/env bash
# Sets up and runs zshard's whole test suite on a fresh Debian 12 machine:
# installs the packages, builds everything (warnings are errors), runs every
# ctest label (gpu tests skip without a device), then fuzzes the spec parser
# briefly. Exit status is non-zero when anything fails.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

if [[ $(id -u) -eq 0 ]]; then
  bash deploy/install-deps.sh
else
  sudo bash deploy/install-deps.sh
fi

jobs=$(nproc)
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)

cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DZSHARD_WERROR=ON
cmake --build build -j"$jobs"

# Fuzz targets need clang's libFuzzer: a separate, small build.
fuzz_status=0
if command -v clang++-14 >/dev/null || command -v clang++ >/dev/null; then
  cxx=$(command -v clang++-14 || command -v clang++)
  cc=$(command -v clang-14 || command -v clang)
  cmake -S . -B build-fuzz "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
    -DZSHARD_FUZZ=ON -DZSHARD_WITH_CUDA=OFF -DZSHARD_FUZZ_ONLY=ON >/dev/null
  cmake --build build-fuzz -j"$jobs" --target zshard_fuzz_targets
fi

cd build
ctest --output-on-failure -j"$jobs" --timeout 600 "$@"
cd "$root"
if [[ -d build-fuzz ]]; then
  (cd build-fuzz && ctest --output-on-failure -L fuzz) || fuzz_status=$?
fi
exit $fuzz_status
