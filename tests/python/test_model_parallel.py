"""PyTorch trainers of a model-parallel job on real processes: T = 2 tensor
ranks (a column- and a row-parallel Linear, torch.distributed gloo among a
replica's trainers) and P = 2 pipeline stages (send/recv of activations),
R = 2 replicas: 8 worker daemons, each with a trainer that asks where it
sits and builds that slot's module (mp_models). The final params equal a
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
import mp_models
import test_trainer
from zshard import StepInfo
from zshard.model_parallel import Groups, _group_ranks
from zshard.steps import ModelParallel
from zshard.torch import model_spec

STEPS = 12
GLOBAL_BATCH = 8
OPTIMIZER = test_trainer.OPTIMIZER


def job():
    slots = []
    for pp in range(mp_models.PP):
        for tp in range(mp_models.TP):
            spec = model_spec(mp_models.slot(tp, pp))
            slots.append({"tp": tp, "pp": pp, "params": spec["params"]})
    return {
        "name": "mptrain",
        "parallel": {"tensor": mp_models.TP, "pipeline": mp_models.PP},
        "model": {"slots": slots},
        "layout": {"bucket_size": 64},
        "optimizer": OPTIMIZER,
        "world": {"instances": 2, "min": 8, "max": 8},
        "lease_timeout_ms": 3000,
        "heartbeat_interval_ms": 300,
        "workload": {"kind": "trainer", "steps": STEPS,
                     "global_batch": GLOBAL_BATCH,
                     "trainer_timeout_ms": 30000},
    }


def reference():
    """The whole model, one process, the whole batch, torch AdamW (the
    job's optimizer, test_trainer's): final state and each step's norm
    before clipping."""
    model = mp_models.full()
    decay = [p for p in model.parameters() if p.dim() > 1]
    no_decay = [p for p in model.parameters() if p.dim() <= 1]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": OPTIMIZER["weight_decay"]},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=OPTIMIZER["lr"], betas=(0.9, 0.999), eps=1e-8)
    x, y = mp_models.batch(GLOBAL_BATCH)
    norms = []
    for step in range(1, STEPS + 1):
        for group in opt.param_groups:
            group["lr"] = test_trainer.lr_at(step)
        opt.zero_grad()
        (mp_models.full_loss(model, x, y) / GLOBAL_BATCH).backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(
            model.parameters(), OPTIMIZER["clip_grad_norm"])))
        opt.step()
    return model.state_dict(), norms


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
        self.cluster = cluster.Cluster(job())
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
                           os.path.join(cluster.HERE, "mp_trainer_main.py"),
                           c.socket(w), outs[-1], "--log",
                           os.path.join(c.dir, name + ".steps"), *extra],
                    env=env)
            trainers.append(name)
        return trainers, outs

    def finish(self, trainers, workers):
        c = self.cluster
        for t in trainers:
            self.assertEqual(c.wait(t, 300), 0, c.read_log(t))
        for w in workers:
            self.assertEqual(c.wait(w, 60), 0, c.read_log(w))

    def assert_matches_reference(self, outs):
        """Every slot's params, from both replicas, against the reference
        cut the same way: the two replicas' copies bit-identical, and
        within test_trainer's bounds of torch AdamW (the same reasoning:
        fp32 sums in another order)."""
        want, _ = reference()
        initial = mp_models.full().state_dict()
        by_slot = {}
        for out in outs:
            if not os.path.exists(out):
                continue  # a spare never placed, or a killed daemon's
            with open(out + ".slot") as f:
                slot = tuple(sorted(json.load(f).items()))
            by_slot.setdefault(slot, []).append(torch.load(out))
        self.assertEqual(len(by_slot), 4, by_slot.keys())
        for slot, copies in by_slot.items():
            self.assertEqual(len(copies), 2, slot)
            for name, value in copies[0].items():
                self.assertTrue(torch.equal(value, copies[1][name]),
                                (slot, name))
            s = dict(slot)
            ref = mp_models.slot_params(want, s["tp"], s["pp"])
            init = mp_models.slot_params(initial, s["tp"], s["pp"])
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

    def test_a_daemon_killed_mid_run_is_replaced_by_a_spare(self):
        # Nine daemons for a world of eight: the ninth's trainer waits in
        # wait_position until its daemon takes the dead one's position.
        trainers, outs = self.start(9, pause_after=4)
        deadline = time.monotonic() + 240
        victim = None
        while victim is None and time.monotonic() < deadline:
            for t in trainers:
                log = self.cluster.steps(t)
                if log and log[-1]["step"] >= 4:
                    victim = t
                    break
            time.sleep(0.05)
        self.assertIsNotNone(victim, "no trainer reached step 4")
        index = trainers.index(victim)
        before = self.cluster.steps(victim)[-1]
        self.cluster.procs["w%d" % index].send_signal(signal.SIGKILL)
        open(self.resume_file, "w").close()
        self.assertEqual(self.cluster.wait(victim, 60), 3,
                         self.cluster.read_log(victim))
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


if __name__ == "__main__":
    unittest.main()
