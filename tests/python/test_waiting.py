"""A trainer waiting in begin_step says why every 10 s, in the
coordinator's words: real processes (coordinator, daemons, trainers)."""

import os
import time
import unittest

import cluster
import test_trainer


class WaitingTest(unittest.TestCase):

    def setUp(self):
        if not os.environ.get("ZSHARD_BIN_DIR"):
            self.skipTest("ZSHARD_BIN_DIR is not set (run through ctest)")
        self.cluster = cluster.Cluster(test_trainer.job())  # world 4
        self.addCleanup(self.cluster.stop)

    def wait_for_line(self, trainer, text, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            log = self.cluster.read_log(trainer)
            for line in log.splitlines():
                if text in line:
                    return line
            time.sleep(0.2)
        self.fail("%s never logged %r:\n%s" % (trainer, text, log))

    def test_a_waiting_trainer_logs_why(self):
        c = self.cluster
        resume = os.path.join(c.dir, "resume")
        trainers = []

        def start(name):
            c.start_worker(name)
            trainers.append(c.start_trainer(
                name, os.path.join(c.dir, name + ".pt"),
                extra=["--pause-after", "1", "--resume-file", resume]))

        # Two daemons of a world of four: no world can form.
        start("w0")
        start("w1")
        line = self.wait_for_line(trainers[0], "begin_step has waited")
        self.assertRegex(line, r"^zshard: begin_step has waited 1\d s for its "
                         r"step: no world can form: 2 healthy members, world "
                         r"needs 4")
        # Four and a spare: the world forms; the spare's trainer is told.
        for name in ("w2", "w3", "w4"):
            start(name)
        deadline = time.monotonic() + 120
        ranked = []
        while len(ranked) < 4:
            self.assertLess(time.monotonic(), deadline, "no step 1")
            ranked = [t for t in trainers if c.steps(t)]
            time.sleep(0.1)
        spare = next(t for t in trainers if t not in ranked)
        line = self.wait_for_line(spare, "for its step: a spare")
        self.assertRegex(line, r"begin_step has waited \d+ s for its step: a "
                         r"spare: the world of 4 ranks is full; it takes a "
                         r"rank when one is lost or the world grows$")
        open(resume, "w").close()
        for t in trainers:
            self.assertEqual(c.wait(t, 120), 0, c.read_log(t))


if __name__ == "__main__":
    unittest.main()
