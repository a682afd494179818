#!/usr/bin/env python3
"""Time from launch to the first completed optimizer step: zshard-run
against torchrun, on the same machine in the same run.

usage: launch_bench.py [--nproc 4] [--runs 3] [--width 2048] [--layers 4]
                       [--global-batch 64] [--steps 2] [--job-with-model]
                       [--bin-dir DIR] [--timeout 600]

  zshard-run  `python3 -m zshard.run --nproc N --steps T --global-batch B
              --lr 1e-4 --weight-decay 0.01 launch_bench.py --zshard-trainer`:
              an embedded coordinator, N worker daemons and N trainers
              (DistributedOptimizer), the job without a file (its model
              taken from the first trainer; --job-with-model: a job file
              with the model instead).
  torchrun    `python3 -m torch.distributed.run --nproc_per_node N
              --master_addr 127.0.0.1 --master_port PORT (a free one)
              launch_bench.py --ddp-trainer`: N processes
              of torch DDP (Gloo, CPU) with torch.optim.AdamW (lr 1e-4,
              weight decay 0.01). (Run as `python3 -c TORCHRUN`: the same
              main(), its --redirects parse fixed for Python 3.11.)

Both train trainer_bench.py's model (`--layers` square Linear layers of
`--width`, GELU between; 4 x 2048: 16.8M fp32 params) on the global batch
B split over the N ranks, with torch.set_num_threads(cpu_count // N) in
every model process. Each process writes the wall-clock time at which its
step 1 completed (optimizer step done, params updated); a run's figure is
the latest of them minus the time taken just before the launcher was
spawned. The two launchers alternate, `--runs` times each (the first
of each pair swaps every round); the medians and their ratio are reported
(target: zshard-run <= 1.5x torchrun). Prints a table, then one JSON line.
Exits 1 on an error (a launcher failed, a timeout), never for missing the
target. Logs: kept with ZSHARD_KEEP_BENCH_DIRS=1 (and on an error)."""

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
TARGET = 1.5  # zshard-run / torchrun, launch to step 1


def bench_module():
    sys.path.insert(0, HERE)
    import trainer_bench
    return trainer_bench


def write_step1(out, rank, started):
    """OUT/step1-RANK.json: the wall-clock time step 1 completed (and when
    this process started, for the breakdown)."""
    path = os.path.join(out, "step1-%d.json" % rank)
    with open(path + ".tmp", "w") as f:
        json.dump({"rank": rank, "time": time.time(),
                   "process_start": started}, f)
    os.replace(path + ".tmp", path)


# -- the model processes -----------------------------------------------------

def zshard_trainer(args, started):
    """One trainer of zshard-run: trainer_bench's loop, no timings."""
    sys.path.insert(0, os.path.join(REPO, "python"))
    import torch
    from zshard.torch import DistributedOptimizer
    tb = bench_module()
    tb.set_threads(args.nproc)
    torch.manual_seed(0)
    model = tb.build_model(args.width, args.layers)
    x = y = None
    with DistributedOptimizer(model) as opt:
        while (info := opt.begin_step()) is not None:
            if x is None:
                x, y = tb.local_data(info.rank, info.world, args.width,
                                     info.global_batch)
            loss = torch.nn.functional.mse_loss(
                model(x), y, reduction="none").mean(dim=1).sum()
            loss.backward()
            opt.step(loss)
            if info.step == 1:
                write_step1(args.out, info.rank, started)
    return 0


def ddp_trainer(args, started):
    """One process of torchrun: DDP (Gloo) + AdamW, `--steps` steps."""
    import torch
    import torch.distributed as dist
    tb = bench_module()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    tb.set_threads(world)
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(
        tb.build_model(args.width, args.layers))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    x, y = tb.local_data(rank, world, args.width, args.global_batch)
    for step in range(1, args.steps + 1):
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        if step == 1:
            write_step1(args.out, rank, started)
    dist.destroy_process_group()
    return 0


# -- the launchers -------------------------------------------------------------

def zshard_command(args, out, job_file):
    cmd = [sys.executable, "-m", "zshard.run", "--nproc", str(args.nproc),
           "--bin-dir", args.bin_dir]
    if job_file:
        cmd += ["--job", job_file]
    else:
        cmd += ["--steps", str(args.steps), "--global-batch",
                str(args.global_batch), "--lr", "1e-4", "--weight-decay",
                "0.01"]
    return cmd + [os.path.abspath(__file__), "--zshard-trainer", "--out",
                  out, *model_flags(args)]


