#!/usr/bin/env bash
# The build enforces a layer: the layer's libraries build, while a probe
# that reaches across the layer's boundary must fail to build, for the one
# reason given (the missing header or symbol), not for another.
# Usage: layer_probe_test.sh BUILD_DIR "LAYER TARGETS" PROBE_TARGET PATTERN WHAT
#   PATTERN: an extended regex the build's error output must match.
#   WHAT:    what the probe shows, for the message ("a wire type ...").
set -uo pipefail
build_dir=${1:?usage: layer_probe_test.sh BUILD_DIR TARGETS PROBE PATTERN WHAT}
read -r -a layer <<<"${2:?layer targets missing}"
probe=${3:?probe target missing}
pattern=${4:?pattern missing}
what=${5:?description missing}
out=$(cmake --build "$build_dir" --target "${layer[@]}" 2>&1) || {
  echo "FAILED: the layer's own targets (${layer[*]}) do not build:"
  echo "$out" | tail -20
  exit 1
}
out=$(cmake --build "$build_dir" --target "$probe" 2>&1)
rc=$?
if ((rc == 0)); then
  echo "FAILED: $what was allowed ($probe built)"
  exit 1
fi
if ! grep -Eq "$pattern" <<<"$out"; then
  echo "FAILED: $probe failed for another reason than the one expected ($pattern):"
  echo "$out" | tail -20
  exit 1
fi
echo "$what is refused: $(grep -Em1 "$pattern" <<<"$out")"
