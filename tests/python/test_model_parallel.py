"""PyTorch trainers of a model-parallel job on real processes: T = 2 tensor
ranks (a column- and a row-parallel Linear, torch.distributed gloo among a
replica's trainers) and P = 2 pipeline stages (send/recv of activations),
R = 2 replicas: 8 worker daemons, each with a trainer that asks where it
sits and builds that slot's module (deploy/demo/mp_toy.py). The final params equal a
single-process torch AdamW run of the whole model, and a daemon killed mid
run is replaced by a spare whose trainer builds the dead one's slot: its
replica's trainers rebuild their groups from a new generation, the other
replica's keep theirs, and the result still matches."""

import json
import os
import signal
import sys
import time
import unittest

import torch

import cluster

DEMO = os.path.join(cluster.HERE, "..", "..", "deploy", "demo")
sys.path.insert(0, DEMO)

import mp_toy  # noqa: E402
import test_trainer  # noqa: E402
from zshard import StepInfo  # noqa: E402
from zshard.model_parallel import Groups, _group_ranks  # noqa: E402
from zshard.steps import ModelParallel  # noqa: E402

STEPS = 12
GLOBAL_BATCH = 8
OPTIMIZER = test_trainer.OPTIMIZER


def job():
    return mp_toy.job(STEPS, GLOBAL_BATCH, OPTIMIZER)


def reference():
    """The whole model in one process on the whole batch, through
    test_trainer's torch AdamW run: final state and each step's norm."""
    x, y = mp_toy.batch(GLOBAL_BATCH)
    return test_trainer.reference(
        STEPS, model=mp_toy.full(),
        loss_of=lambda m: mp_toy.full_loss(m, x, y),
        global_batch=GLOBAL_BATCH)


class GroupRanksTest(unittest.TestCase):
    """The replica's groups in the rank order tp + T * (cp + C * pp)."""

    def test_tp2_pp2_cp2(self):
        mp = ModelParallel("tcp://127.0.0.1:1", 1, 0, 8, 2, 2, 2)
        tensor, pipeline, context = _group_ranks(mp)
        self.assertEqual(tensor, [[0, 1], [2, 3], [4, 5], [6, 7]])
        self.assertEqual(pipeline, [[0, 4], [2, 6], [1, 5], [3, 7]])
        self.assertEqual(context, [[0, 2], [4, 6], [1, 3], [5, 7]])

    def test_update_refuses_a_step_without_model_parallelism(self):
        with self.assertRaisesRegex(Exception, "not of a model-parallel"):
            Groups().update(StepInfo(1, 0, 1, 8, 0.1))


