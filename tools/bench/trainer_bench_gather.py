"""trainer_bench.py --overlap-param-gather: the zshard step of the trainer
benchmark with DistributedOptimizer's overlap_param_gather off and on, in
one run (see trainer_bench.py's docstring)."""

import os
import statistics
import time

import trainer_bench as tb


def measure(args):
    """The zshard step with overlap_param_gather off and on, `--pairs`
    times each, alternating."""
    args.no_ddp = True  # no baseline in this mode
    tb.check_inputs(args)
    load_before = os.getloadavg()
    started = time.time()
    runs = {"off": [], "on": []}
    for _ in range(args.pairs):
        for mode in ("off", "on"):
            runs[mode].append(tb.summarize_zshard(
                *tb.run_zshard(args, handoff=False, ranks=args.ranks,
                               overlap_param_gather=mode == "on"),
                args.warmup))
    keys = ("step_s", "fwd_bwd_s", "exchange_s", "begin_step_s",
            "daemon_step_s")
    def median(values):
        values = [v for v in values if v is not None]
        return statistics.median(values) if values else None
    modes = {mode: {k: median(r[k] for r in got) for k in keys}
             for mode, got in runs.items()}
    for mode, got in runs.items():
        modes[mode]["step_s_per_run"] = [r["step_s"] for r in got]
    return {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "cpus": os.cpu_count(), "load_avg_before": list(load_before),
        "load_avg_after": list(os.getloadavg()),
        "ranks": args.ranks, "width": args.width, "layers": args.layers,
        "params": sum(p.numel() for p in tb.build_model(
            args.width, args.layers).parameters()),
        "global_batch": args.global_batch, "bucket_size": args.bucket_size,
        "steps": args.steps, "warmup": args.warmup, "pairs": args.pairs,
        "overlap_param_gather": modes,
        "on_over_off": tb.ratio(modes["on"]["step_s"], modes["off"]["step_s"]),
        # Each pair's runs came one after the other: the ratio the load
        # skews least.
        "on_over_off_per_pair": [
            tb.ratio(on["step_s"], off["step_s"])
            for off, on in zip(runs["off"], runs["on"])],
    }


def table(r):
    off, on = r["overlap_param_gather"]["off"], r["overlap_param_gather"]["on"]
    rows = [
        ("zshard step (trainer, begin_step to begin_step)", off["step_s"],
         on["step_s"]),
        ("  forward + backward (waits in the hooks when on)",
         off["fwd_bwd_s"], on["fwd_bwd_s"]),
        ("  step()", off["exchange_s"], on["exchange_s"]),
        ("  begin_step", off["begin_step_s"], on["begin_step_s"]),
        ("  daemon step (RS start to Adam end when on)",
         off["daemon_step_s"], on["daemon_step_s"]),
    ]
    lines = ["%d ranks, %d x %d, %d params, global batch %d, buckets of %d, "
             "%d steps after %d warm-up, %d pairs; load %.2f before, %.2f "
             "after, %d cpus" % (
                 r["ranks"], r["layers"], r["width"], r["params"],
                 r["global_batch"], r["bucket_size"], r["steps"],
                 r["warmup"], r["pairs"], r["load_avg_before"][0],
                 r["load_avg_after"][0], r["cpus"])]
    lines.append("%-50s %10s %10s" % ("WHAT (overlap_param_gather)", "OFF MS",
                                      "ON MS"))
    lines += ["%-50s %10s %10s" % (w, tb.ms(a), tb.ms(b)) for w, a, b in rows]
    lines.append("step on / off %s (per pair: %s)" % (
        "-" if r["on_over_off"] is None else "%.3fx" % r["on_over_off"],
        ", ".join("-" if v is None else "%.3fx" % v
                  for v in r["on_over_off_per_pair"])))
    return "\n".join(lines)