# `python3 -m torch.distributed.run`, with one fix where it is needed:
# Debian's torch 1.13 under Python 3.11 parses its default "--redirects 0"
# and "--tee 0" to None (Python 3.11's enum.Flag no longer iterates the
# zero member that Std.from_str looks for) and fails before starting any
# worker.
TORCHRUN = """\
import sys
from torch.distributed.elastic.multiprocessing import api
if api.Std.from_str("0") is None:
    _from_str = api.Std.from_str.__func__
    def _fixed(cls, vm):
        got = _from_str(cls, vm)
        return api.Std(int(vm)) if got is None and vm.isdigit() else got
    api.Std.from_str = classmethod(_fixed)
from torch.distributed.run import main
sys.argv[0] = "torchrun"
main()
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_command(args, out):
    return [sys.executable, "-c", TORCHRUN, "--nproc_per_node",
            str(args.nproc), "--master_addr", "127.0.0.1", "--master_port",
            str(free_port()), os.path.abspath(__file__),
            "--ddp-trainer", "--out", out, "--steps", str(args.steps),
            *model_flags(args)]


def model_flags(args):
    return ["--nproc", str(args.nproc), "--width", str(args.width),
            "--layers", str(args.layers), "--global-batch",
            str(args.global_batch)]


def job_with_model(args, path):
    """--job-with-model: the --steps job of zshard-run with the model."""
    tb = bench_module()
    sys.path.insert(0, os.path.join(REPO, "python"))
    import torch
    from zshard.torch import model_spec
    torch.manual_seed(0)
    spec = model_spec(tb.build_model(args.width, args.layers), name="bench")
    job = {"name": "launch-bench", "model": spec,
           "optimizer": {"lr": 1e-4, "weight_decay": 0.01},
           "world": {"instances": 1, "min": args.nproc, "max": args.nproc},
           "transition_timeout_ms": 60000,
           "workload": {"kind": "trainer", "steps": args.steps,
                        "global_batch": args.global_batch}}
    with open(path, "w") as f:
        json.dump(job, f)
    return path


def launch(name, cmd, out, log, timeout):
    """Runs one launcher; returns (seconds from just before the spawn to
    the world's step 1, seconds to its exit)."""
    os.makedirs(out)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=os.pathsep
               .join([os.path.join(REPO, "python")] + [p for p in os.environ
                     .get("PYTHONPATH", "").split(os.pathsep) if p]))
    with open(log, "w") as f:
        t0 = time.time()
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=f,
                                stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            raise RuntimeError("%s did not finish in %.0f s; see %s" %
                               (name, timeout, log))
        t_end = time.time()
    if code != 0:
        raise RuntimeError("%s exited %d; see %s" % (name, code, log))
    marks = sorted(f for f in os.listdir(out) if f.startswith("step1-"))
    if len(marks) < 1:
        raise RuntimeError("%s: no process completed step 1; see %s" %
                           (name, log))
    times = []
    for m in marks:
        with open(os.path.join(out, m)) as f:
            times.append(json.load(f)["time"])
    return max(times) - t0, t_end - t0, len(marks)


