"""What a training loop gets from the daemon each step: StepInfo from
DistributedOptimizer.begin_step() and StepResult from its step(). Both are
named tuples, immutable, with the fields in this order."""

from __future__ import annotations

from typing import Any, Dict, NamedTuple, Optional

__all__ = ["ModelParallel", "StepInfo", "StepResult", "step_info"]


class ModelParallel(NamedTuple):
    """How the trainers of one replica of a model-parallel job meet for
    their own torch.distributed groups (zshard runs no tensor or pipeline
    communication): the TCPStore at `init_method`, hosted by the trainer of
    replica rank 0, with keys under `generation`. The generation changes
    whenever the replica's members change (a spare took a position): the
    trainers then rebuild their groups (zshard.model_parallel.Groups does).

    Attributes:
        init_method: "tcp://HOST:PORT" of the replica's TCPStore.
        generation: changes with the replica's members.
        rank: this trainer's rank in the replica, tp + T * (cp + C * pp).
        world: the replica's trainers, T * P * C.
        tensor: T.
        pipeline: P.
        context: C.
    """

    init_method: str
    generation: int
    rank: int
    world: int
    tensor: int
    pipeline: int
    context: int


class StepInfo(NamedTuple):
    """What the daemon tells the trainer at the start of a step: the 1-based
    step, this trainer's rank and the world size (both change with
    re-shards), the job's global batch and the step's learning rate. In a
    model-parallel job, rank and world are the replica and the number of
    replicas (the ranks of one context-parallel group take the same
    samples), and the trainer's position and rendezvous come with them.

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
        tp_rank: the tensor-parallel rank (0 without model parallelism).
        pp_rank: the pipeline stage.
        cp_rank: the context-parallel rank.
        replica: the replica (as rank in a model-parallel job).
        model_parallel: the replica's rendezvous; None without model
            parallelism.
    """

    step: int
    rank: int
    world: int
    global_batch: int
    lr: float
    steps: int = 0
    repeated: bool = False
    tp_rank: int = 0
    pp_rank: int = 0
    cp_rank: int = 0
    replica: int = 0
    model_parallel: Optional[ModelParallel] = None


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


def step_info(body: Dict[str, Any]) -> StepInfo:
    """The StepInfo of the daemon's "step" message `body`."""
    mp = body.get("model_parallel")
    return StepInfo(body["step"], body["rank"], body["world"],
                    body["global_batch"], body["lr"], body.get("steps", 0),
                    bool(body.get("repeated", False)),
                    body.get("tp_rank", 0), body.get("pp_rank", 0),
                    body.get("cp_rank", 0), body.get("replica", 0),
                    None if mp is None else ModelParallel(
                        mp["init_method"], mp["generation"], mp["rank"],
                        mp["world"], mp["tensor"], mp["pipeline"],
                        mp["context"]))
