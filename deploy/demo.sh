#!/usr/bin/env bash
# The main job, locally: installs the packages, builds zshard, answers "will
# it fit?" with the planner, then trains a real PyTorch model through zshard:
# a character-level language model (deploy/demo/charlm.py) on the GNU GPL v3
# text that Debian's base-files ships. A coordinator and five CPU worker
# daemons (world 4, I = 2: two distributed-optimizer instances of two ranks,
# and one spare), each with its own trainer process attached over
# --trainer-socket: the trainers run forward and backward on their share of
# the global batch, the daemons own the optimizer state and run the ZeRO-1
# step over Gloo. Mid-run one daemon holding a rank is killed with SIGKILL:
# its trainer gets zshard.WorkerLost, the spare takes the rank over (its
# trainer, waiting in begin_step, continues) and only the dead rank's shard
# moves. Shows the loss going down, the re-shard, and each rank's measured
# memory next to the ledger's prediction. The regression workload of the
# earlier demo stays available: deploy/demo/regression.json.
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
# Debian's python3-torch is for the system interpreter.
python=/usr/bin/python3
export PYTHONPATH=$root/python:$root/deploy/demo PYTHONDONTWRITEBYTECODE=1

section() { printf '\n\033[1m== %s ==\033[0m\n' "$*"; }

section "memory ledger: llama2-70b on 64 ranks, 8 instances (offline)"
"$bin/zshardctl" ledger --preset llama2-70b --world 64 --instances 8

run=$(mktemp -d /tmp/zshard-demo.XXXXXX)
job=deploy/demo/job.json
section "the model: python -m zshard.spec charlm:build_model (the model object of $job)"
"$python" -m zshard.spec charlm:build_model --name charlm >"$run/model.json"
"$python" - "$run/model.json" "$job" <<'PY'
import json, math, sys
spec, job = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
if spec != job["model"]:
    sys.exit("demo: %s's model object differs from python -m zshard.spec "
             "charlm:build_model" % sys.argv[2])
for p in spec["params"]:
    flags = [f for f in ("shared_embedding", "no_weight_decay") if p.get(f)]
    print("  %-14s %-11s %s %s" % (p["name"], "x".join(map(str, p["shape"])),
                                 p["dtype"], " ".join(flags)))
w = job["workload"]
print("  %d params; %d steps, global batch %d (each sample: 32 characters "
      "to predict)" % (sum(math.prod(p["shape"]) for p in spec["params"]),
                       w["steps"], w["global_batch"]))
PY

pids=()
# On any exit (the end, an error, Ctrl-C) whatever is still running is
# killed outright: a daemon's graceful leave would wait for a coordinator
# that is going away too.
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT
trap "exit 130" INT TERM

section "local cluster: coordinator + 5 worker daemons (world 4, I=2, one spare), a trainer on each (logs in $run)"
"$bin/zshard-coordinator" --job "$job" --listen 127.0.0.1:0 \
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
trainers=()
for i in 0 1 2 3 4; do
  "$bin/zshard-worker" --coordinator "$addr" --name "w$i" \
    --trainer-socket "$run/w$i.sock" \
    --labels "node=node$((i / 2)),zone=a" >"$run/w$i.log" 2>&1 &
  workers+=($!)
  pids+=($!)
  "$python" deploy/demo/charlm.py "$run/w$i.sock" --log "$run/trainer-w$i.steps" \
    >"$run/trainer-w$i.out" 2>"$run/trainer-w$i.log" &
  trainers+=($!)
  pids+=($!)
done
echo "daemons w0..w4 (--trainer-socket $run/wN.sock), one trainer each: python3 deploy/demo/charlm.py SOCKET"

# The last step a trainer logged (0: none yet, e.g. the spare's).
last_step() {
  local n=""
  [[ -s "$run/trainer-w$1.steps" ]] &&
    n=$(tail -1 "$run/trainer-w$1.steps" | grep -o '"step": [0-9]*' | awk '{print $2}')
  echo "${n:-0}"
}
steps=$("$python" -c "import json; print(json.load(open('$job'))['workload']['steps'])")
kill_at=$((steps / 3))
section "training $steps steps; kill -9 of a daemon holding a rank at step $kill_at (the world's loss per character, every 20 steps)"
# The trainer whose loss is shown, and the daemon to kill: both hold ranks.
shown=""
victim=""
printed=0
upto=0
deadline=$((SECONDS + 900))
while ((SECONDS < deadline)); do
  if [[ -z "$shown" ]]; then
    for i in 0 1 2 3 4; do
      if (($(last_step $i) > 0)); then shown=$i; break; fi
    done
  fi
  if [[ -n "$shown" ]]; then
    upto=$(last_step "$shown")
    while IFS= read -r row; do
      echo "$row"
    done < <("$python" - "$run/trainer-w$shown.steps" "$printed" "$upto" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    s = json.loads(line)
    if s["failed"] or not int(sys.argv[2]) < s["step"] <= int(sys.argv[3]):
        continue
    if s["step"] == 1 or s["step"] % 20 == 0:
        print("  step %4d  rank %d of %d  lr %.5f  loss %.4f nats/char  "
              "grad_norm %.3f" % (s["step"], s["rank"], s["world"], s["lr"],
                                  s["loss_per_char"], s["grad_norm"]))
PY
    )
    printed=$upto
  fi
  if [[ -z "$victim" && -n "$shown" ]] && ((upto >= kill_at)); then
    for i in 1 2 3 4 0; do
      if [[ $i != "$shown" ]] && (($(last_step $i) > 0)); then victim=$i; break; fi
    done
    kill_ms=$(date +%s%3N)
    kill -9 "${workers[$victim]}"
    wait "${workers[$victim]}" 2>/dev/null || true
    echo "  -- kill -9 w$victim (daemon of rank $(tail -1 "$run/trainer-w$victim.steps" | grep -o '"rank": [0-9]*' | awk '{print $2}')) after step $upto --"
  fi
  alive=0
  for i in 0 1 2 3 4; do
    [[ $i == "$victim" ]] && continue
    kill -0 "${trainers[$i]}" 2>/dev/null && alive=1
  done
  ((alive)) || break
  sleep 0.5
