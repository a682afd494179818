#!/usr/bin/env bash
# The one command for a GPU machine: builds zshard with CUDA, then runs what
# is meant to run on a GPU and prints exactly one line per check,
#   PASS|FAIL|SKIP <check> <figure>
# then one summary line. Every step is bounded: after the build, at most
# 170 s of gpu tests, 60 s of adam, 90 s of collectives, 20 + 90 s of
# training and twice 20 + 120 s of the trainer check, plus 10 s of grace for
# each command `timeout` has to kill: 12 min 20 s on a one-GPU machine, far
# less when all goes well (about 2 min). Details of each step go to files in
# the log directory the summary names; env.log says which libraries the
# binaries load. A build packed by deploy/gpu-pack.sh runs where the build
# dependencies are missing (--no-build).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

usage() {
  cat <<'EOF'
usage: bash deploy/gpu-check.sh [--build-dir DIR] [--no-build] [--only LIST]
                                [--list] [--log-dir DIR] [--gpus N]
                                [--train-device cuda|cpu] [--help]
Builds zshard with CUDA and checks it on this machine's GPUs, one line per
check: PASS|FAIL|SKIP <check> <figure>, then a summary line.
  --build-dir DIR   build here (default <repo>/build-gpu, configured with
                    -DZSHARD_WITH_CUDA=ON)
  --no-build        use DIR as it is (it must be a CUDA build)
  --only LIST       run only these checks (comma-separated; see --list)
  --list            list the checks and what each measures; run nothing
  --log-dir DIR     where the logs go (default a new /tmp/zshard-gpu-check.*)
  --gpus N          take N GPUs as present instead of asking nvidia-smi
                    (0 shows what a machine without a GPU reports)
  --train-device D  the training check's device: cuda (default) or cpu
                    (cpu runs it on a machine without a GPU, to try it)
Exit status: 0 every check run passed; 1 a check failed; 2 bad usage;
3 nothing was checked (no GPU: every check is SKIP).
EOF
}

all_checks=(build gpu-tests adam collectives train trainer)

describe() {
  case $1 in
    build) echo "configure with -DZSHARD_WITH_CUDA=ON and build the binaries and every gpu-labelled test; figure: seconds" ;;
    gpu-tests) echo "ctest -L gpu (every gpu-labelled test); figure: tests passed, gtest cases ok/skipped/failed" ;;
    adam) echo "zshard-bench adam --device cuda; figure: Adam's bandwidth / device-to-device copy bandwidth (target >= 0.85)" ;;
    collectives) echo "zshard-bench collectives --device cuda, one rank per GPU; figure: Communicator / raw NCCL, reduce-scatter and all-gather (target >= 0.95)" ;;
    train) echo "a local coordinator and 1 worker on cuda:0 (2 on cuda:0 and cuda:1 with 2+ GPUs) train the regression MLP; figure: final loss, median step time" ;;
    trainer) echo "deploy/demo/charlm.py on cuda:0 attached to a cuda:0 daemon (CUDA IPC), then on cpu; figure: loss, cuda against cpu step by step (needs torch with CUDA)" ;;
  esac
}

bad_usage() {
  echo "gpu-check: $1 (see --help)" >&2
  exit 2
}

# --- helpers ------------------------------------------------------------------
# detect_gpus: sets gpus (how many this machine has) and gpu_source (how
# that was found).
detect_gpus() {
  gpus=0
  if command -v nvidia-smi >/dev/null 2>&1; then
    gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
    gpu_source="nvidia-smi -L lists $gpus"
  elif [[ -d /proc/driver/nvidia/gpus ]]; then
    gpus=$(find /proc/driver/nvidia/gpus -mindepth 1 -maxdepth 1 | wc -l)
    gpu_source="/proc/driver/nvidia/gpus lists $gpus"
  else
    gpu_source="no nvidia-smi, no /proc/driver/nvidia"
  fi
}
# report STATUS CHECK FIGURE...: the check's one line.
report() {
  local status=$1 check=$2
  shift 2
  printf '%s %s %s\n' "$status" "$check" "$*"
  case $status in
    PASS) npass=$((npass + 1)) ;;
    FAIL) nfail=$((nfail + 1)) ;;
    *) nskip=$((nskip + 1)) ;;
  esac
}

