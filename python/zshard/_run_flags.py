"""zshard-run's command line (zshard.run): the flags, their checks, and the
one-line errors (Usage, exit status 2) of a bad combination.

Three forms, by what says where the job comes from:

- `--job FILE`: the job of the file (with or without a model);
- `--steps T --global-batch B --lr LR [...]`: a job built from the flags
  (zshard._run_job.build_job), its model taken from the first trainer;
- `--coordinator HOST:PORT[,...]`: no job and no coordinator here; the
  daemons join the running job of that coordinator.
"""

from __future__ import annotations

import argparse
import os
import re
from typing import List, NoReturn, Optional

__all__ = ["Usage", "parse_args", "parser", "coordinator_list"]

# The flags of the job without a file (--steps), by their argparse names.
STEPS_FLAGS = ("global_batch", "lr", "schedule", "warmup_steps", "min_lr",
               "weight_decay", "clip_grad_norm")
# The flags that shape the job or the embedded coordinator: none of them
# means anything to a node that joins with --coordinator.
JOB_FLAGS = ("job", "steps", "world", "instances", "listen",
             "init_from") + STEPS_FLAGS


class Usage(Exception):
    """A bad flag, job or binary: one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise Usage(message)


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="zshard-run", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="""\
Trains TRAIN.py through zshard on this machine: an embedded coordinator
(loopback by default), N + S worker daemons w0.. and one trainer per
daemon, run as `python3 TRAIN.py ARGS` (this interpreter) with
ZSHARD_TRAINER_SOCKET (its daemon's socket), ZSHARD_LOCAL_RANK (the
daemon's index) and PYTHONPATH (this package first). With --coordinator,
the daemons and trainers of one node of a job that runs elsewhere.""",
        epilog="""\
The job: --job FILE, used as it is but for world.min and world.max (both
set to --world, default N) and world.instances (--instances); or, without
a file, --steps T --global-batch B --lr LR [--schedule ...]: a trainer job
of world N (--world), I = --instances (default 1), whose model is taken
from the first trainer that attaches. Its workload must be 'trainer'.

Output: trainers' lines prefixed [wI]; the coordinator's and the daemons'
warnings and errors prefixed [coordinator] and [wI:worker] (every line
with --tee-all); notable events as [event] lines; on a terminal, a
progress line. Every child's whole output is in DIR/*.log; DIR/
processes.json names every process (pids, sockets, logs) and DIR/
events.jsonl holds the job's events as they came.

Binaries: --bin-dir, else $ZSHARD_BIN_DIR, else build/bin of the checkout
this package is in, else PATH.

Exit status: 0 the job finished, 1 it failed (one line says why), 2 bad
usage, a bad job or a missing binary, 130 SIGINT or SIGTERM.""")
    p.add_argument("--nproc", type=int, required=True, metavar="N",
                   help="worker daemons (and trainers) on this machine; the "
                   "job's world unless --world says otherwise")
    p.add_argument("--spares", type=int, default=0, metavar="S",
                   help="spare daemons (with trainers) that take over a lost "
                   "rank (default 0)")
    p.add_argument("--world", type=int, default=None, metavar="W",
                   help="the job's world, world.min = world.max = W (default "
                   "N); the other W - N ranks join with --coordinator")
    p.add_argument("--instances", type=int, default=None, metavar="I",
                   help="world.instances (default: the job file's; 1 "
                   "without a file)")
    p.add_argument("--job", default=None, metavar="JOB.json",
                   help="the job spec (its model may be left out: the "
                   "first trainer's is taken)")
    steps = p.add_argument_group(
        "the job without a file (instead of --job)")
    steps.add_argument("--steps", type=int, default=None, metavar="T",
                       help="the job's length in steps")
    steps.add_argument("--global-batch", type=int, default=None, metavar="B",
                       help="samples per step, over the whole world")
    steps.add_argument("--lr", type=float, default=None, metavar="LR",
                       help="AdamW's learning rate (the schedule's base)")
    steps.add_argument("--schedule", default=None,
                       choices=("constant", "cosine", "linear"),
                       help="the learning rate's schedule (default "
                       "constant); cosine and linear decay to --min-lr at "
                       "step T")
    steps.add_argument("--warmup-steps", type=int, default=None,
                       metavar="K", help="linear warmup over the first K "
                       "steps (default 0)")
    steps.add_argument("--min-lr", type=float, default=None, metavar="LR",
                       help="cosine and linear: the rate at step T "
                       "(default 0)")
    steps.add_argument("--weight-decay", type=float, default=None,
                       metavar="WD", help="AdamW's decoupled weight decay "
                       "(default 0)")
    steps.add_argument("--clip-grad-norm", type=float, default=None,
                       metavar="C", help="clip the gradients' global norm "
                       "to C (default 0: no clipping)")
    p.add_argument("--coordinator", default=None,
                   metavar="HOST:PORT[,HOST:PORT...]",
                   help="join the running job of this coordinator (one node "
                   "of a multi-node job): start only the daemons and their "
                   "trainers")
    p.add_argument("--listen", default=None, metavar="HOST:PORT",
                   help="where the embedded coordinator listens (default "
                   "127.0.0.1:0, any free port); e.g. 0.0.0.0:7070 for "
                   "nodes that join from other machines")
    p.add_argument("--comm-host", default=None, metavar="HOST",
                   help="the address other nodes reach this node's daemons "
                   "at (default: the one that reaches --coordinator, or "
                   "the --listen host, else 127.0.0.1)")
    p.add_argument("--node-name", default=None, metavar="NAME",
                   help="this node's name: the daemons are NAME-w0.. and "
                   "carry the label node=NAME (default: the daemons are "
                   "w0..; with --coordinator, NAME is this host's name)")
    p.add_argument("--init-from", default=None, metavar="FILE.pt",
                   help="start the job from this torch.save file ({'model': "
                   "state_dict, 'optimizer': AdamW state_dict}, or a "
                   "state_dict): a job file with its model (zshard-"
                   "coordinator --init-from)")
    p.add_argument("--state-dir", metavar="DIR",
                   help="the coordinator's store, the logs, processes.json "
                   "and the sockets, kept; a new one per run (default: a "
                   "temporary directory, removed at the end)")
    p.add_argument("--bin-dir", metavar="DIR",
                   help="where zshard-coordinator, zshard-worker and "
                   "zshardctl are")
    p.add_argument("--max-trainer-restarts", type=int, default=3, metavar="R",
                   help="restarts of a trainer that exits non-zero while its "
                   "daemon runs (default 3)")
    p.add_argument("--tee-all", action="store_true",
                   help="print every line of the coordinator and the daemons, "
                   "not only warnings and errors")
    p.add_argument("script", metavar="TRAIN.py", help="the training script")
    p.add_argument("script_args", nargs=argparse.REMAINDER, metavar="ARGS",
                   help="its arguments")
    return p


def coordinator_list(text: str, flag: str = "--coordinator",
                     min_port: int = 1) -> List[str]:
    """The HOST:PORT entries of a --coordinator list; raises Usage for an
    entry that is not one."""
    entries = text.split(",")
    for e in entries:
        m = re.fullmatch(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d+)", e)
        if not m or not min_port <= int(m.group(2)) <= 65535:
            raise Usage("%s: %r is not HOST:PORT" % (flag, e))
    return entries


def _given(args: argparse.Namespace, names: tuple) -> Optional[str]:
    """The first of `names` that was given, as a flag."""
    for n in names:
        if getattr(args, n) is not None:
            return _flag(n)
    return None


def _check_modes(args: argparse.Namespace) -> None:
    """--coordinator, --job or --steps: one of them, with its own flags."""
    if args.coordinator is not None:
        coordinator_list(args.coordinator)
        extra = _given(args, JOB_FLAGS)
        if extra:
            raise Usage("%s cannot be given with --coordinator: the job is "
                        "the running coordinator's" % extra)
        return
    if args.job is not None and args.steps is not None:
        raise Usage("give --job FILE or --steps T (the job without a "
                    "file), not both")
    if args.job is None and args.steps is None:
        raise Usage("give --job FILE, or --steps T --global-batch B --lr LR "
                    "(the job without a file), or --coordinator HOST:PORT "
                    "(join a running job)")
    if args.job is not None:
        extra = _given(args, STEPS_FLAGS)
        if extra:
            raise Usage("%s is for the job without a file (--steps); with "
                        "--job it is the file's" % extra)
        return
    for name in ("global_batch", "lr"):
        if getattr(args, name) is None:
            raise Usage("--steps needs %s" % _flag(name))
    if args.steps < 1:
        raise Usage("--steps must be at least 1, got %d" % args.steps)
    if args.global_batch < 1:
        raise Usage("--global-batch must be at least 1, got %d" %
                    args.global_batch)
    if not args.lr > 0:
        raise Usage("--lr must be above 0, got %g" % args.lr)
    for name in ("warmup_steps", "min_lr", "weight_decay", "clip_grad_norm"):
        value = getattr(args, name)
        if value is not None and value < 0:
            raise Usage("%s must be at least 0, got %s" % (_flag(name), value))
    schedule = args.schedule or "constant"
    warmup = args.warmup_steps or 0
    if schedule == "constant" and args.min_lr is not None:
        raise Usage("--min-lr is for the cosine and linear schedules")
    if schedule != "constant" and warmup >= args.steps:
        raise Usage("--warmup-steps (%d) must be below --steps (%d) with the "
                    "%s schedule" % (warmup, args.steps, schedule))
    if args.min_lr is not None and args.min_lr > args.lr:
        raise Usage("--min-lr (%g) must be at most --lr (%g)" %
                    (args.min_lr, args.lr))


def parse_args(argv: List[str]) -> argparse.Namespace:
    """The flags; raises Usage for a bad one or a bad combination."""
    args = parser().parse_args(argv)
    if args.nproc < 1:
        raise Usage("--nproc must be at least 1, got %d" % args.nproc)
    if args.spares < 0:
        raise Usage("--spares must be at least 0, got %d" % args.spares)
    if args.world is not None and args.world < 1:
        raise Usage("--world must be at least 1, got %d" % args.world)
    if args.instances is not None and args.instances < 1:
        raise Usage("--instances must be at least 1, got %d" % args.instances)
    if args.max_trainer_restarts < 0:
        raise Usage("--max-trainer-restarts must be at least 0")
    if args.node_name is not None and not re.fullmatch(
            r"[A-Za-z0-9_.-]{1,200}", args.node_name):
        raise Usage("--node-name must be letters, digits, '.', '_' and '-', "
                    "got %r" % args.node_name)
    if args.listen is not None and "," in args.listen:
        raise Usage("--listen: %r is not HOST:PORT" % args.listen)
    if args.listen is not None:
        coordinator_list(args.listen, "--listen", min_port=0)
    _check_modes(args)
    if not os.path.isfile(args.script):
        raise Usage("no training script %s" % args.script)
    return args
