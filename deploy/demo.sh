#!/usr/bin/env bash
# The main job, locally: installs the packages, builds zshard, answers "will
# it fit?" with the planner, then trains: a coordinator and five CPU workers
# (world 4, I = 2: two distributed-optimizer instances of two ranks, and one
# spare) run the regression workload (a two-layer MLP) with the ZeRO-1 step
# over Gloo on loopback. Mid-run one worker is killed with SIGKILL: the spare
# takes its rank over and only the dead rank's shard moves, from the other
# instance's replica. Shows the loss going down, the re-shard, and each
# rank's measured memory next to the ledger's prediction.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

if [[ $(id -u) -eq 0 ]]; then
  bash deploy/install-deps.sh
else
  sudo bash deploy/install-deps.sh
fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target zshard-coordinator zshard-worker zshardctl
bin=$root/build/bin

section() { printf '\n\033[1m== %s ==\033[0m\n' "$*"; }

section "memory ledger: llama2-70b on 64 ranks, 8 instances (offline)"
"$bin/zshardctl" ledger --preset llama2-70b --world 64 --instances 8


run=$(mktemp -d /tmp/zshard-demo.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

section "local cluster: coordinator + 5 workers (world 4, I=2, one spare), regression MLP (logs in $run)"
"$bin/zshard-coordinator" --job deploy/demo/job.json --listen 127.0.0.1:0 \
  --state-dir "$run/state" >"$run/coordinator.out" 2>"$run/coordinator.log" &
pids+=($!)
addr=""
for _ in $(seq 100); do
  addr=$(grep -o 'listening on [0-9.:]*' "$run/coordinator.out" | head -1 | awk '{print $3}') || true
  [[ -n "$addr" ]] && break
  sleep 0.1
done
[[ -n "$addr" ]] || { echo "coordinator did not start; see $run/coordinator.log" >&2; exit 1; }
echo "coordinator at $addr"

workers=()
for i in 0 1 2 3 4; do
  "$bin/zshard-worker" --coordinator "$addr" --name "w$i" \
    --labels "node=node$((i / 2)),zone=a" >"$run/w$i.log" 2>&1 &
  workers+=($!)
  pids+=($!)
done

section "training 300 steps; kill -9 of w1 at step 100 (loss every 30 steps, as a rank that ran every step logs it)"
for _ in $(seq 600); do
  grep -qiE ' info step .* step=(1[0-9]{2}|[2-9][0-9]{2})( |$)' "$run"/w*.log && break
  sleep 0.1
done
kill -9 "${workers[1]}"
wait "${workers[1]}" 2>/dev/null || true
status=0
for i in 0 2 3 4; do
  wait "${workers[$i]}" || { echo "worker w$i exited with status $?"; status=1; }
done
# The loss is the global batch mean: every rank logs the same value.
python3 - "$run" <<'PY'
import glob, re, sys
# A rank that stepped from the first step to the last (not the killed one,
# not the spare that took over mid-run).
rows = []
for path in sorted(glob.glob(sys.argv[1] + "/w*.log")):
    found = re.findall(r" info step .*?loss=(\S+).*? step=(\d+)", open(path).read(), re.I)
    if len(found) > len(rows):
        rows = found
for loss, step in rows:
    if int(step) in (1, 300) or int(step) % 30 == 0:
        print(f"  step {int(step):4d}  loss {float(loss):.5f}")
if rows:
    first, last = float(rows[0][0]), float(rows[-1][0])
    print(f"  loss {first:.4f} -> {last:.4f} ({last / first:.1%} of the first step's)")
PY

section "the kill and the re-shard that followed (zshardctl events, reshards)"
"$bin/zshardctl" --coordinator "$addr" events | grep -E ' (dead|propose|moves|commit|stable|finished) ' | tail -n 6 || true
echo
"$bin/zshardctl" --coordinator "$addr" reshards || true

section "memory per rank: measured (worker telemetry) next to the ledger's prediction"
"$bin/zshardctl" --coordinator "$addr" ledger || true
echo
echo "measured by each worker after its last step (bytes):"
for i in 0 2 3 4; do
  grep -hi ' info memory ' "$run/w$i.log" | tail -1 |
    sed -E 's/.* worker=(w[0-9]+).*/\1/' | tr '\n' ' '
  grep -hi ' info memory ' "$run/w$i.log" | tail -1 |
    grep -oE '(param|grad|master|exp_avg|exp_avg_sq|comm|total)_bytes=[0-9]+' | tr '\n' ' '
  echo
done
echo "logs in $run"
exit $status