class ModelParallelTrainerTest(unittest.TestCase):

    def setUp(self):
        if not os.environ.get("ZSHARD_BIN_DIR"):
            self.skipTest("ZSHARD_BIN_DIR is not set (run through ctest)")
        spec = job()
        if "without_a_spare" in self._testMethodName:
            spec["world"]["min"] = 4  # one replica may train on alone
        self.cluster = cluster.Cluster(spec)
        self.addCleanup(self.cluster.stop)
        self.resume_file = os.path.join(self.cluster.dir, "resume")

    def start(self, daemons, pause_after=0):
        c = self.cluster
        env = dict(os.environ, PYTHONPATH=cluster.PYTHONPATH,
                   PYTHONDONTWRITEBYTECODE="1")
        trainers, outs = [], []
        for i in range(daemons):
            w = "w%d" % i
            c.start_worker(w)
            outs.append(os.path.join(c.dir, w + ".pt"))
            name = "trainer-" + w
            extra = (["--pause-after", str(pause_after), "--resume-file",
                      self.resume_file] if pause_after else [])
            c.spawn(name, [sys.executable,
                           os.path.join(DEMO, "mp_trainer.py"),
                           c.socket(w), outs[-1], "--log",
                           os.path.join(c.dir, name + ".steps"), *extra],
                    env=env)
            trainers.append(name)
        return trainers, outs

    def finish(self, trainers, workers):
        test_trainer.finish(self, self.cluster, trainers, workers)

    def assert_matches_reference(self, outs, replicas=2):
        """Every slot's params, from both replicas, against the reference
        cut the same way: the two replicas' copies bit-identical, and
        within test_trainer's bounds of torch AdamW (the same reasoning:
        fp32 sums in another order)."""
        want, _ = reference()
        initial = mp_toy.full().state_dict()
        by_slot = {}
        for out in outs:
            if not os.path.exists(out):
                continue  # a spare never placed, or a killed daemon's
            with open(out + ".slot") as f:
                slot = tuple(sorted(json.load(f).items()))
            by_slot.setdefault(slot, []).append(torch.load(out))
        self.assertEqual(len(by_slot), 4, by_slot.keys())
        for slot, copies in by_slot.items():
            self.assertEqual(len(copies), replicas, slot)
            for name, value in copies[0].items():
                for other in copies[1:]:
                    self.assertTrue(torch.equal(value, other[name]),
                                    (slot, name))
            s = dict(slot)
            ref = mp_toy.slot_params(want, s["tp"], s["pp"])
            init = mp_toy.slot_params(initial, s["tp"], s["pp"])
            self.assertEqual(sorted(ref), sorted(copies[0]))
            for name, value in ref.items():
                moved = (value - init[name]).abs().max().item()
                diff = (copies[0][name] - value).abs()
                self.assertGreater(moved, 1e-2, (slot, name))
                self.assertLess(diff.median().item(), 5e-7, (slot, name))
                self.assertLess(diff.max().item(), 1e-4, (slot, name, moved))

    def assert_norms(self, log):
        _, norms = reference()
        for s in log:
            if s["failed"]:
                continue
            want = norms[s["step"] - 1]
            self.assertLess(abs(s["grad_norm"] - want), 1e-5 * want, s)
        self.assertGreater(max(norms), OPTIMIZER["clip_grad_norm"])

    def test_tp2_pp2_r2_matches_adamw(self):
        trainers, outs = self.start(8)
        self.finish(trainers, ["w%d" % i for i in range(8)])
        logs = {t: self.cluster.steps(t) for t in trainers}
        for t, log in logs.items():
            self.assertEqual([s["step"] for s in log],
                             list(range(1, STEPS + 1)), t)
            self.assertTrue(all(s["applied"] for s in log), t)
            self.assertEqual({s["world"] for s in log}, {2}, t)
            self.assertEqual({s["rank"] for s in log}, {log[0]["replica"]})
            # One generation the whole run: built once.
            self.assertEqual(sum(s["rebuilt"] for s in log), 1, t)
        positions = {(s[0]["replica"], s[0]["tp"], s[0]["pp"])
                     for s in logs.values()}
        self.assertEqual(len(positions), 8, positions)
        self.assert_norms(logs[trainers[0]])
        self.assert_matches_reference(outs)

    def kill_at_step(self, trainers, step, position):
        """Kills the daemon at `position` (replica, tp, pp) once its trainer
        logged `step` (every trainer pauses there) and lets them go on;
        returns its index and last log line. Its trainer gets WorkerLost."""
        deadline = time.monotonic() + 240
        victim = None
        while victim is None and time.monotonic() < deadline:
            for t in trainers:
                log = self.cluster.steps(t)
                if log and log[-1]["step"] >= step and (
                        log[-1]["replica"], log[-1]["tp"],
                        log[-1]["pp"]) == position:
                    victim = t
                    break
            time.sleep(0.05)
        self.assertIsNotNone(victim, "no trainer at %s reached step %d" %
                             (position, step))
        index = trainers.index(victim)
        before = self.cluster.steps(victim)[-1]
        self.cluster.procs["w%d" % index].send_signal(signal.SIGKILL)
        open(self.resume_file, "w").close()
        self.assertEqual(self.cluster.wait(victim, 60), 3,
                         self.cluster.read_log(victim))
        return index, before

    def test_a_daemon_killed_mid_run_is_replaced_by_a_spare(self):
        # Nine daemons for a world of eight: the ninth's trainer waits in
        # wait_position until its daemon takes the dead one's position.
        # The victim is not its replica's rank 0, whose trainer hosts the
        # store: the store stays, the generation must change.
        trainers, outs = self.start(9, pause_after=4)
        index, before = self.kill_at_step(trainers, 4, (0, 1, 1))
        alive = [i for i in range(9) if i != index]
        self.finish([trainers[i] for i in alive], ["w%d" % i for i in alive])
        logs = {i: self.cluster.steps(trainers[i]) for i in alive}
        spare = [i for i in alive
                 if logs[i] and logs[i][0]["step"] > 1]
        self.assertEqual(len(spare), 1, logs)
        took = logs[spare[0]][0]
        self.assertEqual((took["replica"], took["tp"], took["pp"]),
                         (before["replica"], before["tp"], before["pp"]))
        for i in alive:
            log = [s for s in logs[i] if not s["failed"]]
            self.assertEqual(log[-1]["step"], STEPS, i)
            gens = sorted({s["generation"] for s in log})
            if i != spare[0] and log[0]["replica"] == before["replica"]:
                # Its replica changed: the trainers rebuilt their groups.
                self.assertEqual(len(gens), 2, (i, gens))
            else:  # the other replica's, and the spare's since it came
                self.assertEqual(len(gens), 1, (i, gens))
        self.assert_norms(logs[spare[0]])
        self.assert_matches_reference([outs[i] for i in alive])


    def test_without_a_spare_the_replica_dissolves_and_its_trainers_wait(self):
        # keep_d with no spare: the replica that lost a daemon is dissolved
        # (its daemons become spares, their trainers wait in begin_step and
        # get None at the end); the other replica trains on alone, its
        # groups and generation unchanged, and still matches AdamW.
        trainers, outs = self.start(8, pause_after=4)
        index, before = self.kill_at_step(trainers, 4, (1, 0, 0))
        alive = [i for i in range(8) if i != index]
        self.finish([trainers[i] for i in alive], ["w%d" % i for i in alive])
        logs = {i: self.cluster.steps(trainers[i]) for i in alive}
        lost = [i for i in alive if logs[i][0]["replica"] == before["replica"]]
        kept = [i for i in alive if i not in lost]
        self.assertEqual(len(lost), 3)
        for i in lost:  # waited from the failed step on
            self.assertLess(logs[i][-1]["step"], STEPS, logs[i])
        for i in kept:
            log = [s for s in logs[i] if not s["failed"]]
            self.assertEqual([s["step"] for s in log],
                             list(range(1, STEPS + 1)), i)
            self.assertEqual({s["generation"] for s in log}, {1}, i)
            self.assertEqual(log[-1]["world"], 1)
            self.assertEqual(sum(s["rebuilt"] for s in log), 1, i)
        self.assert_norms(logs[kept[0]])
        self.assert_matches_reference([outs[i] for i in kept], replicas=1)


if __name__ == "__main__":
    unittest.main()