def measure(args):
    for b in ("zshard-coordinator", "zshard-worker", "zshardctl"):
        if not os.access(os.path.join(args.bin_dir, b), os.X_OK):
            raise RuntimeError("no %s in %s (build it, or pass --bin-dir)" %
                               (b, args.bin_dir))
    work = tempfile.mkdtemp(prefix="zshard-launch-bench-")
    ok = False
    try:
        job_file = (job_with_model(args, os.path.join(work, "job.json"))
                    if args.job_with_model else None)
        load_before = os.getloadavg()
        runs = {"zshard_run": [], "torchrun": []}
        exits = {"zshard_run": [], "torchrun": []}
        for k in range(args.runs):
            order = ["zshard_run", "torchrun"]
            if k % 2:
                order.reverse()
            for side in order:
                out = os.path.join(work, "%s-%d" % (side, k))
                cmd = (zshard_command(args, out, job_file)
                       if side == "zshard_run" else
                       torchrun_command(args, out))
                step1, end, ranks = launch(side.replace("_", "-"), cmd, out,
                                           out + ".log", args.timeout)
                if ranks != args.nproc:
                    raise RuntimeError("%s: %d of %d ranks completed step 1; "
                                       "see %s.log" % (side, ranks,
                                                       args.nproc, out))
                runs[side].append(step1)
                exits[side].append(end)
        ok = True
    finally:
        if ok and os.environ.get("ZSHARD_KEEP_BENCH_DIRS") != "1":
            shutil.rmtree(work, ignore_errors=True)
        else:
            print("logs kept in %s" % work, file=sys.stderr)
    z = statistics.median(runs["zshard_run"])
    t = statistics.median(runs["torchrun"])
    return {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cpus": os.cpu_count(), "load_avg_before": list(load_before),
        "load_avg_after": list(os.getloadavg()),
        "nproc": args.nproc, "width": args.width, "layers": args.layers,
        "params": args.layers * (args.width * args.width + args.width),
        "global_batch": args.global_batch, "steps": args.steps,
        "runs": args.runs, "job_with_model": args.job_with_model,
        "zshard_run_s": runs["zshard_run"], "torchrun_s": runs["torchrun"],
        "zshard_run_exit_s": exits["zshard_run"],
        "torchrun_exit_s": exits["torchrun"],
        "zshard_run_median_s": z, "torchrun_median_s": t,
        "zshard_run_over_torchrun": z / t if t else None,
        "target": TARGET,
    }


def table(r):
    lines = ["launch to the first completed optimizer step: %d processes, "
             "%d x %d (%s params), global batch %d; %d runs each, "
             "alternated; load %.2f before, %.2f after; %d cpus" % (
                 r["nproc"], r["layers"], r["width"],
                 format(r["params"], ","), r["global_batch"], r["runs"],
                 r["load_avg_before"][0], r["load_avg_after"][0], r["cpus"]),
             "%-8s %16s %16s" % ("RUN", "ZSHARD-RUN (S)", "TORCHRUN (S)")]
    for k, (z, t) in enumerate(zip(r["zshard_run_s"], r["torchrun_s"])):
        lines.append("%-8d %16.2f %16.2f" % (k + 1, z, t))
    lines.append("%-8s %16.2f %16.2f" % ("median", r["zshard_run_median_s"],
                                         r["torchrun_median_s"]))
    ratio = r["zshard_run_over_torchrun"]
    lines.append("zshard-run / torchrun: %.2fx (target <= %.2fx: %s)" % (
        ratio, r["target"], "met" if ratio <= r["target"] else "missed"))
    return "\n".join(lines)


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nproc", type=int, default=4)
    ap.add_argument("--runs", type=int, default=3,
                    help="launches of each side (default 3)")
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--global-batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=2,
                    help="the job's steps on both sides (default 2)")
    ap.add_argument("--job-with-model", action="store_true",
                    help="zshard-run --job FILE with the model, instead of "
                    "the job without a file")
    ap.add_argument("--bin-dir", default=os.environ.get(
        "ZSHARD_BIN_DIR", os.path.join(REPO, "build", "bin")))
    ap.add_argument("--timeout", type=float, default=600,
                    help="seconds one launch may take")
    # The model processes' own flags.
    ap.add_argument("--zshard-trainer", action="store_true",
                    help=argparse.SUPPRESS)
    ap.add_argument("--ddp-trainer", action="store_true",
                    help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    for name in ("nproc", "runs", "width", "layers", "global_batch",
                 "steps"):
        if getattr(args, name) < 1:
            ap.error("--%s must be >= 1" % name.replace("_", "-"))
    if args.global_batch < args.nproc:
        ap.error("--global-batch must be >= --nproc")
    args.bin_dir = os.path.abspath(args.bin_dir)
    return args


def main(argv):
    started = time.time()
    args = parse(argv)
    if args.zshard_trainer:
        return zshard_trainer(args, started)
    if args.ddp_trainer:
        return ddp_trainer(args, started)
    try:
        result = measure(args)
    except (RuntimeError, OSError) as e:
        print("launch_bench: %s" % e, file=sys.stderr)
        return 1
    print(table(result))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
