"""A trainer job whose spec has no model takes its first trainer's: real
processes (coordinator, daemons, trainers on loopback)."""

import os
import subprocess
import time
import unittest

import torch

import cluster
import models
import test_trainer
import zshard
from zshard import DistributedOptimizer


def job_without_model():
    job = test_trainer.job()
    del job["model"]
    return job


class ModelFromTrainerTest(unittest.TestCase):

    assert_matches_reference = test_trainer.TrainerTest.assert_matches_reference

    def setUp(self):
        if not os.environ.get("ZSHARD_BIN_DIR"):
            self.skipTest("ZSHARD_BIN_DIR is not set (run through ctest)")
        self.cluster = cluster.Cluster(job_without_model())
        self.addCleanup(self.cluster.stop)

    def ctl(self, *args):
        return subprocess.run(
            [cluster.bin_path("zshardctl"), "--coordinator",
             self.cluster.address, *args], capture_output=True, text=True,
            timeout=60)

    def test_the_first_trainers_model_runs_the_job(self):
        c = self.cluster
        # Before any trainer: the job says what it waits for.
        status = self.ctl("status")
        self.assertNotEqual(status.returncode, 0)
        self.assertIn("has no model yet: it takes the model of the first "
                      "trainer", status.stderr)
        # A daemon that joins before any trainer attached waits for one.
        c.start_worker("w3")
        time.sleep(1.5)
        self.assertIsNone(c.procs["w3"].poll(), c.read_log("w3"))
        trainers, outs = [], []
        for i in range(3):
            c.start_worker("w%d" % i)
        resume = os.path.join(c.dir, "resume")
        for i in range(4):
            outs.append(os.path.join(c.dir, "w%d.pt" % i))
            trainers.append(c.start_trainer(
                "w%d" % i, outs[-1],
                extra=["--pause-after", "2", "--resume-file", resume]))
        deadline = time.monotonic() + 240
        while not any(c.steps(t) for t in trainers):
            self.assertLess(time.monotonic(), deadline, "no step ran")
            time.sleep(0.05)
        # A trainer whose model differs from the one taken is refused,
        # naming the difference.
        with self.assertRaisesRegex(zshard.ZshardError,
                                    r"param 0 'embed.weight' has dtype bf16, "
                                    r"the job's 'embed.weight' has fp32"):
            DistributedOptimizer(models.tied_lm().to(torch.bfloat16),
                                 socket=c.socket("w0"), timeout=5)
        open(resume, "w").close()
        for t in trainers:
            self.assertEqual(c.wait(t, 300), 0, c.read_log(t))
        model = c.events("model")
        self.assertEqual(len(model), 1, model)
        self.assertRegex(model[0]["reason"],
                         r"^the job's model is worker w\d's trainer's: 5 "
                         r"params, 1104 elements \(stored with the job\)$")
        # The same result as the job with its model in the spec.
        self.assert_matches_reference(
            outs, [s for s in c.steps(trainers[0]) if not s["failed"]])
        for i in range(4):
            self.assertEqual(c.wait("w%d" % i, 60), 0, c.read_log("w%d" % i))

        # The model is stored with the job: a coordinator started again on
        # the same state, with the same spec, serves it at once.
        coordinator = c.procs["coordinator"]
        coordinator.terminate()
        coordinator.wait(30)
        c.start_coordinator(job_without_model(), timeout=30)
        status = self.ctl("status")
        self.assertEqual(status.returncode, 0, status.stderr)
        self.assertIn("is in the store (5 params)",
                      c.read_log("coordinator"))


if __name__ == "__main__":
    unittest.main()
