#!/usr/bin/env python3
"""Time per training step of a PyTorch model trained through zshard, against
torch DDP + AdamW and the compute-only bound, in one run on one machine.

usage: trainer_bench.py [--ranks 4] [--width 2048] [--layers 4]
                        [--global-batch 64] [--steps 6] [--warmup 1]
                        [--handoff-steps 30] [--step-delay-ms 0]
                        [--bin-dir DIR]
                        [--baselines-dir DIR] [--output json|table]
                        [--overlap-param-gather [--pairs 2]]

Four measurements, one after the other, each with `--ranks` processes that
share the machine's cores (torch.set_num_threads(cpu_count // ranks) in
every model process, as the baseline does):

  zshard    a coordinator, `--ranks` worker daemons (one instance, AdamW)
            and one trainer process per daemon (zshard.torch's
            DistributedOptimizer). Each trainer runs forward and backward
            of the baseline's model on its share of the global batch;
            step_s is the time between successive begin_step returns.
  ddp       ../shared/baselines/torch_ddp_train.py with the same flags.
  bound     forward and backward only (no communication, no optimizer),
            `--ranks` processes at once, aligned at each step's start;
            once with the gradients set to None each step (as the
            baseline does) and once accumulated in place (as zshard's
            grad buffer is).
  handoff   the trainer-daemon exchange on its own: a model of one 8x8
            Linear layer (72 params), no forward or backward, first with
            one daemon (no peers: the round trip to the daemon and its
            bookkeeping only), then with `--ranks` daemons (adds tiny
            collectives and the wait for the slowest peer).

With --overlap-param-gather, instead of those four: the zshard measurement
`--pairs` times with DistributedOptimizer's overlap_param_gather off, then
on (alternating, so that a change of the machine's load hits both alike),
and the ratio of the step times, on / off (each mode's figure is the median
of its runs' medians).

Every figure is the median over the steps after `--warmup` steps, rank 0's
view, as the baseline reports it. Prints JSON (default) or a table."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
TARGETS = {"zshard_over_ddp": 0.7, "zshard_over_bound": 1.15,
           "handoff_ms": 1.0}


def build_model(width, layers):
    """The baseline's model: `layers` square Linear layers, GELU between."""
    import torch
    mods = []
    for k in range(layers):
        mods.append(torch.nn.Linear(width, width))
        if k + 1 < layers:
            mods.append(torch.nn.GELU())
    return torch.nn.Sequential(*mods)


def local_data(rank, ranks, width, global_batch):
    """Rank `rank`'s samples (b % ranks == rank), random as the baseline's."""
    import torch
    local = len(range(rank, global_batch, ranks))
    g = torch.Generator().manual_seed(1 + rank)
    return (torch.randn(local, width, generator=g),
            torch.randn(local, width, generator=g))


