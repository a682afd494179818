"""Which samples a trainer reads at each step: StepSampler, keyed on the
step that DistributedOptimizer.begin_step() returns, not on how often the
loop has run.

A zshard run repeats and moves steps: after a lost peer the step in flight
runs again, a rollback to a checkpoint runs steps already applied, and a
re-shard changes the world size and this trainer's rank. A sampler that
advances once per loop iteration (a DistributedSampler walked once per step)
then reads the wrong samples. StepSampler computes a step's samples from the
step alone, so every process on every machine agrees on them:

    sampler = StepSampler(len(dataset), global_batch=B, seed=0)
    while (info := opt.begin_step()) is not None:
        loader = DataLoader(dataset, batch_sampler=sampler.at(info))
        x, y = next(iter(loader))                       # this rank's share
        ...

The dataset is walked in data epochs, epoch e (0-based) in the order of a
permutation of range(dataset_len) drawn by torch.randperm from a
torch.Generator seeded from (seed, e). The steps take consecutive runs of
global_batch samples of the epochs' permutations, one after the other; see
StepSampler for the two ways (drop_last) of treating a dataset length that
is not a multiple of the global batch. Rank r of world W gets the positions
b of the step's global batch with b % W == r, the split of
DistributedOptimizer.samples(), so the ranks' shares make up the global
batch whatever W is.

This module imports torch; `import zshard` loads it on first use of
zshard.StepSampler.
"""

from __future__ import annotations

import hashlib
from typing import Any, Dict, Iterator, List, Optional

import torch
from torch.utils.data import Sampler

from zshard.steps import StepInfo

__all__ = ["StepBatch", "StepSampler"]

# Permutations kept by a sampler: a step's samples lie in at most two
# epochs unless the global batch exceeds the dataset.
_CACHED_EPOCHS = 2