# The first line of FILE matching the error patterns (else its last line),
# cut to 160 characters.
first_error() {
  local line
  # A Python traceback's exception line, else the first line that says so.
  line=$(grep -m1 -E '^[A-Za-z_][A-Za-z0-9_.]*(Error|Exception|Lost): ' "$1" 2>/dev/null)
  [[ -n $line ]] || line=$(grep -m1 -iE 'error|fatal|failed' "$1" 2>/dev/null)
  [[ -n $line ]] || line=$(grep -v '^[[:space:]]*$' "$1" 2>/dev/null | tail -1)
  echo "${line:0:160}"
}

# Names of the gpu-labelled tests of the build directory.
gpu_tests() {
  ctest --test-dir "$build_dir" -N -L gpu 2>/dev/null |
    sed -n 's/^ *Test *#[0-9]*: *//p'
}

# timed_out RC: true when `timeout` stopped the command (124; 137 after -k).
timed_out() { [[ $1 -eq 124 || $1 -eq 137 ]]; }

# --- one function per check -----------------------------------------------
check_build() {
  local log=$log_dir/build.log start=$SECONDS arch=() generator=() cap tests
  command -v ninja >/dev/null && generator=(-G Ninja)
  # Only this machine's architecture: a shorter build.
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  [[ $cap =~ ^[0-9]+$ ]] && arch=(-DCMAKE_CUDA_ARCHITECTURES="$cap")
  if ! timeout -k 10 600 cmake -S "$root" -B "$build_dir" "${generator[@]}" \
    -DCMAKE_BUILD_TYPE=Release -DZSHARD_WITH_CUDA=ON -DZSHARD_WERROR=ON \
    "${arch[@]}" >"$log" 2>&1; then
    report FAIL build "configure failed: $(first_error "$log") (log $log)"
    return
  fi
  mapfile -t tests < <(gpu_tests)
  if ! timeout -k 10 3600 cmake --build "$build_dir" -j"$(nproc)" --target \
    zshard-coordinator zshard-worker zshardctl zshard-bench "${tests[@]}" \
    >>"$log" 2>&1; then
    report FAIL build "build failed: $(first_error "$log") (log $log)"
    return
  fi
  report PASS build "$((SECONDS - start))s, ${#tests[@]} gpu tests, in $build_dir"
}