def set_threads(ranks):
    import torch
    torch.set_num_threads(max(1, (os.cpu_count() or 2) // ranks))


def median_after(values, warmup):
    kept = values[warmup:] or values[-1:]
    return statistics.median(kept) if kept else None


# -- the trainer process (run as: trainer_bench.py --trainer ...) ----------

def trainer_main(args):
    """One user's training loop through zshard; writes its timings as JSON
    to args.out. With --handoff the model does no forward or backward."""
    sys.path.insert(0, os.path.join(REPO, "python"))
    import torch
    from zshard.torch import DistributedOptimizer
    set_threads(args.ranks)
    torch.manual_seed(0)
    model = (torch.nn.Linear(8, 8) if args.handoff else
             build_model(args.width, args.layers))
    timings = {"cycle": [], "fwd_bwd": [], "exchange": [], "begin": [],
               "zero_grad": [], "rank": None}
    with DistributedOptimizer(
            model, socket=args.socket,
            overlap_param_gather=args.trainer_overlap_param_gather) as opt:
        zero = opt.zero_grad

        def timed_zero():  # begin_step zeroes the grad buffer through this
            t = time.perf_counter()
            zero()
            timings["zero_grad"].append(time.perf_counter() - t)
        opt.zero_grad = timed_zero
        x = y = None
        prev = None
        while True:
            t0 = time.perf_counter()
            info = opt.begin_step()
            t1 = time.perf_counter()
            if info is None:
                break
            timings["begin"].append(t1 - t0)
            if prev is not None:
                timings["cycle"].append(t1 - prev)
            prev = t1
            timings["rank"] = info.rank
            loss = None
            if not args.handoff:
                if x is None:
                    x, y = local_data(info.rank, info.world, args.width,
                                      info.global_batch)
                # The sum of the samples' losses (zshard divides by B); each
                # sample's loss is the mean squared error over its outputs.
                out = model(x)
                loss = torch.nn.functional.mse_loss(
                    out, y, reduction="none").mean(dim=1).sum()
                loss.backward()
            t2 = time.perf_counter()
            opt.step(loss)
            t3 = time.perf_counter()
            timings["fwd_bwd"].append(t2 - t1)
            timings["exchange"].append(t3 - t2)
    with open(args.out, "w") as f:
        json.dump(timings, f)
    return 0


# -- the zshard side: a local cluster ---------------------------------------

def local_processes():
    sys.path.insert(0, os.path.join(REPO, "python"))
    from zshard.local import LocalProcesses
    return LocalProcesses


class LocalJob:
    """A coordinator, `ranks` worker daemons and their trainers on this
    machine, in a temporary directory (kept with ZSHARD_KEEP_BENCH_DIRS=1)."""

    def __init__(self, bin_dir, job):
        self.local = local_processes()(bin_dir,
                                       prefix="zshard-trainer-bench-")
        self.dir = self.local.dir
        self.bin_dir = bin_dir
        self.address = self.local.start_coordinator(job)

    def start(self, ranks, trainer_args):
        for i in range(ranks):
            sock = os.path.join(self.dir, "w%d.sock" % i)
            self.local.spawn("w%d" % i, [
                os.path.join(self.bin_dir, "zshard-worker"), "--coordinator",
                self.address, "--name", "w%d" % i, "--trainer-socket", sock,
                "--log-format", "json", "--labels", "node=n%d" % i])
            env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
            self.local.spawn("t%d" % i, [
                sys.executable, os.path.abspath(__file__), "--trainer",
                "--socket", sock, "--out",
                os.path.join(self.dir, "t%d.json" % i)] + trainer_args,
                env=env)

    def wait(self, ranks, timeout):
        deadline = time.monotonic() + timeout
        for i in range(ranks):
            for name in ("t%d" % i, "w%d" % i):
                left = max(1.0, deadline - time.monotonic())
                try:
                    rc = self.local.procs[name].wait(timeout=left)
                except subprocess.TimeoutExpired:
                    raise RuntimeError("%s did not finish in %.0f s; see %s" %
                                       (name, timeout, self.log(name)))
                if rc != 0:
                    raise RuntimeError("%s exited %d; see %s" %
                                       (name, rc, self.log(name)))

    def log(self, name):
        return self.local.log(name)

    def timings(self, ranks):
        out = []
        for i in range(ranks):
            with open(os.path.join(self.dir, "t%d.json" % i)) as f:
                out.append(json.load(f))
        return out

    def daemon_step_ms(self, ranks):
        """The daemons' own step times (reduce-scatter start to all-gather
        end) from their "step" log lines (steps 1, 10, 20, ... and the
        last): {rank-independent worker name: {step: ms}}."""
        got = {}
        for i in range(ranks):
            steps = {}
            with open(self.log("w%d" % i)) as f:
                for line in f:
                    try:
                        rec = json.loads(line)
                    except ValueError:
                        continue
                    if rec.get("msg") == "step" and "step_ms" in rec:
                        steps[int(rec["step"])] = float(rec["step_ms"])
            got["w%d" % i] = steps
        return got

    def stop(self):
        kept = self.local.stop(
            keep=os.environ.get("ZSHARD_KEEP_BENCH_DIRS") == "1")
        if kept:
            print("logs kept in %s" % kept, file=sys.stderr)


def job_spec(model, ranks, global_batch, steps, step_delay_ms, bucket_size):
    sys.path.insert(0, os.path.join(REPO, "python"))
    from zshard.torch import model_spec
    return {
        "name": "trainer-bench",
        "model": model_spec(model, name="bench"),
        # The baseline's optimizer: AdamW, lr 1e-4, weight decay 0.01.
        "optimizer": {"lr": 1e-4, "weight_decay": 0.01},
        "world": {"instances": 1, "min": ranks, "max": ranks},
        # Buckets of torch DDP's size by default, so that reduce-scatters
        # overlap backward as DDP's all-reduces do.
        "layout": {"bucket_size": bucket_size},
        "workload": {"kind": "trainer", "steps": steps,
                     "global_batch": global_batch,
                     # The runner waits this long after every step; its
                     # default (100 ms) paces the idle workload.
                     "step_delay_ms": step_delay_ms,
                     "trainer_timeout_ms": 600000},
    }


def run_zshard(args, handoff, ranks, overlap_param_gather=False):
    """One job through zshard; the trainers' timings and the daemons' step
    times."""
    import torch
    torch.manual_seed(0)
    model = (torch.nn.Linear(8, 8) if handoff else
             build_model(args.width, args.layers))
    steps = (args.handoff_steps if handoff else args.steps) + args.warmup
    job = LocalJob(args.bin_dir, job_spec(model, ranks, args.global_batch,
                                          steps, args.step_delay_ms,
                                          args.bucket_size))
    try:
        trainer_args = ["--ranks", str(ranks), "--width", str(args.width),
                        "--layers", str(args.layers)]
        if handoff:
            trainer_args.append("--handoff")
        if overlap_param_gather:
            trainer_args.append("--trainer-overlap-param-gather")
        job.start(ranks, trainer_args)
        job.wait(ranks, args.timeout)
        return job.timings(ranks), job.daemon_step_ms(ranks)
    finally:
        job.stop()


def summarize_zshard(timings, daemon_ms, warmup):
    """Rank 0's medians (cycles start at the second step: one fewer)."""
    t0 = next(t for t in timings if t["rank"] == 0)
    cycle_warmup = max(0, warmup - 1)
    fig = {
        "step_s": median_after(t0["cycle"], cycle_warmup),
        "fwd_bwd_s": median_after(t0["fwd_bwd"], warmup),
        "exchange_s": median_after(t0["exchange"], warmup),
        "begin_step_s": median_after(t0["begin"], warmup),
        "zero_grad_s": median_after(t0["zero_grad"], warmup),
        "step_s_per_rank": [median_after(t["cycle"], cycle_warmup)
                            for t in sorted(timings, key=lambda t: t["rank"])],
        # Cycle k (from step k's begin_step to step k + 1's) holds step
        # k's exchange: true of every step, unlike of the two medians.
        "exchange_within_cycle": all(
            c >= e for c, e in zip(t0["cycle"], t0["exchange"])),
    }
    # The daemons' logged steps after the warm-up (all ranks): RS..AG.
    logged = [ms for steps in daemon_ms.values() for s, ms in steps.items()
              if s > warmup]
    fig["daemon_step_s"] = (statistics.median(logged) / 1e3 if logged
                            else None)
    fig["daemon_step_samples"] = len(logged)
    return fig


# -- the compute-only bound -------------------------------------------------

def bound_worker(rank, args, in_place, barrier, queue):
    """Forward and backward only. `in_place`: the gradients accumulate into
    tensors that stay (zeroed each step), as in zshard's grad buffer;
    otherwise they are set to None and backward allocates them afresh, as
    torch_ddp_train.py does."""
    import torch
    set_threads(args.ranks)
    torch.manual_seed(0)
    model = build_model(args.width, args.layers)
    x, y = local_data(rank, args.ranks, args.width, args.global_batch)
    times = []
    for _ in range(args.steps + args.warmup):
        barrier.wait()
        t0 = time.perf_counter()
        for p in model.parameters():
            if in_place and p.grad is not None:
                p.grad.zero_()
            else:
                p.grad = None
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        times.append(time.perf_counter() - t0)
    queue.put((rank, times))


def run_bound(args, in_place):
    import multiprocessing as mp
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(args.ranks)
    queue = ctx.Queue()
    procs = [ctx.Process(target=bound_worker,
                         args=(r, args, in_place, barrier, queue))
             for r in range(args.ranks)]
    for p in procs:
        p.start()
    got = dict(queue.get(timeout=args.timeout) for _ in procs)
    for p in procs:
        p.join()
    return {"fwd_bwd_s": median_after(got[0], args.warmup),
            "fwd_bwd_s_per_rank": [median_after(got[r], args.warmup)
                                   for r in range(args.ranks)]}


# -- the baseline -------------------------------------------------------------

def run_ddp(args):
    script = os.path.join(args.baselines_dir, "torch_ddp_train.py")
    if not os.path.exists(script):
        raise RuntimeError("no baseline at %s (pass --baselines-dir)" % script)
    out = subprocess.run(
        [sys.executable, script, "--ranks", str(args.ranks), "--width",
         str(args.width), "--layers", str(args.layers), "--global-batch",
         str(args.global_batch), "--steps", str(args.steps)],
        capture_output=True, text=True, timeout=args.timeout)
    if out.returncode != 0:
        raise RuntimeError("torch_ddp_train.py exited %d: %s" %
                           (out.returncode, out.stderr.strip()[-400:]))
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- main ---------------------------------------------------------------------

def ratio(a, b):
    return a / b if a is not None and b else None


def check_inputs(args):
    """Fails before any measurement when a program is missing."""
    script = os.path.join(args.baselines_dir, "torch_ddp_train.py")
    if not args.no_ddp and not os.path.exists(script):
        raise RuntimeError("no baseline at %s (pass --baselines-dir)" % script)
    for name in ("zshard-coordinator", "zshard-worker"):
        if not os.access(os.path.join(args.bin_dir, name), os.X_OK):
            raise RuntimeError("no %s in %s (build it, or pass --bin-dir)" %
                               (name, args.bin_dir))


def measure(args):
    check_inputs(args)
    load_before = os.getloadavg()
    started = time.time()
    zt, zd = run_zshard(args, handoff=False, ranks=args.ranks)
    z = summarize_zshard(zt, zd, args.warmup)
    ddp = None if args.no_ddp else run_ddp(args)
    ddp_step = ddp["step_s"] if ddp else None
    bound = run_bound(args, in_place=False)
    bound_in_place = run_bound(args, in_place=True)
    h1 = summarize_zshard(*run_zshard(args, handoff=True, ranks=1),
                          args.warmup)
    hw = summarize_zshard(*run_zshard(args, handoff=True, ranks=args.ranks),
                          args.warmup)
    # In the full run: the trainer's step() minus the daemon's own step
    # (reduce-scatter start to all-gather end) is the hand-off inside step();
    # begin_step minus its zeroing is the hand-off before the next step.
    inside = None
    if z["daemon_step_s"] is not None:
        inside = (z["exchange_s"] - z["daemon_step_s"] +
                  z["begin_step_s"] - z["zero_grad_s"])
    params = sum(p.numel() for p in build_model(args.width,
                                                args.layers).parameters())
    return {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "cpus": os.cpu_count(), "load_avg_before": list(load_before),
        "load_avg_after": list(os.getloadavg()),
        "ranks": args.ranks, "width": args.width, "layers": args.layers,
        "params": params, "global_batch": args.global_batch,
        "steps": args.steps, "warmup": args.warmup,
        "step_delay_ms": args.step_delay_ms,
        "zshard": z, "ddp": ddp, "bound": bound,
        "bound_in_place": bound_in_place,
        "handoff": {
            "one_daemon_cycle_s": h1["step_s"],
            "world_cycle_s": hw["step_s"],
            "in_full_run_s": inside,
        },
        "zshard_over_ddp": ratio(z["step_s"], ddp_step),
        "zshard_over_bound": ratio(z["step_s"], bound["fwd_bwd_s"]),
        "ddp_over_bound": ratio(ddp_step, bound["fwd_bwd_s"]),
        "zshard_over_bound_in_place": ratio(z["step_s"],
                                            bound_in_place["fwd_bwd_s"]),
        # Against the trainers' own forward and backward, measured in the
        # same steps (immune to load changes between the measurements).
        "zshard_over_own_fwd_bwd": ratio(z["step_s"], z["fwd_bwd_s"]),
        "targets": TARGETS,
    }


def ms(v):
    return "-" if v is None else "%.1f" % (v * 1e3)


def table(r):
    z, b, h = r["zshard"], r["bound"], r["handoff"]
    d = r["ddp"] or {"step_s": None, "fwd_bwd_s": None, "opt_s": None}
    rows = [
        ("zshard step (trainer, begin_step to begin_step)", ms(z["step_s"])),
        ("  forward + backward", ms(z["fwd_bwd_s"])),
        ("  step() (hand-off, RS, Adam, AG)", ms(z["exchange_s"])),
        ("  daemon step (RS start to AG end)", ms(z["daemon_step_s"])),
        ("  begin_step (incl. zeroing grads)", ms(z["begin_step_s"])),
        ("  zeroing the grad buffer", ms(z["zero_grad_s"])),
        ("DDP + AdamW step", ms(d["step_s"])),
        ("  forward + backward (+ all-reduce)", ms(d["fwd_bwd_s"])),
        ("  AdamW", ms(d["opt_s"])),
        ("bound: forward + backward only", ms(b["fwd_bwd_s"])),
        ("  the same, grads accumulated in place",
         ms(r["bound_in_place"]["fwd_bwd_s"])),
        ("hand-off, 72 params, one daemon", ms(h["one_daemon_cycle_s"])),
        ("hand-off, 72 params, %d daemons" % r["ranks"],
         ms(h["world_cycle_s"])),
        ("hand-off inside the full step", ms(h["in_full_run_s"])),
    ]
    lines = ["%d ranks, %d x %d, %d params, global batch %d, %d steps after "
             "%d warm-up; load %.2f before, %.2f after, %d cpus" % (
                 r["ranks"], r["layers"], r["width"], r["params"],
                 r["global_batch"], r["steps"], r["warmup"],
                 r["load_avg_before"][0], r["load_avg_after"][0], r["cpus"])]
    lines.append("%-50s %10s" % ("WHAT", "MS"))
    lines += ["%-50s %10s" % row for row in rows]

    def pct(v):
        return "-" if v is None else "%.2fx" % v
    lines.append("zshard / DDP %s (target <= %.2fx), zshard / bound %s "
                 "(target <= %.2fx), DDP / bound %s" % (
                     pct(r["zshard_over_ddp"]), TARGETS["zshard_over_ddp"],
                     pct(r["zshard_over_bound"]),
                     TARGETS["zshard_over_bound"], pct(r["ddp_over_bound"])))
    lines.append("zshard step / its own forward + backward %s" %
                 pct(r["zshard_over_own_fwd_bwd"]))
    return "\n".join(lines)


def default_baselines_dir():
    for up in (1, 2):
        d = os.path.normpath(os.path.join(REPO, *([".."] * up), "shared",
                                          "baselines"))
        if os.path.isdir(d):
            return d
    return os.path.normpath(os.path.join(REPO, "..", "shared", "baselines"))


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--global-batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=6,
                    help="timed steps after the warm-up (default 6)")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--handoff-steps", type=int, default=30)
    ap.add_argument("--bucket-size", type=int, default=25 << 18,
                    help="elements per bucket (default 6,553,600: torch "
                    "DDP's 25 MiB of fp32)")
    ap.add_argument("--step-delay-ms", type=int, default=0,
                    help="the job's workload.step_delay_ms (default 0; the "
                    "job spec's own default is 100)")
    ap.add_argument("--bin-dir", default=os.environ.get(
        "ZSHARD_BIN_DIR", os.path.join(REPO, "build", "bin")))
    ap.add_argument("--no-ddp", action="store_true",
                    help="skip the DDP baseline (where ../shared/baselines is "
                    "not there); its figures and ratios are null")
    ap.add_argument("--baselines-dir", default=default_baselines_dir(),
                    help="where torch_ddp_train.py lives (default "
                    "<repo>/../shared/baselines, or ../../shared/baselines "
                    "for a worktree one level deeper)")
    ap.add_argument("--output", choices=["json", "table"], default="json")
    ap.add_argument("--timeout", type=float, default=1200,
                    help="seconds each measurement may take")
    ap.add_argument("--overlap-param-gather", action="store_true",
                    help="measure the zshard step with overlap_param_gather "
                    "off and on instead")
    ap.add_argument("--pairs", type=int, default=2,
                    help="runs of each mode with --overlap-param-gather "
                    "(default 2)")
    # The trainer process's own flags.
    ap.add_argument("--trainer", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--handoff", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--socket", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--trainer-overlap-param-gather", action="store_true",
                    help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    for name in ("ranks", "width", "layers", "global_batch", "steps",
                 "pairs"):
        if getattr(args, name) < 1:
            ap.error("--%s must be >= 1" % name.replace("_", "-"))
    if args.warmup < 1:
        ap.error("--warmup must be >= 1")
    if args.global_batch < args.ranks:
        ap.error("--global-batch must be >= --ranks")
    return args


def main(argv):
    args = parse(argv)
    if args.trainer:
        return trainer_main(args)
    gather = args.overlap_param_gather
    if gather:
        import trainer_bench_gather
    try:
        result = (trainer_bench_gather.measure(args) if gather else
                  measure(args))
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        print("trainer_bench: %s" % e, file=sys.stderr)
        return 1
    if args.output == "json":
        print(json.dumps(result))
    else:
        print(trainer_bench_gather.table(result) if gather else
              table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
