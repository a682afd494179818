"""Trainers of a model-parallel job (tensor T, pipeline P, context C): where
a trainer sits, and its replica's own torch.distributed groups.

zshard shards the optimizer state of each model-parallel slot (tp, pp) and
runs no tensor or pipeline communication of its own: the trainers of one
replica do that among themselves, as under Megatron. A trainer asks its
daemon where it sits before it builds its slot's module (a spare's daemon
answers once it holds a position), then trains as any trainer does; each
step's StepInfo carries the replica's rendezvous, and Groups (re)builds the
replica's process groups from it whenever its generation changes (a spare
took a position after a failure):

    pos = wait_position()
    model = build_slot(pos.tp_rank, pos.pp_rank)   # the slot's params
    opt = DistributedOptimizer(model)
    groups = Groups()
    while (info := opt.begin_step()) is not None:
        groups.update(info)
        try:
            loss = forward_backward(model, groups, opt.samples(info))
        except RuntimeError as err:  # a peer of the replica was lost
            groups.abandon()
            opt.discard_step(str(err))
            loss = None
        opt.step(loss)

A trainer whose daemon later holds another slot (its replica was dissolved
and the daemon placed elsewhere) is refused by the daemon with one line
naming the slot: it exits, and its restart builds that slot's module.
"""

from __future__ import annotations

import datetime
import os
from typing import List, NamedTuple, Optional, Tuple
from urllib.parse import urlparse

from zshard import _protocol
from zshard.errors import JobFailed, ZshardError
from zshard.steps import ModelParallel, StepInfo

__all__ = ["Groups", "Position", "wait_position"]


class Position(NamedTuple):
    """Where a trainer of a model-parallel job sits.

    Attributes:
        tp_rank: the tensor-parallel rank, in [0, tensor).
        pp_rank: the pipeline stage, in [0, pipeline).
        cp_rank: the context-parallel rank, in [0, context).
        replica: the replica (the data-parallel rank).
        rank: the rank among the replica's trainers,
            tp_rank + tensor * (cp_rank + context * pp_rank).
        tensor: T.
        pipeline: P.
        context: C.
    """

    tp_rank: int
    pp_rank: int
    cp_rank: int
    replica: int
    rank: int
    tensor: int
    pipeline: int
    context: int


def wait_position(socket: Optional[str] = None,
                  timeout: float = 60.0) -> Optional[Position]:
    """Asks the daemon at `socket` (default $ZSHARD_TRAINER_SOCKET) where
    its trainer sits; waits while the daemon is a spare or the job has not
    started.

    Args:
        socket: the daemon's trainer socket.
        timeout: seconds to wait for the socket to appear.

    Returns:
        The position; None when the job's steps ended first.

    Raises:
        JobFailed: the coordinator failed the job (its reason).
        WorkerLost: the daemon went away.
        ZshardError: no socket, or the daemon refused (its line).
    """
    path = socket or os.environ.get("ZSHARD_TRAINER_SOCKET")
    if not path:
        raise ZshardError("no trainer socket: pass socket= or set "
                          "ZSHARD_TRAINER_SOCKET")
    sock = _protocol.connect(path, timeout)
    try:
        _protocol.send(sock, {"type": "position_query",
                              "version": _protocol.PROTOCOL_VERSION})
        body, fds = _protocol.recv(sock)
        _protocol.close_fds(fds)
    finally:
        sock.close()
    kind = body.get("type")
    if kind == "position":
        return Position(body["tp_rank"], body["pp_rank"], body["cp_rank"],
                        body["replica"], body["rank"], body["tensor"],
                        body["pipeline"], body["context"])
    if kind == "done":
        if body.get("failed"):
            raise JobFailed("the job failed: %s" %
                            body.get("reason", "no reason given"))
        return None
    if kind == "error":
        raise ZshardError(body.get("message", "refused by the daemon"))
    raise ZshardError("the daemon answered %r to a position query" % kind)


