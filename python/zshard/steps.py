"""What a training loop gets from the daemon each step: StepInfo from
DistributedOptimizer.begin_step() and StepResult from its step(). Both are
named tuples, immutable, with the fields in this order."""

from __future__ import annotations

from typing import NamedTuple, Optional

__all__ = ["StepInfo", "StepResult"]


class StepInfo(NamedTuple):
    """What the daemon tells the trainer at the start of a step: the 1-based
    step, this trainer's rank and the world size (both change with
    re-shards), the job's global batch and the step's learning rate.

    Attributes:
        step: the step to run, 1-based.
        rank: this trainer's rank in the world, in [0, world).
        world: the number of ranks in this step.
        global_batch: the job's samples per step, B.
        lr: this step's learning rate (the daemons apply it).
        steps: the job's length in steps (0 when the daemon did not say).
        repeated: True when this step was applied before the job rolled
            back to a checkpoint (a range of state was lost with no
            replica): it runs again from the checkpoint's state. Data keyed
            on the step (zshard.StepSampler) feeds it the same samples.
    """

    step: int
    rank: int
    world: int
    global_batch: int
    lr: float
    steps: int = 0
    repeated: bool = False


class StepResult(NamedTuple):
    """The outcome of a step: `applied` is False when a non-finite gradient
    skipped it everywhere; `grad_norm` is the global norm before clipping;
    `loss` the world's summed loss divided by the global batch (None when no
    trainer passed one, or the step failed). `failed` is True when the step did not complete
    because a peer was lost: nothing is lost, the world re-shards and the
    next begin_step returns the step to run (this one again, or the next if
    another rank completed it).

    Attributes:
        step: the step this result is for.
        applied: False when a non-finite gradient (or a refused one)
            skipped the update on every rank.
        grad_norm: the global gradient norm, before clipping; None when
            it is not finite (the protocol's JSON has no NaN or infinity)
            or the step failed.
        loss: the world's summed loss / the global batch, or None.
        failed: True when a peer was lost during the step.
    """

    step: int
    applied: bool
    grad_norm: Optional[float]
    loss: Optional[float]
    failed: bool
