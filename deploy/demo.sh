#!/usr/bin/env bash
# The main job, locally: installs the packages, builds zshard, answers "will
# it fit?" with the planner, then trains a real PyTorch model through zshard
# with one command, zshard-run: a character-level language model
# (deploy/demo/charlm.py) on the GNU GPL v3 text that Debian's base-files
# ships. zshard-run starts a coordinator and five CPU worker daemons (world
# 4, I = 2: two distributed-optimizer instances of two ranks, and one
# spare), each with its own trainer process attached over --trainer-socket:
# the trainers run forward and backward on their share of the global batch,
# the daemons own the optimizer state and run the ZeRO-1 step over Gloo.
# Mid-run one daemon holding a rank is killed with SIGKILL (its pid from
# zshard-run's processes.json): its trainer gets zshard.WorkerLost, the
# spare takes the rank over (its trainer, waiting in begin_step, continues)
# and only the dead rank's shard moves. Shows the loss going down, the
# re-shard, and each rank's measured memory next to the ledger's
# prediction. The regression workload of the earlier demo stays available:
# deploy/demo/regression.json.
#
# With ZSHARD_BIN_DIR set to a directory of built binaries, the install and
# the build are skipped and those binaries run. Exit status: zshard-run's
# (0: the job finished).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

if [[ -n ${ZSHARD_BIN_DIR:-} ]]; then
  bin=$(cd "$ZSHARD_BIN_DIR" && pwd)
else
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
fi
# Debian's python3-torch is for the system interpreter.
python=/usr/bin/python3
export PYTHONPATH=$root/python:$root/deploy/demo PYTHONDONTWRITEBYTECODE=1

section() { printf '\n\033[1m== %s ==\033[0m\n' "$*"; }

section "memory ledger: llama2-70b on 64 ranks, 8 instances (offline)"
"$bin/zshardctl" ledger --preset llama2-70b --world 64 --instances 8

run=$(mktemp -d /tmp/zshard-demo.XXXXXX)
state=$run/state
job=deploy/demo/job.json
section "the model: deploy/demo/charlm.py's build_model (the coordinator takes it from the first trainer)"
"$python" - "$job" <<'PY'
import json, math, sys
import charlm
from zshard import model_spec
spec, job = model_spec(charlm.build_model(), name="charlm"), json.load(open(sys.argv[1]))
if "model" in job and job["model"] != spec:
    sys.exit("demo: %s's model object differs from charlm.build_model's" % sys.argv[1])
for p in spec["params"]:
    flags = [f for f in ("shared_embedding", "no_weight_decay") if p.get(f)]
    print("  %-14s %-11s %s %s" % (p["name"], "x".join(map(str, p["shape"])),
                                 p["dtype"], " ".join(flags)))
w = job["workload"]
print("  %d params; %d steps, global batch %d (each sample: 32 characters "
      "to predict)" % (sum(math.prod(p["shape"]) for p in spec["params"]),
                       w["steps"], w["global_batch"]))
PY

runpid=""
# On any exit (the end, an error, Ctrl-C) a zshard-run still running is
# sent SIGTERM: it stops its trainers, daemons and coordinator.
cleanup() {
  if [[ -n $runpid ]] && kill -0 "$runpid" 2>/dev/null; then
    kill -TERM "$runpid" 2>/dev/null || true
  fi
  wait 2>/dev/null || true
}
trap cleanup EXIT
trap "exit 130" INT TERM

cmd=(zshard-run --nproc 4 --spares 1 --instances 2 --job "$job" --state-dir "$state"
     deploy/demo/charlm.py --log-dir "$run")
section "local cluster, one command: coordinator + 5 worker daemons (world 4, I=2, one spare), a trainer on each (logs in $state)"
echo "\$ ${cmd[*]}"
"$python" -m zshard.run --bin-dir "$bin" "${cmd[@]:1}" >"$run/zshard-run.out" 2>&1 &
runpid=$!
# zshard-run's own lines, its [event] lines and the trainers' WorkerLost:
# the rest (every daemon's warnings) stays in $run/zshard-run.out.
shown_lines=0
show_run() {
  local n
  n=$(wc -l <"$run/zshard-run.out")
  ((n > shown_lines)) || return 0
  sed -n "$((shown_lines + 1)),${n}p" "$run/zshard-run.out" |
    grep -E '^(zshard-run: |\[event\] |\[w[0-9]+\] trainer: )' | sed 's/^/  /' || true
  shown_lines=$n
}
for _ in $(seq 600); do
  [[ -s $state/processes.json ]] && break
  kill -0 "$runpid" 2>/dev/null || break
  sleep 0.1
