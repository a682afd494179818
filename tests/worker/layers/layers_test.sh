#!/usr/bin/env bash
# The build keeps wire types in session/: compiling a probe of the training
# layer that includes a generated proto header must fail for want of that
# header (the protos are generated first, so it is the include path that is
# missing), while the layer's own libraries build.
# Usage: layers_test.sh BUILD_DIR
set -uo pipefail
build_dir=${1:?usage: layers_test.sh BUILD_DIR}
out=$(cmake --build "$build_dir" --target zshard_worker_train zshard_proto 2>&1) || {
  echo "FAILED: the worker's training layer does not build:"
  echo "$out" | tail -20
  exit 1
}
out=$(cmake --build "$build_dir" --target worker_wire_type_probe 2>&1)
rc=$?
if ((rc == 0)); then
  echo "FAILED: a wire type compiled in the training layer (worker_wire_type_probe built)"
  exit 1
fi
if ! grep -q 'worker_service.pb.h' <<<"$out"; then
  echo "FAILED: the probe failed for another reason than the missing proto header:"
  echo "$out" | tail -20
  exit 1
fi
echo "the training layer cannot include a wire type: $(grep -m1 'worker_service.pb.h' <<<"$out")"
