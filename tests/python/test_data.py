"""zshard.data.StepSampler: each step's samples depend on the step alone,
the ranks' shares make up the global batch at any world size (the split of
DistributedOptimizer.samples), a data epoch reads every sample once, a
rerun step (a rollback) reads the same samples, and DataLoader reads
exactly those indices with and without worker processes."""

import unittest

import torch
from torch.utils.data import DataLoader, TensorDataset

import zshard
from zshard.data import StepBatch, StepSampler
from zshard.optimizer import DistributedOptimizer
from zshard.steps import StepInfo


def union(sampler, step, world):
    """Every rank's share of `step` at `world`, in one list."""
    out = []
    for rank in range(world):
        out.extend(sampler.indices(step, rank, world))
    return out


class SplitTest(unittest.TestCase):

    def test_the_ranks_make_up_the_global_batch(self):
        sampler = StepSampler(40, 12, seed=5)
        for step in range(1, 8):
            batch = sampler.global_indices(step)
            self.assertEqual(len(batch), 12)
            self.assertEqual(len(set(batch)), 12, step)
            for world in (1, 3, 4):
                got = union(sampler, step, world)
                self.assertEqual(len(got), len(set(got)), (step, world))
                self.assertEqual(sorted(got), sorted(batch), (step, world))

    def test_a_rank_change_moves_samples_not_the_batch(self):
        # A re-shard from 4 ranks to 3 in the middle of step 5: the step
        # runs again at the new world and reads the same global batch.
        sampler = StepSampler(100, 24, seed=1)
        before = union(sampler, 5, 4)
        after = union(sampler, 5, 3)
        self.assertNotEqual(sampler.indices(5, 1, 4),
                            sampler.indices(5, 1, 3))
        self.assertEqual(sorted(before), sorted(after))
        self.assertEqual(sorted(after), sorted(sampler.global_indices(5)))

    def test_the_optimizers_split(self):
        # Rank r reads position b of the global batch when b % W == r, as
        # DistributedOptimizer.samples(info) says.
        # (samples() reads nothing of the optimizer: one that never
        # attached answers it.)
        opt = DistributedOptimizer.__new__(DistributedOptimizer)
        sampler = StepSampler(50, 10, seed=2)
        batch = sampler.global_indices(3)
        for world in (1, 2, 3, 4, 10, 12):
            for rank in range(world):
                info = StepInfo(3, rank, world, 10, 0.1)
                self.assertEqual(sampler.for_step(info),
                                 [batch[b] for b in opt.samples(info)])
        self.assertEqual(sampler.indices(3, 11, 12), [])


class EpochTest(unittest.TestCase):

    def test_an_epoch_reads_every_sample_once(self):
        sampler = StepSampler(60, 12, seed=3)
        for epoch in range(3):
            seen = []
            for step in range(epoch * 5 + 1, epoch * 5 + 6):
                self.assertEqual(sampler.epoch(step), epoch)
                seen.extend(union(sampler, step, 4))
            self.assertEqual(sorted(seen), list(range(60)), epoch)
        # Each epoch in its own order.
        self.assertNotEqual(sampler.global_indices(1),
                            sampler.global_indices(6))

    def test_drop_last_skips_the_rest_of_each_epoch(self):
        # 50 samples, batch 12: 4 steps per epoch read 48 distinct samples;
        # the 2 left over differ between epochs.
        sampler = StepSampler(50, 12, seed=4)
        self.assertEqual(sampler.epoch_len, 48)
        left = []
        for epoch in range(2):
            seen = []
            for step in range(epoch * 4 + 1, epoch * 4 + 5):
                seen.extend(sampler.global_indices(step))
            self.assertEqual(len(set(seen)), 48)
            self.assertEqual(seen, sampler.permutation(epoch)[:48].tolist())
            left.append(set(range(50)) - set(seen))
        self.assertEqual(sampler.epoch(5), 1)
        self.assertNotEqual(left[0], left[1])

    def test_without_drop_last_the_stream_continues(self):
        # 50 samples, batch 12: step 5 takes the last 2 of epoch 0's
        # permutation and the first 10 of epoch 1's.
        sampler = StepSampler(50, 12, seed=4, drop_last=False)
        stream = (sampler.permutation(0).tolist() +
                  sampler.permutation(1).tolist())
        for step in range(1, 9):
            self.assertEqual(sampler.global_indices(step),
                             stream[(step - 1) * 12:step * 12], step)
        self.assertEqual(sorted(stream[:50]), list(range(50)))
        self.assertEqual(sampler.epoch(5), 0)
        self.assertEqual(sampler.epoch(6), 1)

    def test_a_batch_larger_than_the_dataset(self):
        sampler = StepSampler(5, 12, seed=0, drop_last=False)
        stream = []
        for epoch in range(5):
            stream.extend(sampler.permutation(epoch).tolist())
        self.assertEqual(sampler.global_indices(1), stream[:12])
        self.assertEqual(sampler.global_indices(2), stream[12:24])
        self.assertEqual(sorted(union(sampler, 2, 5)), sorted(stream[12:24]))


