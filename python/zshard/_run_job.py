"""The job zshard-run gives its embedded coordinator (zshard.run): a job
file with the world set from the flags (make_job), or a job built from the
flags alone (build_job), whose model the coordinator takes from the first
trainer that attaches."""

from __future__ import annotations

import argparse
import json
import os
import re
from typing import Any, Dict, Optional

from zshard._run_flags import Usage

__all__ = ["make_job", "build_job", "job_name", "TRANSITION_TIMEOUT_MS"]

# A transition's waits (the job spec's default: 4 leases, 20 s): the first
# epoch waits for every trainer to import torch and attach, which takes
# several seconds each on a busy machine.
TRANSITION_TIMEOUT_MS = 60000


def _world(job: Dict[str, Any], world: int,
           instances: Optional[int]) -> Dict[str, Any]:
    out = dict(job.get("world") or {}, min=world, max=world)
    if instances is not None:
        out["instances"] = instances
    return out


def make_job(path: str, world: int, instances: Optional[int]) -> Dict[str, Any]:
    """The job of the file `path` with world.min = world.max = `world` and
    world.instances = `instances` when given. Its model may be left out:
    the coordinator then takes the first trainer's.

    Raises:
        Usage: the file cannot be read, is not a JSON object, or its
            workload is not of kind 'trainer'.
    """
    try:
        with open(path) as f:
            job = json.load(f)
    except (OSError, ValueError) as e:
        raise Usage("cannot read the job %s: %s" % (path, e)) from None
    if not isinstance(job, dict):
        raise Usage("the job %s is not a JSON object" % path)
    kind = (job.get("workload") or {}).get("kind")
    if kind != "trainer":
        raise Usage("the job %s's workload is of kind %r; zshard-run runs "
                    "trainers (kind 'trainer')" % (path, kind))
    return dict(job, world=_world(job, world, instances))


def job_name(script: str) -> str:
    """A job name from the training script's file name: its letters,
    digits, '.', '_' and '-' ('train' when none is left)."""
    stem = os.path.splitext(os.path.basename(script))[0]
    name = re.sub(r"[^A-Za-z0-9._-]", "", stem)[:128]
    return name or "train"


def build_job(args: argparse.Namespace) -> Dict[str, Any]:
    """The job of the flags --steps, --global-batch, --lr, --schedule,
    --warmup-steps, --min-lr, --weight-decay, --clip-grad-norm, --world
    (default --nproc) and --instances (default 1): a trainer job with no
    model (the first trainer's is taken). Every field it sets, and the
    defaults of the rest, are those of docs/reference/job-spec.md."""
    optimizer: Dict[str, Any] = {
        "lr": args.lr, "weight_decay": args.weight_decay or 0.0,
        "clip_grad_norm": args.clip_grad_norm or 0.0}
    schedule = args.schedule or "constant"
    warmup = args.warmup_steps or 0
    if schedule != "constant":
        optimizer["lr_schedule"] = {
            "kind": schedule, "warmup_steps": warmup,
            "decay_steps": args.steps, "min_lr": args.min_lr or 0.0}
    elif warmup:
        optimizer["lr_schedule"] = {"kind": "constant",
                                    "warmup_steps": warmup}
    world = args.world if args.world is not None else args.nproc
    return {
        "name": job_name(args.script),
        "optimizer": optimizer,
        "world": _world({}, world, args.instances or 1),
        "transition_timeout_ms": TRANSITION_TIMEOUT_MS,
        "workload": {"kind": "trainer", "steps": args.steps,
                     "global_batch": args.global_batch},
    }