check_gpu_tests() {
  local log=$log_dir/gpu-tests.log rc=0 tests ok skipped failed figure names
  mapfile -t tests < <(gpu_tests)
  if ((${#tests[@]} == 0)); then
    report FAIL gpu-tests "no gpu-labelled test in $build_dir (not a CUDA build?)"
    return
  fi
  timeout -k 10 170 ctest --test-dir "$build_dir" -L gpu --timeout 150 -V >"$log" 2>&1 || rc=$?
  ok=$(grep -cE '\[       OK \] [^ ]+ \([0-9]+ ms\)' "$log")
  skipped=$(grep -cE '\[  SKIPPED \] [^ ]+ \([0-9]+ ms\)' "$log")
  failed=$(grep -cE '\[  FAILED  \] [^ ]+ \([0-9]+ ms\)' "$log")
  figure="gtest cases ok $ok, skipped $skipped, failed $failed"
  if timed_out "$rc"; then
    report FAIL gpu-tests "timed out after 170s; $figure (log $log)"
  elif ((rc != 0)); then
    names=$(sed -n 's/^[[:space:]]*[0-9]* - \([^ ]*\) .*/\1/p' "$log" | paste -sd, -)
    report FAIL gpu-tests "failed: ${names:-see log}; $figure (log $log)"
  elif ((ok == 0)); then
    report FAIL gpu-tests "every case skipped (is the GPU usable?); $figure (log $log)"
  else
    report PASS gpu-tests "${#tests[@]}/${#tests[@]} tests passed; $figure"
  fi
}

# json_field FILE EXPR: the value of a Python expression over `j`, the JSON
# object in FILE; empty when FILE holds none or EXPR fails on it.
json_field() {
  python3 - "$1" "$2" 2>/dev/null <<'PY'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
    print(eval(sys.argv[2], {"j": j}))
except Exception:
    pass
PY
}

# at_least VALUE MIN: true when the number VALUE >= MIN.
at_least() { python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= float(sys.argv[2]) else 1)' "$1" "$2" 2>/dev/null; }

check_adam() {
  local out=$log_dir/adam.json err=$log_dir/adam.err rc=0 fraction figure
  timeout -k 10 60 "$bin/zshard-bench" adam --device cuda --params 134217728 \
    --steps 50 --output json >"$out" 2>"$err" || rc=$?
  if timed_out "$rc"; then
    report FAIL adam "timed out after 60s (log $err)"
    return
  fi
  fraction=$(json_field "$out" 'j["fraction_of_copy"]')
  if ((rc != 0)) || [[ -z $fraction ]]; then
    report FAIL adam "exit $rc: $(first_error "$err")"
    return
  fi
  figure=$(json_field "$out" '"%.3f of device copy bandwidth (adam %.0f GB/s, copy %.0f GB/s, %d params; target >= 0.85)" % (j["fraction_of_copy"], j["bytes_per_s"] / 1e9, j["copy_bytes_per_s"] / 1e9, j["params"])')
  if at_least "$fraction" 0.85; then
    report PASS adam "$figure"
  else
    report FAIL adam "$figure"
  fi
}

check_collectives() {
  local out=$log_dir/collectives.json err=$log_dir/collectives.err rc=0 worst why figure
  timeout -k 10 90 "$bin/zshard-bench" collectives --device cuda --ranks "$gpus" \
    --bytes 1073741824 --dtype fp32 --iters 20 --output json \
    >"$out" 2>"$err" || rc=$?
  if timed_out "$rc"; then
    report FAIL collectives "timed out after 90s (log $err)"
    return
  fi
  worst=$(json_field "$out" 'min(j["ratios"]["reduce_scatter_vs_raw_nccl"], j["ratios"]["all_gather_vs_raw_nccl"])')
  if ((rc != 0)) || [[ -z $worst ]]; then
    why=$(json_field "$out" 'j["raw_nccl_error"]')
    report FAIL collectives "exit $rc: ${why:-$(first_error "$err")}"
    return
  fi
  figure=$(json_field "$out" '"reduce-scatter %.3fx, all-gather %.3fx, all-reduce %.3fx of raw NCCL (%d ranks, %d MiB fp32, reduce-scatter %.2f ms; target >= 0.95)" % (j["ratios"]["reduce_scatter_vs_raw_nccl"], j["ratios"]["all_gather_vs_raw_nccl"], j["ratios"]["all_reduce_vs_raw_nccl"], j["ranks"], j["bytes"] >> 20, j["results"][0]["time_s"] * 1e3)')
  if at_least "$worst" 0.95; then
    report PASS collectives "$figure"
  else
    report FAIL collectives "$figure"
  fi
}

# write_job FILE WORLD STEPS: deploy/demo's regression MLP on WORLD ranks
# of one instance.
write_job() {
  cat >"$1" <<EOF
{"name": "gpu-check",
 "model": {"params": [
   {"name": "fc1.weight", "shape": [256, 64], "dtype": "bf16"},
   {"name": "fc1.bias", "shape": [256], "dtype": "bf16", "no_weight_decay": true},
   {"name": "fc2.weight", "shape": [8, 256], "dtype": "bf16"},
   {"name": "fc2.bias", "shape": [8], "dtype": "bf16", "no_weight_decay": true}]},
 "layout": {"bucket_size": 4096},
 "optimizer": {"lr": 0.005, "weight_decay": 0.01, "clip_grad_norm": 1.0},
 "world": {"instances": 1, "min": $2, "max": $2},
 "lease_timeout_ms": 3000, "heartbeat_interval_ms": 300,
 "workload": {"kind": "regression", "steps": $3, "global_batch": 64}}
EOF
}

# Processes this script started (killed and reaped at the end of a check
# and at exit).
started=()
stop_started() {
  local p
  for p in "${started[@]}"; do kill -9 "$p" 2>/dev/null; done
  for p in "${started[@]}"; do wait "$p" 2>/dev/null; done
  started=()
}
trap stop_started EXIT

# The loss and step time the first worker logged: "PASS|FAIL <figure>".
train_verdict() {
  python3 - "$@" <<'PY'
import json, math, statistics, sys
log, steps, devices = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rows = []
for line in open(log):
    try:
        j = json.loads(line)
    except ValueError:
        continue
    if j.get("msg") == "step" and "loss" in j:
        rows.append((int(j["step"]), float(j["loss"]), float(j["step_ms"])))
if not rows:
    print("FAIL no step was logged by w0 on", devices)
    sys.exit()
first, last = rows[0], rows[-1]
median = statistics.median(r[2] for r in rows)
ok = last[0] == steps and math.isfinite(last[1]) and last[1] < first[1]
print("PASS" if ok else "FAIL",
      f"loss {first[1]:.4g} -> {last[1]:.4g} at step {last[0]}/{steps},",
      f"median step {median:.3g} ms (of the steps logged), on {devices}")
PY
}

# start_coordinator DIR: a coordinator of DIR/job.json; sets addr, empty
# when it did not listen within 20 s.
start_coordinator() {
  local dir=$1 pid deadline
  addr=""
  "$bin/zshard-coordinator" --job "$dir/job.json" --listen 127.0.0.1:0 \
    --state-dir "$dir/state" >"$dir/coordinator.out" 2>"$dir/coordinator.log" &
  pid=$!
  started+=("$pid")
  deadline=$((SECONDS + 20))
  while [[ -z $addr ]] && ((SECONDS < deadline)) && kill -0 "$pid" 2>/dev/null; do
    addr=$(grep -o 'listening on [0-9.:]*' "$dir/coordinator.out" | head -1 | awk '{print $3}')
    [[ -n $addr ]] || sleep 0.2
  done
}

# await_exits SECONDS PID|NAME|LOG...: waits until every process has exited,
# one has failed, or SECONDS pass; sets failed to the first one that exited
# non-zero or is still running (with the first error of its LOG), else
# empty.
await_exits() {
  local limit=$1 deadline entry pid name log code
  shift
  local -A codes=()
  deadline=$((SECONDS + limit))
  failed=""
  while ((${#codes[@]} < $#)) && ((SECONDS < deadline)); do
    for entry in "$@"; do
      IFS='|' read -r pid name log <<<"$entry"
      [[ -n ${codes[$pid]:-} ]] && continue
      kill -0 "$pid" 2>/dev/null && continue
      code=0
      wait "$pid" || code=$?
      codes[$pid]=$code
      if ((code != 0)); then
        failed="$name exited $code: $(first_error "$log")"
        return
      fi
    done
    ((${#codes[@]} < $#)) && sleep 0.2
  done
  for entry in "$@"; do
    IFS='|' read -r pid name log <<<"$entry"
    if [[ -z ${codes[$pid]:-} ]]; then
      failed="$name still running after ${limit}s: $(first_error "$log")"
      return
    fi
  done
}

check_train() {
  local dir=$log_dir/train steps=200 world=1 addr failed i device verdict
  local exits=() devices=()
  [[ $train_device == cuda ]] && ((gpus >= 2)) && world=2
  mkdir -p "$dir"
  write_job "$dir/job.json" "$world" "$steps"
  start_coordinator "$dir"
  if [[ -z $addr ]]; then
    report FAIL train "the coordinator did not start: $(first_error "$dir/coordinator.log")"
    stop_started
    return
  fi
  for ((i = 0; i < world; i++)); do
    device=cpu
    [[ $train_device == cuda ]] && device=cuda:$i
    devices+=("$device")
    "$bin/zshard-worker" --coordinator "$addr" --name "w$i" --device "$device" \
      --log-format json >"$dir/w$i.log" 2>&1 &
    started+=($!)
    exits+=("$!|worker w$i ($device)|$dir/w$i.log")
  done
  # Every worker exits once the job's steps are done, or when it fails.
  await_exits 90 "${exits[@]}"
  stop_started
  if [[ -n $failed ]]; then
    report FAIL train "$failed"
    return
  fi
  verdict=$(train_verdict "$dir/w0.log" "$steps" "${devices[*]}" 2>/dev/null)
  [[ $verdict == "PASS "* || $verdict == "FAIL "* ]] ||
    verdict="FAIL no loss could be read from $dir/w0.log"
  report "${verdict%% *}" train "${verdict#* }"
}

# trainer_job DIR DEVICE TEXT: the trainer check's job (DIR/job.json) with
# one daemon on DEVICE and deploy/demo/charlm.py attached to it, the model
# on DEVICE too; sets failed as await_exits does.
trainer_job() {
  local dir=$1 device=$2 text=$3 addr
  start_coordinator "$dir"
  if [[ -z $addr ]]; then
    failed="the coordinator did not start: $(first_error "$dir/coordinator.log")"
    return
  fi
  "$bin/zshard-worker" --coordinator "$addr" --name t0 --device "$device" \
    --trainer-socket "$dir/t0.sock" --log-format json >"$dir/worker.log" 2>&1 &
  started+=($!)
  local worker=$!
  PYTHONPATH=$root/python:$root/deploy/demo PYTHONDONTWRITEBYTECODE=1 \
    torch_python "$root/deploy/demo/charlm.py" "$dir/t0.sock" --device "$device" \
    --text "$text" --log "$dir/steps.jsonl" >"$dir/trainer.out" 2>"$dir/trainer.log" &
  started+=($!)
  await_exits 120 "$worker|the $device daemon|$dir/worker.log" \
    "$!|the $device trainer|$dir/trainer.log"
  stop_started
}

# The trainer check's verdict from the two runs' step logs: "PASS|FAIL
# <figure>".
trainer_verdict() {
  python3 - "$@" <<'PY'
import json, sys
gpu_log, cpu_log, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
def rows(path):
    try:
        return {r["step"]: r for r in map(json.loads, open(path))}
    except (OSError, ValueError, KeyError):
        return {}
gpu, cpu = rows(gpu_log), rows(cpu_log)
bad = [s for s in range(1, steps + 1)
       if s not in gpu or gpu[s]["failed"] or not gpu[s]["applied"]]
if bad or len(cpu) != steps:
    print("FAIL", "steps missing, failed or skipped on cuda:0: %s; %d of %d "
          "steps on cpu" % (bad[:5], len(cpu), steps))
    sys.exit()
rel = lambda a, b: abs(a - b) / max(abs(b), 1e-30)
first_norm = rel(gpu[1]["grad_norm"], cpu[1]["grad_norm"])
worst = max(rel(gpu[s]["loss_per_char"], cpu[s]["loss_per_char"])
            for s in range(1, steps + 1))
# Step 1 runs on the same initial params: only the order of the sums
# differs. Later steps add the chaos of training on two kinds of hardware.
ok = (first_norm <= 1e-4 and worst <= 1e-2 and
      gpu[steps]["loss_per_char"] < gpu[1]["loss_per_char"])
print("PASS" if ok else "FAIL",
      "loss %.4f -> %.4f nats/char in %d steps through CUDA IPC on cuda:0; "
      "against the same job on cpu: step 1 grad norm within %.1e, loss "
      "within %.1e at every step (limits 1e-4, 1e-2)" % (
          gpu[1]["loss_per_char"], gpu[steps]["loss_per_char"], steps,
          first_norm, worst))
PY
}

# A PyTorch trainer on the GPU: the demo's charlm model on cuda:0 attached
# to a cuda:0 daemon (its buffers mapped by CUDA IPC), then the same job
# with the daemon and the model on the cpu, step by step.
check_trainer() {
  local dir=$log_dir/trainer steps=100 text=/usr/share/common-licenses/GPL-3
  local failed device verdict why
  if ! why=$(torch_python -c 'import torch, sys
sys.exit(0) if torch.cuda.is_available() else print("torch", torch.__version__, "has no CUDA device")' 2>&1); then
    why="python3 cannot import torch: ${why##*$'\n'}"
  fi
  if [[ -n $why ]]; then
    report SKIP trainer "$why"
    return
  fi
  # The demo's text, or any text where Debian's base-files is missing.
  [[ -f $text ]] || text=$root/README.md
  # The demo's job at world 1, shorter; the same for both devices.
  mkdir -p "$dir"
  python3 - "$root/deploy/demo/job.json" "$dir/job.json" "$steps" <<'PY'
import json, sys
job = json.load(open(sys.argv[1]))
job["name"] = "gpu-check-trainer"
job["world"] = {"instances": 1, "min": 1, "max": 1}
job["workload"]["steps"] = int(sys.argv[3])
json.dump(job, open(sys.argv[2], "w"))
PY
  for device in cuda:0 cpu; do
    mkdir -p "$dir/$device"
    cp "$dir/job.json" "$dir/$device/job.json"
    trainer_job "$dir/$device" "$device" "$text"
    if [[ -n $failed ]]; then
      report FAIL trainer "$failed"
      return
    fi
  done
  verdict=$(trainer_verdict "$dir/cuda:0/steps.jsonl" "$dir/cpu/steps.jsonl" "$steps" 2>&1)
  [[ $verdict == "PASS "* || $verdict == "FAIL "* ]] ||
    verdict="FAIL the step logs could not be read: ${verdict:0:160}"
  report "${verdict%% *}" trainer "${verdict#* }"
}

# python3 with the machine's own library path: PyTorch loads the machine's
# libraries, not those of a packed build.
system_library_path=${LD_LIBRARY_PATH-}
torch_python() { LD_LIBRARY_PATH=$system_library_path python3 "$@"; }

# The libraries a packed build brings (deploy/gpu-pack.sh), and NCCL where
# the loader does not find it: PyTorch's wheels carry one. What the binaries
# load goes to env.log.
setup_libraries() {
  local dir
  [[ -d $build_dir/lib-bundle ]] &&
    export LD_LIBRARY_PATH=$build_dir/lib-bundle${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  if [[ -x $bin/zshard-worker ]] && ldd "$bin/zshard-worker" 2>/dev/null | grep -q 'libnccl.* not found'; then
    dir=$(torch_python -c 'import os, nvidia.nccl as n; print(os.path.join(list(n.__path__)[0], "lib"))' 2>/dev/null)
    if [[ ! -f $dir/libnccl.so.2 ]]; then
      dir=$(find /opt /usr/local /usr/lib -name libnccl.so.2 2>/dev/null | head -1)
      dir=${dir%/*}
    fi
    [[ -n $dir && -d $dir ]] && export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$dir
  fi
  {
    echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
    nvidia-smi 2>&1 | head -15
    [[ -x $bin/zshard-worker ]] && ldd "$bin/zshard-worker"
  } >"$log_dir/env.log" 2>&1
}

# --- the command line ----------------------------------------------------------
build_dir=$root/build-gpu
no_build=0
list=0
only=""
log_dir=""
gpus=""
train_device=cuda
while (($#)); do
  case $1 in
    --build-dir | --only | --log-dir | --gpus | --train-device)
      (($# >= 2)) || bad_usage "$1 needs a value"
      value=$2
      shift 2
      ;;&
    --build-dir) build_dir=$value ;;
    --only) only=$value ;;
    --log-dir) log_dir=$value ;;
    --gpus) gpus=$value ;;
    --train-device) train_device=$value ;;
    --no-build) no_build=1 && shift ;;
    --list) list=1 && shift ;;
    -h | --help) usage && exit 0 ;;
    *) bad_usage "unknown argument '$1'" ;;
  esac
done
[[ -z $gpus || $gpus =~ ^[0-9]+$ ]] || bad_usage "--gpus must be a number, not '$gpus'"
[[ $train_device == cuda || $train_device == cpu ]] ||
  bad_usage "--train-device must be cuda or cpu, not '$train_device'"
checks=("${all_checks[@]}")
if [[ -n $only ]]; then
  checks=()
  IFS=, read -ra wanted <<<"$only"
  for c in "${wanted[@]}"; do
    [[ " ${all_checks[*]} " == *" $c "* ]] || bad_usage "unknown check '$c' in --only"
    checks+=("$c")
  done
fi
if ((no_build)); then
  kept=()
  for c in "${checks[@]}"; do [[ $c == build ]] || kept+=("$c"); done
  checks=("${kept[@]}")
fi

if ((list)); then
  for c in "${checks[@]}"; do
    [[ -n $c ]] && printf '%-12s %s\n' "$c" "$(describe "$c")"
  done
  exit 0
fi

# --- what this machine has ------------------------------------------------
if [[ -n $gpus ]]; then
  gpu_source="--gpus $gpus"
else
  detect_gpus
fi
if ((no_build)) && [[ ! -d $build_dir ]]; then
  bad_usage "--no-build: the build directory '$build_dir' does not exist"
fi
if [[ -z $log_dir ]]; then
  log_dir=$(mktemp -d /tmp/zshard-gpu-check.XXXXXX)
else
  mkdir -p "$log_dir" || bad_usage "cannot create --log-dir '$log_dir'"
fi
bin=$build_dir/bin
npass=0
nfail=0
nskip=0

# --- the checks -------------------------------------------------------------
libraries_set=0
for check in "${checks[@]}"; do
  [[ -n $check ]] || continue
  if [[ $check != build ]] && ((!libraries_set)); then
    setup_libraries
    libraries_set=1
  fi
  if [[ $check == train && $train_device == cpu ]]; then
    check_train
  elif ((gpus == 0)); then
    report SKIP "$check" "no GPU on this machine ($gpu_source)"
  else
    case $check in
      build) check_build ;;
      gpu-tests) check_gpu_tests ;;
      adam) check_adam ;;
      collectives) check_collectives ;;
      train) check_train ;;
      trainer) check_trainer ;;
    esac
  fi
done

echo "SUMMARY pass=$npass fail=$nfail skip=$nskip gpus=$gpus logs=$log_dir"
((nfail > 0)) && exit 1
((npass == 0)) && exit 3
exit 0