def _group_ranks(mp: ModelParallel) -> Tuple[List[List[int]], ...]:
    """Every tensor, pipeline and context group of a replica, by replica
    rank tp + T * (cp + C * pp), in one fixed order."""
    t, p, c = mp.tensor, mp.pipeline, mp.context

    def rank(tp: int, pp: int, cp: int) -> int:
        return tp + t * (cp + c * pp)
    tensor = [[rank(x, pp, cp) for x in range(t)]
              for pp in range(p) for cp in range(c)]
    pipeline = [[rank(tp, x, cp) for x in range(p)]
                for tp in range(t) for cp in range(c)]
    context = [[rank(tp, pp, x) for x in range(c)]
               for tp in range(t) for pp in range(p)]
    return tensor, pipeline, context


class Groups:
    """The torch.distributed groups of a replica's trainers: the default
    group over the replica (T * P * C ranks, rank StepInfo.model_parallel.
    rank) and this trainer's tensor, pipeline and context groups. update()
    rebuilds them when the step's rendezvous changed; the trainer of
    replica rank 0 hosts the replica's TCPStore.

    Attributes:
        tp, pp, cp: this trainer's groups (None before update()).
        tp_ranks, pp_ranks, cp_ranks: their replica ranks, in group order.
        generation: the rendezvous generation the groups were built for.
    """

    def __init__(self, backend: str = "gloo",
                 timeout: datetime.timedelta = datetime.timedelta(
                     seconds=60)) -> None:
        """
        Args:
            backend: the torch.distributed backend ("gloo", "nccl").
            timeout: bound on the rendezvous and on each collective: a
                peer that is lost fails this trainer's collectives within
                it at the latest.
        """
        self._backend = backend
        self._timeout = timeout
        self._store = None
        self._store_at: Optional[str] = None
        self._hosting = False  # this trainer's store is the master
        self._built: Optional[Tuple[str, int]] = None
        self.tp = self.pp = self.cp = None
        self.tp_ranks: List[int] = []
        self.pp_ranks: List[int] = []
        self.cp_ranks: List[int] = []
        self.generation: Optional[int] = None

    def update(self, info: StepInfo) -> bool:
        """Builds the groups for `info`'s rendezvous unless they are built.

        Returns:
            True when the groups were (re)built.

        Raises:
            ZshardError: the step is not of a model-parallel job.
            RuntimeError: torch.distributed could not meet the replica's
                other trainers within the timeout.
        """
        import torch.distributed as dist
        mp = info.model_parallel
        if mp is None:
            raise ZshardError("step %d is not of a model-parallel job" %
                              info.step)
        if self._built == (mp.init_method, mp.generation):
            return False
        self.abandon()
        if self._store is None or self._store_at != mp.init_method:
            url = urlparse(mp.init_method)
            if url.scheme != "tcp" or url.hostname is None or not url.port:
                raise ZshardError("the daemon's init_method %r is not "
                                  "tcp://HOST:PORT" % mp.init_method)
            self._store = None  # a store this trainer hosted closes
            self._store = dist.TCPStore(url.hostname, url.port, None,
                                        mp.rank == 0, self._timeout,
                                        wait_for_workers=False)
            self._store_at = mp.init_method
            self._hosting = mp.rank == 0
        store = dist.PrefixStore("zshard/%d/" % mp.generation, self._store)
        dist.init_process_group(self._backend, store=store, rank=mp.rank,
                                world_size=mp.world, timeout=self._timeout)
        tensor, pipeline, context = _group_ranks(mp)
        mine = []
        for ranks_of_kind in (tensor, pipeline, context):
            for ranks in ranks_of_kind:
                group = dist.new_group(ranks, timeout=self._timeout)
                if mp.rank in ranks:
                    mine.append((group, ranks))
        (self.tp, self.tp_ranks), (self.pp, self.pp_ranks), \
            (self.cp, self.cp_ranks) = mine
        self._built = (mp.init_method, mp.generation)
        self.generation = mp.generation
        return True

    def abandon(self) -> None:
        """Destroys the groups (after a failed collective: the peers' next
        collective fails at once instead of at the timeout); the next
        update() builds them again. A trainer that is not the store's host
        also drops its store connection."""
        import torch.distributed as dist
        if dist.is_initialized():
            dist.destroy_process_group()
        self.tp = self.pp = self.cp = None
        self._built = None
        if not self._hosting:
            self._store = None
            self._store_at = None