done
show_run
[[ -s $state/processes.json ]] || { echo "zshard-run did not start; see $run/zshard-run.out" >&2; exit 1; }
field() { "$python" -c "import json, sys; d = json.load(open('$state/processes.json')); print($1)"; }
addr=$(field 'd["coordinator"]["address"]')
# The coordinator's HTTP port (/metrics and the dashboard page).
http_port=None
for _ in $(seq 50); do
  http_port=$(field 'd["coordinator"]["metrics_port"]')
  [[ $http_port != None ]] && break
  sleep 0.1
done
if [[ $http_port != None ]]; then
  echo "  the dashboard (shard map, members, re-shards, events): http://127.0.0.1:$http_port/"
fi

# The last step a trainer logged (0: none yet, e.g. the spare's).
last_step() {
  local n=""
  [[ -s "$run/w$1.steps" ]] &&
    n=$(tail -1 "$run/w$1.steps" | grep -o '"step": [0-9]*' | awk '{print $2}')
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
# Prints the shown trainer's rows logged since the last call.
print_rows() {
  [[ -n "$shown" ]] || return 0
  upto=$(last_step "$shown")
  "$python" - "$run/w$shown.steps" "$printed" "$upto" <<'PY'
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
  printed=$upto
}
deadline=$((SECONDS + 900))
while ((SECONDS < deadline)) && kill -0 "$runpid" 2>/dev/null; do
  if [[ -z "$shown" ]]; then
    for i in 0 1 2 3 4; do
      if (($(last_step $i) > 0)); then shown=$i; break; fi
    done
    # The ledger of the running job (its prediction), in case no takeover
    # comes to replace it.
    [[ -n "$shown" ]] && { "$bin/zshardctl" --coordinator "$addr" ledger >"$run/ledger.txt" 2>&1 || true; }
  fi
  print_rows
  if [[ -z "$victim" && -n "$shown" ]] && ((upto >= kill_at)); then
    for i in 1 2 3 4 0; do
      if [[ $i != "$shown" ]] && (($(last_step $i) > 0)); then victim=$i; break; fi
    done
    victim_pid=$(field "d['daemons'][$victim]['pid']")
    kill_ms=$(date +%s%3N)
    kill -9 "$victim_pid"
    echo "  -- kill -9 w$victim (daemon of rank $(tail -1 "$run/w$victim.steps" | grep -o '"rank": [0-9]*' | awk '{print $2}'), pid $victim_pid) after step $upto --"
  fi
  # Once the takeover is stable: the re-shard history and the ledger of
  # the new epoch, for the end (zshard-run stops the coordinator at the
  # job's end).
  if [[ -n "$victim" && ! -s $run/reshards.txt ]] &&
     grep -q '"kind": "dead"' "$state/events.jsonl" 2>/dev/null &&
     grep '"kind": "dead"' -A1000 "$state/events.jsonl" | grep -q '"kind": "stable"'; then
    "$bin/zshardctl" --coordinator "$addr" reshards >"$run/reshards.txt" 2>&1 || true
    "$bin/zshardctl" --coordinator "$addr" ledger >"$run/ledger.txt" 2>&1 || true
  fi
  show_run
  sleep 0.5
done

status=0
if kill -0 "$runpid" 2>/dev/null; then
  echo "the job did not end within 900 s; see $run/zshard-run.out"
  status=1
else
  wait "$runpid" || status=$?
  runpid=""
fi
print_rows
show_run
[[ -n "$shown" ]] || { echo "no trainer ran a step; see $run/zshard-run.out"; exit 1; }
"$python" - "$run" "$shown" <<'PY'
import json, sys
run, shown = sys.argv[1:]
rows = [json.loads(l) for l in open("%s/w%s.steps" % (run, shown))]
done = [r for r in rows if not r["failed"]]
if done:
    first, last = done[0], done[-1]
    print("  loss %.4f nats/char at step %d -> %.4f at step %d (%.0f%% of the "
          "first); %d steps, %d failed on the lost peer and rerun" % (
              first["loss_per_char"], first["step"], last["loss_per_char"],
              last["step"], 100 * last["loss_per_char"] /
              first["loss_per_char"], len(done), len(rows) - len(done)))
PY
if [[ -n "$victim" ]]; then
  victim_status=$(field "d['daemons'][$victim]['trainer']['exit_status']")
  echo "  the killed daemon's trainer (w$victim, exit status $victim_status): $(grep -v '^\s*$' "$state/w$victim.trainer.log" | tail -1)"
fi
for i in 0 1 2 3 4; do
  [[ $i == "$victim" ]] && continue
  first=$(head -1 "$run/w$i.steps" 2>/dev/null | grep -o '"step": [0-9]*' | awk '{print $2}')
  if [[ -n "$first" && "$first" != 1 ]]; then
    echo "  the spare's trainer (w$i) waited in begin_step, then ran steps $first..$(last_step $i) as rank $(tail -1 "$run/w$i.steps" | grep -o '"rank": [0-9]*' | awk '{print $2}')"
  fi
done
if [[ -s "$run/w$shown.sample" ]]; then
  echo "  the trained model continues \"$("$python" -c "import charlm; t = charlm.load_text(); print(bytes(t[charlm.PROMPT_AT:charlm.PROMPT_AT + charlm.CONTEXT].tolist()).decode())")\" as:"
  sed -n 1p "$run/w$shown.sample" | cut -c17- | sed 's/^/    /'
fi

section "the kill and the re-shard that followed (zshard-run's events.jsonl, zshardctl reshards)"
# From the kill to the coordinator's "dead" and the next "stable", by the
# events' own times (the lease is 3 s: a peer's report and the closed plan
# watch make the death certain long before it runs out).
"$python" - "$state/events.jsonl" "${kill_ms:-0}" <<'PY' || true
import datetime, json, sys
def ms(e):
    t = datetime.datetime.strptime(e["time"], "%Y-%m-%dT%H:%M:%S.%fZ")
    return int(t.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000)
events = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
kill = int(sys.argv[2])
kinds = ("step_failed", "dead", "propose", "moves", "commit", "stable", "finished")
for e in [e for e in events if e.get("kind") in kinds][-7:]:
    print("%s %6d  %-10s %s" % (e["time"], e.get("epoch", 0), e["kind"], e.get("reason", "")))
dead = [e for e in events if e.get("kind") == "dead" and kill and ms(e) >= kill]
if dead:
    stable = [e for e in events if e.get("kind") == "stable" and e["seq"] > dead[0]["seq"]]
    line = "  kill -9 to dead: %d ms" % (ms(dead[0]) - kill)
    if stable:
        line += "; to the new epoch stable: %d ms (lease 3000 ms)" % (ms(stable[0]) - kill)
    print(line)
PY
echo
[[ -s $run/reshards.txt ]] && cat "$run/reshards.txt"

section "memory per rank: measured (worker telemetry) next to the ledger's prediction"
[[ -s $run/ledger.txt ]] && cat "$run/ledger.txt"
echo
echo "measured by each worker after its last step (bytes):"
for i in 0 1 2 3 4; do
  [[ $i == "$victim" ]] && continue
  line=$(grep -hi ' info memory ' "$state/w$i.worker.log" | tail -1) || true
  [[ -n "$line" ]] || continue
  echo "$line" | sed -E 's/.* worker=(w[0-9]+).*/\1/' | tr '\n' ' '
  echo "$line" | grep -oE '(param|grad|master|exp_avg|exp_avg_sq|comm|total)_bytes=[0-9]+' | tr '\n' ' '
  echo
done
echo "logs in $state (processes.json, events.jsonl, wN.worker.log, wN.trainer.log); zshard-run's output in $run/zshard-run.out"
exit $status