def _check_int(name: str, value: Any, low: int) -> int:
    """`value` as an int, or ValueError with one line when it is not an
    integer >= low (bools are not integers here)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("%s must be an integer >= %d, got %r" %
                         (name, low, value))
    if value < low:
        raise ValueError("%s must be >= %d, got %d" % (name, low, value))
    return value


def _epoch_seed(seed: int, epoch: int) -> int:
    """The generator seed of data epoch `epoch`: 63 bits of a hash of
    (seed, epoch), so that no two (seed, epoch) pairs share a permutation
    by construction (seed + epoch would give seed 1's epoch 0 to seed 0's
    epoch 1)."""
    digest = hashlib.sha256(b"zshard.StepSampler:%d:%d" %
                            (seed, epoch)).digest()
    return int.from_bytes(digest[:8], "little") & (2 ** 63 - 1)


class StepBatch(Sampler):
    """A batch sampler of one batch: this rank's indices of one step, for
    DataLoader's `batch_sampler=`. StepSampler.at() makes it.

    Attributes:
        step: the step the batch is for.
        indices: the batch, a list of sample indices.
    """

    step: int
    indices: List[int]

    def __init__(self, step: int, indices: List[int]) -> None:
        super().__init__(None)
        self.step = step
        self.indices = list(indices)

    def __iter__(self) -> Iterator[List[int]]:
        yield list(self.indices)

    def __len__(self) -> int:
        return 1


class StepSampler(Sampler):
    """The samples of each step of a run: the global batch of a step, and
    each rank's share of it, computed from the step alone.

    Global sample k (0-based; step s takes k in [(s-1)*B, s*B) with
    B = global_batch) is a position in the stream of the data epochs'
    permutations, each a torch.randperm of range(dataset_len) seeded from
    (seed, epoch):

    - drop_last=True (the default): each epoch gives its first
      (dataset_len // B) * B positions, a whole number of steps, and the
      rest of its permutation (dataset_len % B samples, different ones in
      each epoch) is skipped. A step never spans two epochs; every sample
      appears at most once in an epoch's steps, exactly once when
      dataset_len is a multiple of B. Needs dataset_len >= B.
    - drop_last=False: the permutations follow each other whole, so every
      sample of an epoch is read once, and a step whose batch reaches the
      end of one epoch's permutation continues into the next's (it may hold
      a sample twice, once from each epoch).

    The permutations are torch's: the same on every process and machine
    with the same torch version.

    Also a batch sampler itself, for a DataLoader kept across steps (with
    num_workers > 0, persistent_workers=True keeps its worker processes):
    set_step(info) before each iter(loader); iterating yields that step's
    one batch for info's rank. at(info) gives a one-batch sampler instead,
    for a DataLoader made per step.

    Args:
        dataset_len: the number of samples, >= 1.
        global_batch: the job's samples per step B (StepInfo.global_batch),
            >= 1.
        seed: picks the permutations; samplers with the same arguments
            agree on every step.
        drop_last: skip each epoch's last dataset_len % B samples (above).

    Raises:
        ValueError: dataset_len or global_batch < 1, a seed that is not an
            integer, or drop_last with dataset_len < global_batch.

    Attributes:
        dataset_len: the number of samples.
        global_batch: the samples per step, B.
        seed: the seed of the permutations.
        drop_last: whether each epoch's last dataset_len % B are skipped.
    """

    dataset_len: int
    global_batch: int
    seed: int
    drop_last: bool

    def __init__(self, dataset_len: int, global_batch: int, seed: int = 0,
                 drop_last: bool = True) -> None:
        super().__init__(None)
        self.dataset_len = _check_int("dataset_len", dataset_len, 1)
        self.global_batch = _check_int("global_batch", global_batch, 1)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError("seed must be an integer, got %r" % (seed,))
        self.seed = seed
        self.drop_last = bool(drop_last)
        if self.drop_last and dataset_len < global_batch:
            raise ValueError(
                "drop_last needs dataset_len >= global_batch, got %d < %d "
                "(pass drop_last=False)" % (dataset_len, global_batch))
        self._perms: Dict[int, torch.Tensor] = {}
        self._info: Optional[StepInfo] = None

    def __repr__(self) -> str:
        return ("StepSampler(dataset_len=%d, global_batch=%d, seed=%d, "
                "drop_last=%s)" % (self.dataset_len, self.global_batch,
                                   self.seed, self.drop_last))

    @property
    def epoch_len(self) -> int:
        """The positions a data epoch contributes to the stream:
        dataset_len rounded down to a multiple of global_batch with
        drop_last, else dataset_len."""
        if self.drop_last:
            return self.dataset_len // self.global_batch * self.global_batch
        return self.dataset_len

    def permutation(self, epoch: int) -> torch.Tensor:
        """The order of data epoch `epoch`.

        Args:
            epoch: the data epoch, 0-based.

        Returns:
            A permutation of range(dataset_len), an int64 tensor (do not
            modify it: the sampler keeps the last ones).

        Raises:
            ValueError: epoch < 0.
        """
        _check_int("epoch", epoch, 0)
        perm = self._perms.get(epoch)
        if perm is None:
            generator = torch.Generator()
            generator.manual_seed(_epoch_seed(self.seed, epoch))
            perm = torch.randperm(self.dataset_len, generator=generator)
            if len(self._perms) >= _CACHED_EPOCHS:
                del self._perms[min(self._perms)]
            self._perms[epoch] = perm
        return perm

    def epoch(self, step: int) -> int:
        """The data epoch of the first sample of step `step`.

        Args:
            step: the step, 1-based.

        Returns:
            The 0-based data epoch.

        Raises:
            ValueError: step < 1.
        """
        _check_int("step", step, 1)
        return (step - 1) * self.global_batch // self.epoch_len

    def global_indices(self, step: int) -> List[int]:
        """The global batch of step `step`, in batch order: position b of
        the list is sample b of the step (rank b % world reads it).

        Args:
            step: the step, 1-based.

        Returns:
            global_batch sample indices in [0, dataset_len).

        Raises:
            ValueError: step < 1.
        """
        _check_int("step", step, 1)
        k = (step - 1) * self.global_batch
        end = k + self.global_batch
        out: List[int] = []
        while k < end:
            epoch, pos = divmod(k, self.epoch_len)
            take = min(end - k, self.epoch_len - pos)
            out.extend(self.permutation(epoch)[pos:pos + take].tolist())
            k += take
        return out

    def indices(self, step: int, rank: int, world: int) -> List[int]:
        """Rank `rank`'s share of step `step`'s global batch: the samples
        at positions b with b % world == rank, as
        DistributedOptimizer.samples() splits the batch (a rank >=
        global_batch gets none).

        Args:
            step: the step, 1-based.
            rank: the rank, in [0, world).
            world: the number of ranks, >= 1.

        Returns:
            The sample indices, in batch order.

        Raises:
            ValueError: step < 1, world < 1 or rank outside [0, world).
        """
        _check_int("step", step, 1)
        _check_int("world", world, 1)
        _check_int("rank", rank, 0)
        if rank >= world:
            raise ValueError("rank must be in [0, world), got rank %d of "
                             "world %d" % (rank, world))
        return self.global_indices(step)[rank::world]

    def for_step(self, info: StepInfo) -> List[int]:
        """This rank's share of a step, as begin_step() returned it.

        Args:
            info: the step, rank and world from begin_step().

        Returns:
            indices(info.step, info.rank, info.world).

        Raises:
            ValueError: info.global_batch is not this sampler's (the
                ranks would not split the same batch), or a bad step,
                rank or world.
        """
        if info.global_batch != self.global_batch:
            raise ValueError("the step's global batch is %r, this sampler's "
                             "is %d" % (info.global_batch, self.global_batch))
        return self.indices(info.step, info.rank, info.world)

    def at(self, info: StepInfo) -> StepBatch:
        """A batch sampler of this rank's one batch of a step, for
        `DataLoader(dataset, batch_sampler=sampler.at(info))`.

        Args:
            info: the step, rank and world from begin_step().

        Returns:
            A StepBatch yielding for_step(info) once.

        Raises:
            ValueError: as for_step.
        """
        return StepBatch(info.step, self.for_step(info))

    def set_step(self, info: StepInfo) -> None:
        """Makes iterating this sampler yield for_step(info), for a
        DataLoader kept across steps (`batch_sampler=sampler`); call it
        before each iter(loader).

        Args:
            info: the step, rank and world from begin_step().

        Raises:
            ValueError: as for_step (the sampler keeps its previous step).
        """
        self.for_step(info)
        self._info = info

    def __iter__(self) -> Iterator[List[int]]:
        """Yields the one batch of the step set by set_step().

        Raises:
            ValueError: no step was set.
        """
        if self._info is None:
            raise ValueError("StepSampler: call set_step(info) before "
                             "iterating it")
        yield self.for_step(self._info)

    def __len__(self) -> int:
        return 1
