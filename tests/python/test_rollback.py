"""A rollback to a checkpoint through real processes: I = 1, a spare, a
ranked daemon SIGKILLed. The range it held has no replica, so the world
resumes from the last checkpoint and repeats the steps after it; every
trainer is told which steps are repeats (StepInfo.repeated), and the run
ends where an undisturbed one does."""

import os
import shutil
import tempfile
import time
import unittest

import cluster
import test_trainer

CHECKPOINT_EVERY = 4
KILL_AFTER = 6


class RollbackTest(unittest.TestCase):

    assert_matches_reference = test_trainer.TrainerTest.assert_matches_reference

    def setUp(self):
        if not os.environ.get("ZSHARD_BIN_DIR"):
            self.skipTest("ZSHARD_BIN_DIR is not set (run through ctest)")
        self.ckpt = tempfile.mkdtemp(prefix="zshard-rollback-")
        self.addCleanup(shutil.rmtree, self.ckpt, True)
        job = test_trainer.job()
        job["world"] = {"instances": 1, "min": 2, "max": 2}
        job["checkpoint"] = {"dir": self.ckpt,
                             "every_steps": CHECKPOINT_EVERY}
        self.cluster = cluster.Cluster(job)
        self.addCleanup(self.cluster.stop)

    def test_the_steps_after_the_checkpoint_run_again_marked_repeated(self):
        c = self.cluster
        resume = os.path.join(c.dir, "resume")
        trainers = {}
        for i in range(3):  # world 2 and a spare
            name = "w%d" % i
            c.start_worker(name)
            trainers[name] = c.start_trainer(
                name, os.path.join(c.dir, name + ".pt"),
                extra=["--pause-after", str(KILL_AFTER),
                       "--resume-file", resume])
        deadline = time.monotonic() + 240
        ranked = []
        while len(ranked) < 2:
            self.assertLess(time.monotonic(), deadline, "no step %d" %
                            KILL_AFTER)
            ranked = [w for w, t in trainers.items()
                      if any(s["step"] == KILL_AFTER for s in c.steps(t))]
            time.sleep(0.05)
        victim, survivor = ranked
        spare = next(w for w in trainers if w not in ranked)
        c.procs[victim].kill()
        c.wait(victim, 30)
        # The world re-forms from the checkpoint of step 4 before the
        # trainers go on.
        while not any("rolls back" in e["reason"] or
                      e["kind"] == "restore" for e in c.events()):
            self.assertLess(time.monotonic(), deadline, "no rollback")
            time.sleep(0.1)
        open(resume, "w").close()
        for w in (survivor, spare):
            self.assertEqual(c.wait(trainers[w], 300), 0,
                             c.read_log(trainers[w]))
        self.assertEqual(c.wait(trainers[victim], 60), 3)

        log = [s for s in c.steps(trainers[survivor]) if not s["failed"]]
        steps = [s["step"] for s in log]
        # 1..6, then 5 and 6 again (repeats), then 7..20.
        again = list(range(CHECKPOINT_EVERY + 1, KILL_AFTER + 1))
        self.assertEqual(steps, list(range(1, KILL_AFTER + 1)) + again +
                         list(range(KILL_AFTER + 1,
                                    test_trainer.STEPS + 1)), steps)
        first = log[:KILL_AFTER]
        repeats = log[KILL_AFTER:KILL_AFTER + len(again)]
        rest = log[KILL_AFTER + len(again):]
        self.assertFalse(any(s["repeated"] for s in first), first)
        self.assertTrue(all(s["repeated"] for s in repeats), repeats)
        self.assertFalse(any(s["repeated"] for s in rest), rest)
        # The spare's trainer joined at the rollback: told the same.
        spare_log = [s for s in c.steps(trainers[spare]) if not s["failed"]]
        self.assertEqual([s["step"] for s in spare_log if s["repeated"]],
                         again, spare_log)
        # And the run ends where an undisturbed one does.
        self.assert_matches_reference(
            [os.path.join(c.dir, w + ".pt") for w in (survivor, spare)],
            rest)


if __name__ == "__main__":
    unittest.main()