class DeterminismTest(unittest.TestCase):

    def test_a_rerun_step_reads_the_same_samples(self):
        # A rollback: steps 1..9, back to step 4, on again; the sampler is
        # asked out of order and gives each step what it gave before.
        sampler = StepSampler(30, 8, seed=9)
        first = {step: sampler.indices(step, 1, 3) for step in range(1, 10)}
        for step in [4, 5, 6, 7, 8, 9, 2, 9, 1]:
            self.assertEqual(sampler.indices(step, 1, 3), first[step], step)

    def test_the_same_seed_agrees(self):
        a = StepSampler(1000, 32, seed=7)
        b = StepSampler(1000, 32, seed=7)
        for step in (1, 31, 32, 33, 500, 10 ** 6):
            self.assertEqual(a.global_indices(step),
                             b.global_indices(step), step)
            self.assertEqual(a.indices(step, 2, 5), b.indices(step, 2, 5))

    def test_different_seeds_differ(self):
        a = StepSampler(1000, 32, seed=0)
        b = StepSampler(1000, 32, seed=1)
        self.assertNotEqual(a.global_indices(1), b.global_indices(1))
        # Not the same permutations shifted by an epoch either.
        self.assertNotEqual(a.permutation(1).tolist(),
                            b.permutation(0).tolist())

    def test_the_torch_generator_is_left_alone(self):
        torch.manual_seed(123)
        expected = torch.rand(3)
        torch.manual_seed(123)
        StepSampler(100, 10, seed=3).global_indices(4)
        self.assertTrue(torch.equal(torch.rand(3), expected))


class DataLoaderTest(unittest.TestCase):

    def setUp(self):
        # Sample i is the row [i, 10 * i]: a batch names its indices.
        ids = torch.arange(37)
        self.dataset = TensorDataset(ids, ids * 10)
        self.sampler = StepSampler(37, 9, seed=11)

    def check_batch(self, got, expected):
        ids, tens = got
        self.assertEqual(ids.tolist(), expected)
        self.assertEqual(tens.tolist(), [10 * i for i in expected])

    def test_one_loader_per_step(self):
        for workers in (0, 2):
            for step in (1, 4, 5, 4):
                for world in (1, 3):
                    for rank in range(world):
                        info = StepInfo(step, rank, world, 9, 0.01)
                        expected = self.sampler.indices(step, rank, world)
                        batch_sampler = self.sampler.at(info)
                        self.assertIsInstance(batch_sampler, StepBatch)
                        self.assertEqual(len(batch_sampler), 1)
                        loader = DataLoader(self.dataset,
                                            batch_sampler=batch_sampler,
                                            num_workers=workers)
                        batches = list(loader)
                        self.assertEqual(len(batches), 1)
                        self.check_batch(batches[0], expected)

    def test_one_loader_for_the_run(self):
        steps = [StepInfo(1, 0, 2, 9, 0.1), StepInfo(2, 0, 2, 9, 0.1),
                 StepInfo(2, 2, 3, 9, 0.1), StepInfo(3, 2, 3, 9, 0.1),
                 StepInfo(2, 2, 3, 9, 0.1)]
        for workers in (0, 2):
            loader = DataLoader(self.dataset, batch_sampler=self.sampler,
                                num_workers=workers,
                                persistent_workers=workers > 0)
            for info in steps:
                self.sampler.set_step(info)
                batches = list(loader)
                self.assertEqual(len(batches), 1)
                self.check_batch(batches[0], self.sampler.for_step(info))


class BadInputTest(unittest.TestCase):

    def test_bad_arguments_raise_value_error(self):
        for args, kwargs, message in [
                ((0, 4), {}, "dataset_len must be >= 1, got 0"),
                ((10, 0), {}, "global_batch must be >= 1, got 0"),
                ((10, -3), {}, "global_batch must be >= 1, got -3"),
                ((10.0, 4), {}, "dataset_len must be an integer"),
                ((10, 4), {"seed": 1.5}, "seed must be an integer"),
                ((3, 4), {}, "drop_last needs dataset_len >= global_batch")]:
            with self.assertRaisesRegex(ValueError, message):
                StepSampler(*args, **kwargs)
        StepSampler(3, 4, drop_last=False)

    def test_bad_steps_and_ranks_raise_value_error(self):
        sampler = StepSampler(20, 4)
        for call, message in [
                (lambda: sampler.global_indices(0), "step must be >= 1"),
                (lambda: sampler.indices(0, 0, 1), "step must be >= 1"),
                (lambda: sampler.indices(1, 0, 0), "world must be >= 1"),
                (lambda: sampler.indices(1, -1, 2), "rank must be >= 0"),
                (lambda: sampler.indices(1, 2, 2),
                 r"rank must be in \[0, world\), got rank 2 of world 2"),
                (lambda: sampler.indices(True, 0, 1),
                 "step must be an integer"),
                (lambda: sampler.epoch(0), "step must be >= 1"),
                (lambda: sampler.permutation(-1), "epoch must be >= 0"),
                (lambda: sampler.at(StepInfo(1, 0, 1, 8, 0.1)),
                 "the step's global batch is 8, this sampler's is 4"),
                (lambda: sampler.at(StepInfo(0, 0, 1, 4, 0.1)),
                 "step must be >= 1")]:
            with self.assertRaisesRegex(ValueError, message):
                call()

    def test_iterating_without_a_step_raises(self):
        with self.assertRaisesRegex(ValueError, "call set_step"):
            list(StepSampler(20, 4))
        with self.assertRaisesRegex(ValueError, "rank must be"):
            StepSampler(20, 4).set_step(StepInfo(1, 3, 3, 4, 0.1))


class ExportTest(unittest.TestCase):

    def test_exported(self):
        self.assertIs(zshard.StepSampler, StepSampler)
        self.assertIn("StepSampler", zshard.__all__)
        self.assertTrue(issubclass(StepSampler,
                                   torch.utils.data.Sampler))


if __name__ == "__main__":
    unittest.main()