done

status=0
for i in 0 1 2 3 4; do
  [[ $i == "$victim" ]] && continue
  wait "${trainers[$i]}" || { echo "trainer of w$i exited with status $?; see $run/trainer-w$i.log"; status=1; }
  wait "${workers[$i]}" || { echo "worker w$i exited with status $?; see $run/w$i.log"; status=1; }
done
victim_status=0
wait "${trainers[$victim]}" || victim_status=$?
"$python" - "$run" "$shown" "$victim" <<'PY'
import json, sys
run, shown, victim = sys.argv[1:]
rows = [json.loads(l) for l in open("%s/trainer-w%s.steps" % (run, shown))]
done = [r for r in rows if not r["failed"]]
if done:
    first, last = done[0], done[-1]
    print("  loss %.4f nats/char at step %d -> %.4f at step %d (%.0f%% of the "
          "first); %d steps, %d failed on the lost peer and rerun" % (
              first["loss_per_char"], first["step"], last["loss_per_char"],
              last["step"], 100 * last["loss_per_char"] /
              first["loss_per_char"], len(done), len(rows) - len(done)))
PY
echo "  the killed daemon's trainer (w$victim, exit status $victim_status): $(tail -1 "$run/trainer-w$victim.log")"
for i in 0 1 2 3 4; do
  [[ $i == "$victim" ]] && continue
  first=$(head -1 "$run/trainer-w$i.steps" 2>/dev/null | grep -o '"step": [0-9]*' | awk '{print $2}')
  if [[ -n "$first" && "$first" != 1 ]]; then
    echo "  the spare's trainer (w$i) waited in begin_step, then ran steps $first..$(last_step $i) as rank $(tail -1 "$run/trainer-w$i.steps" | grep -o '"rank": [0-9]*' | awk '{print $2}')"
  fi
done
echo "  the trained model continues \"$("$python" -c "import charlm; t = charlm.load_text(); print(bytes(t[charlm.PROMPT_AT:charlm.PROMPT_AT + charlm.CONTEXT].tolist()).decode())")\" as:"
sed -n 1p "$run/trainer-w$shown.out" | cut -c17- | sed 's/^/    /'

section "the kill and the re-shard that followed (zshardctl events, reshards)"
"$bin/zshardctl" --coordinator "$addr" events | grep -E ' (step_failed|dead|propose|moves|commit|stable|finished) ' | tail -n 7 || true
if [[ -n "${kill_ms:-}" ]]; then
  # From the kill to the coordinator's "dead" and the next "stable", by the
  # events' own times (the lease is 3 s: a peer's report and the closed plan
  # watch make the death certain long before it runs out).
  "$bin/zshardctl" --coordinator "$addr" events --output json | python3 -c '
import datetime, json, sys
kill = int(sys.argv[1])
def ms(e):
    t = datetime.datetime.strptime(e["time"], "%Y-%m-%dT%H:%M:%S.%fZ")
    return int(t.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000)
text = sys.stdin.read()
try:
    events = json.loads(text)
except ValueError:
    events = [json.loads(l) for l in text.splitlines() if l.strip()]
dead = [e for e in events if e.get("kind") == "dead" and ms(e) >= kill]
if dead:
    stable = [e for e in events if e.get("kind") == "stable" and e["seq"] > dead[0]["seq"]]
    line = "  kill -9 to dead: %d ms" % (ms(dead[0]) - kill)
    if stable:
        line += "; to the new epoch stable: %d ms (lease 3000 ms)" % (ms(stable[0]) - kill)
    print(line)
' "$kill_ms" || true
fi
echo
"$bin/zshardctl" --coordinator "$addr" reshards || true

section "memory per rank: measured (worker telemetry) next to the ledger's prediction"
"$bin/zshardctl" --coordinator "$addr" ledger || true
echo
echo "measured by each worker after its last step (bytes):"
for i in 0 1 2 3 4; do
  [[ $i == "$victim" ]] && continue
  line=$(grep -hi ' info memory ' "$run/w$i.log" | tail -1) || true
  [[ -n "$line" ]] || continue
  echo "$line" | sed -E 's/.* worker=(w[0-9]+).*/\1/' | tr '\n' ' '
  echo "$line" | grep -oE '(param|grad|master|exp_avg|exp_avg_sq|comm|total)_bytes=[0-9]+' | tr '\n' ' '
  echo
done
echo "logs in $run"
exit $status
