"""A user's training loop through zshard, as the tests and the demo run it:
python3 trainer_main.py SOCKET OUT.pt [--log FILE] [--micro-batches N]
    [--double-backward-at STEP] [--die-in-backward STEP] [--bf16]
    [--kill-daemon-in-backward STEP --daemon-pid PID]
    [--overlap-param-gather]

Trains models.tied_lm() on models.token_batch() with the global batch the
daemon gives, then writes the final params (torch.save of the state dict)
to OUT.pt when the job is done. --micro-batches splits each step's samples
into N backward passes (all but the last inside opt.no_sync());
--double-backward-at runs them all outside no_sync at that step (refused:
the step is skipped); --die-in-backward kills this process with SIGKILL at
that step, in the last gradient hook of its backward pass (after the other
buckets were handed over); --kill-daemon-in-backward kills the daemon
(--daemon-pid) there instead, so that the hooks after it find the daemon
gone. --overlap-param-gather passes overlap_param_gather=True (each step's
log line then says whether its result deferred the all-gather, and how many
buckets were still being gathered when step() returned). Exit status 3 on
WorkerLost, 4 on JobFailed."""

import argparse
import json
import os
import signal
import sys
import time
import traceback

import torch

import models
import zshard
from zshard.torch import DistributedOptimizer


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("socket")
    parser.add_argument("out")
    parser.add_argument("--log", default=None)
    parser.add_argument("--micro-batches", type=int, default=1)
    parser.add_argument("--double-backward-at", type=int, default=0)
    parser.add_argument("--die-in-backward", type=int, default=0)
    parser.add_argument("--kill-daemon-in-backward", type=int, default=0)
    parser.add_argument("--daemon-pid", type=int, default=0)
    parser.add_argument("--pause-after", type=int, default=0,
                        help="after this step, wait for --resume-file")
    parser.add_argument("--resume-file", default=None)
    parser.add_argument("--bf16", action="store_true",
                        help="the model in bfloat16")
    parser.add_argument("--overlap-param-gather", action="store_true")
    args = parser.parse_args()
    model = models.tied_lm()
    if args.bf16:
        model = model.to(torch.bfloat16)
    log = open(args.log, "a") if args.log else None
    # The embedding's gradient is the last of a backward pass.
    embed = model.embed.weight
    dying = embed.expand_as(embed).grad_fn.next_functions[0][0]
    die_now = [False]
    kill_daemon_now = [False]

    def die(*_):
        if die_now[0]:
            os.kill(os.getpid(), signal.SIGKILL)
        if kill_daemon_now[0]:
            kill_daemon_now[0] = False
            os.kill(args.daemon_pid, signal.SIGKILL)
            time.sleep(0.3)  # its socket closes: the next hook finds it gone

    dying.register_hook(die)
    try:
        with DistributedOptimizer(
                model, socket=args.socket,
                overlap_param_gather=args.overlap_param_gather) as opt:
            while True:
                info = opt.begin_step()
                if info is None:
                    break
                x, y = models.token_batch(info.global_batch)
                die_now[0] = info.step == args.die_in_backward
                kill_daemon_now[0] = info.step == args.kill_daemon_in_backward
                samples = opt.samples(info)
                n = max(1, args.micro_batches)
                chunks = [samples[i::n] for i in range(n)]
                loss, refused = 0.0, None
                for i, chunk in enumerate(chunks):
                    part = models.summed_loss(model, x, y, chunk)
                    loss += float(part)
                    if not part.requires_grad:
                        continue
                    last = i == len(chunks) - 1
                    try:
                        if last or info.step == args.double_backward_at:
                            part.backward()
                        else:
                            with opt.no_sync():
                                part.backward()
                    except zshard.WorkerLost:
                        raise  # a ZshardError too, but it ends the run
                    except zshard.ZshardError as e:
                        refused = str(e)
                        break
                result = opt.step(loss)
                # The optimizer's own record (tests only): results that
                # deferred the gather, buckets not gathered yet.
                gather = opt._gather  # pylint: disable=protected-access
                if log:
                    log.write(json.dumps({
                        "param_gather": gather.deferred if gather else 0,
                        "gathering": len(gather.pending) if gather else 0,
                        "step": result.step, "rank": info.rank,
                        "world": info.world, "lr": info.lr,
                        "steps": info.steps, "repeated": info.repeated,
                        "applied": result.applied,
                        "failed": result.failed,
                        "grad_norm": result.grad_norm,
                        "loss": result.loss, "refused": refused}) + "\n")
                    log.flush()
                if result.step == args.pause_after and args.resume_file:
                    while not os.path.exists(args.resume_file):
                        time.sleep(0.02)
    except zshard.WorkerLost as e:
        traceback.print_exc()
        print("trainer: %s" % e, file=sys.stderr)
        return 3
    except zshard.JobFailed as e:
        print("trainer: %s" % e, file=sys.stderr)
        return 4
    torch.save(model.state_dict(), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
