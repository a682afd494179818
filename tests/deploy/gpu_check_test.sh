#!/usr/bin/env bash
# Tests of deploy/gpu-check.sh that need no GPU: --help, --list (what each
# selection lists, in order), every bad usage (exit 2, one line), the report
# of a machine without a GPU (one SKIP line per check, the summary, exit 3),
# and, when the binaries are built, its training check run for real on the
# CPU (a coordinator and a worker; PASS with the loss).
# Usage: gpu_check_test.sh BUILD_DIR
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
script=$root/deploy/gpu-check.sh
build_dir=${1:?usage: gpu_check_test.sh BUILD_DIR}
tmp=$(mktemp -d /tmp/zshard-gpu-check-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
failures=0

fail() {
  echo "FAILED: $*"
  failures=$((failures + 1))
}

# run ARGS...: runs the script; sets out, err and rc.
run() {
  rc=0
  bash "$script" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
  out=$(cat "$tmp/out")
  err=$(cat "$tmp/err")
}

expect_rc() {
  [[ $rc == "$1" ]] || fail "$2: exit $rc, not $1 (stdout: $out; stderr: $err)"
}

# --- --help and --list --------------------------------------------------------
run --help
expect_rc 0 "--help"
[[ $out == "usage: bash deploy/gpu-check.sh"* ]] || fail "--help printed: $out"
for flag in --build-dir --no-build --only --list --log-dir --gpus --train-device; do
  [[ $out == *"$flag"* ]] || fail "--help does not mention $flag"
done

# list_names ARGS...: the check names --list prints, space-separated.
list_names() {
  run --list "$@"
  expect_rc 0 "--list $*"
  awk '{print $1}' <<<"$out" | paste -sd' ' -
}
[[ $(list_names) == "build gpu-tests adam collectives train trainer" ]] ||
  fail "--list: $(list_names)"
[[ $(list_names --no-build) == "gpu-tests adam collectives train trainer" ]] ||
  fail "--list --no-build: $(list_names --no-build)"
[[ $(list_names --only train,adam) == "train adam" ]] ||
  fail "--list --only train,adam: $(list_names --only train,adam)"
run --list
while read -r name description; do
  [[ -n $description ]] || fail "--list: check $name has no description"
done <<<"$out"

# --- bad usage: exit 2, one line on stderr, nothing on stdout ----------------
for args in "--bogus" "--no-build --build-dir /nonexistent" "--only nosuch" "--only adam,nosuch" "--gpus x" \
  "--gpus -1" "--train-device tpu" "--build-dir" "--only"; do
  # shellcheck disable=SC2086
  run $args
  expect_rc 2 "$args"
  [[ -z $out ]] || fail "$args printed on stdout: $out"
  [[ $(wc -l <"$tmp/err") == 1 && $err == "gpu-check: "* ]] ||
    fail "$args: stderr is not one 'gpu-check: ...' line: $err"
done

# --- a machine without a GPU -------------------------------------------------
run --gpus 0 --no-build --build-dir "$build_dir" --log-dir "$tmp/logs"
expect_rc 3 "no GPU"
expected="SKIP gpu-tests no GPU on this machine (--gpus 0)
SKIP adam no GPU on this machine (--gpus 0)
SKIP collectives no GPU on this machine (--gpus 0)
SKIP train no GPU on this machine (--gpus 0)
SKIP trainer no GPU on this machine (--gpus 0)
SUMMARY pass=0 fail=0 skip=5 gpus=0 logs=$tmp/logs"
[[ $out == "$expected" ]] || fail "no GPU: printed
$out
instead of
$expected"
run --gpus 0 --log-dir "$tmp/logs" --only build,adam
expect_rc 3 "no GPU, build"
[[ $out == "SKIP build no GPU"*$'\n'"SKIP adam no GPU"*$'\n'"SUMMARY pass=0 fail=0 skip=2 "* ]] ||
  fail "no GPU with a build: $out"

# --- the training check, for real on the CPU ----------------------------------
if [[ -x $build_dir/bin/zshard-coordinator && -x $build_dir/bin/zshard-worker ]]; then
  run --gpus 0 --no-build --build-dir "$build_dir" --only train --train-device cpu \
    --log-dir "$tmp/train"
  expect_rc 0 "training on cpu"
  [[ $out == "PASS train loss "*" at step 200/200, median step "*" ms "*", on cpu"$'\n'"SUMMARY pass=1 fail=0 skip=0 "* ]] ||
    fail "training on cpu printed: $out"
  # A worker that cannot start is one FAIL line naming it and why.
  run --gpus 1 --no-build --build-dir "$build_dir" --only train --log-dir "$tmp/train-cuda"
  if [[ $out == "PASS train "* ]]; then
    echo "note: this machine trains on cuda:0"
  else
    expect_rc 1 "training on a GPU that is not there"
    [[ $out == "FAIL train worker w0 (cuda:0) exited "* ]] ||
      fail "training without a GPU printed: $out"
  fi
  # The trainer check needs torch with CUDA: without it, one SKIP line
  # saying what python3's torch lacks.
  run --gpus 1 --no-build --build-dir "$build_dir" --only trainer --log-dir "$tmp/trainer"
  if [[ $out == "PASS trainer "* ]]; then
    echo "note: this machine trains a PyTorch model on cuda:0"
  else
    expect_rc 3 "the trainer check without torch's CUDA"
    [[ $out == "SKIP trainer "*" has no CUDA device"* || $out == "SKIP trainer python3 cannot import torch: "* ]] ||
      fail "the trainer check without torch's CUDA printed: $out"
  fi
else
  echo "skipped the training run: $build_dir/bin has no zshard-coordinator/zshard-worker"
fi

# --- deploy/gpu-pack.sh ----------------------------------------------------------
pack=$root/deploy/gpu-pack.sh
rc=0
bash "$pack" >"$tmp/out" 2>"$tmp/err" || rc=$?
[[ $rc == 2 && $(cat "$tmp/err") == "gpu-pack: name the archive to write (see --help)" ]] ||
  fail "gpu-pack without an archive: exit $rc, $(cat "$tmp/err")"
rc=0
bash "$pack" --build-dir /tmp "$tmp/x.tar.gz" >"$tmp/out" 2>"$tmp/err" || rc=$?
[[ $rc == 2 && $(cat "$tmp/err") == "gpu-pack: '/tmp' is not a configured build" ]] ||
  fail "gpu-pack of a directory that is no build: exit $rc, $(cat "$tmp/err")"

if ((failures > 0)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all gpu-check.sh checks passed"
