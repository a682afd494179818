"""zshard-run across two "nodes" on this machine: one run starts the
coordinator (--world above its --nproc) and a second joins it with
--coordinator, found in the first's DIR/processes.json. Together they
train to the end (both exit 0, the params of single-process AdamW); when
the job is lost, the joining node exits 1 with the coordinator's reason as
its daemons heard it."""

import json
import os
import re
import signal
import subprocess
import tempfile
import time
import unittest

import torch

import test_trainer
from test_run import TRAIN, Run


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = predicate()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError("no %s within %d s" % (what, timeout))


def processes(state_dir):
    """DIR/processes.json, once it is there."""
    try:
        with open(os.path.join(state_dir, "processes.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class JoinTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        if not os.environ.get("ZSHARD_BIN_DIR"):
            raise unittest.SkipTest("ZSHARD_BIN_DIR is not set (run "
                                    "through ctest)")
        cls.tmp = tempfile.mkdtemp(prefix="zshard-run-join-")
        cls.script = os.path.join(cls.tmp, "train.py")
        with open(cls.script, "w") as f:
            f.write(TRAIN)
        cls.job = os.path.join(cls.tmp, "job.json")
        with open(cls.job, "w") as f:
            json.dump(dict(test_trainer.job(), name="jointest"), f)

    @classmethod
    def tearDownClass(cls):
        if os.environ.get("ZSHARD_KEEP_TEST_DIRS") != "1":
            subprocess.run(["rm", "-rf", cls.tmp])

    def path(self, name):
        return os.path.join(self.tmp, name)

    def out_dir(self, name):
        os.makedirs(self.path(name))
        return self.path(name)

    def two_nodes(self, name, first, second, on_a_line=None):
        """Node a: `first` flags with --state-dir (its lines to
        `on_a_line`); node b: --coordinator (from a's processes.json),
        --node-name b and `second` flags."""
        a = Run([*first, "--state-dir", self.path(name + "-a"), self.script,
                 self.out_dir(name + "-a-out"), "--sleep", "0.05"], on_a_line)
        record = wait_for(lambda: processes(self.path(name + "-a")), 60,
                          "processes.json of node a")
        address = record["coordinator"]["address"]
        self.assertRegex(address, r"^127\.0\.0\.1:\d+$")
        b = Run(["--coordinator", address, "--node-name", "b", *second,
                 "--state-dir", self.path(name + "-b"), self.script,
                 self.out_dir(name + "-b-out"), "--sleep", "0.05"])
        return a, b

    def test_a_second_node_joins_and_the_world_trains_to_the_end(self):
        a, b = self.two_nodes("plain", ["--nproc", "2", "--world", "4",
                                        "--job", self.job],
                              ["--nproc", "2"])
        self.assertEqual(b.wait(), 0, b.output())
        self.assertEqual(a.wait(), 0, a.output())
        self.assertIn("[event] finished: every rank reached step 20",
                      a.output())
        # Four ranks, two a node: every trainer ran every step.
        for run in (a, b):
            ranks = {int(m.group(1)) for m in (
                re.match(r"\[w\d\] step 20 rank (\d) ", l)
                for l in run.lines) if m}
            self.assertEqual(len(ranks), 2, run.output())
        got = [torch.load(os.path.join(self.path(d), f))
               for d in ("plain-a-out", "plain-b-out")
               for f in sorted(os.listdir(self.path(d)))]
        self.assertEqual(len(got), 4)
        want, _ = test_trainer.reference()
        for name, value in want.items():
            for params in got:
                self.assertTrue(torch.equal(params[name], got[0][name]),
                                name)
            diff = (got[0][name] - value).abs()
            self.assertLess(diff.median().item(), 5e-7, name)
            self.assertLess(diff.max().item(), 1e-4, name)
        # processes.json: every daemon by name and pid, the end's status.
        record = processes(self.path("plain-b"))
        self.assertEqual(record["state"], "ended")
        self.assertEqual(record["exit_status"], 0)
        self.assertFalse(record["coordinator"]["embedded"])
        self.assertIsNone(record["coordinator"]["pid"])
        self.assertEqual([d["name"] for d in record["daemons"]],
                         ["b-w0", "b-w1"])
        for d in record["daemons"]:
            self.assertEqual(d["exit_status"], 0)
            self.assertFalse(alive(d["pid"]))
            self.assertTrue(os.path.exists(d["log"]))
        record = processes(self.path("plain-a"))
        self.assertEqual([d["name"] for d in record["daemons"]],
                         ["w0", "w1"])
        self.assertTrue(record["coordinator"]["embedded"])
        self.assertFalse(alive(record["coordinator"]["pid"]))

    def test_a_lost_job_ends_the_joining_node_with_the_reason(self):
        # I = 1 over two nodes: node a's only daemon holds the only copy of
        # its shard; killed, the job is lost, and node b's daemons are told.
        killed = []

        def kill_a_at_step_3(run, line):
            m = re.match(r"\[w0\] step (\d+) ", line)
            if m and int(m.group(1)) >= 3 and not killed:
                pid = processes(self.path("lost-a"))["daemons"][0]["pid"]
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)

        a, b = self.two_nodes("lost", ["--nproc", "1", "--world", "2",
                                       "--instances", "1", "--job",
                                       self.job],
                              ["--nproc", "1", "--spares", "1"],
                              kill_a_at_step_3)
        self.assertEqual(b.wait(), 1, b.output())
        self.assertEqual(a.wait(), 1, a.output())
        self.assertTrue(killed, a.output())
        self.assertRegex(b.lines[-1], r"^zshard-run: the job failed: param "
                         r"'.*' .* has no live holder and there is no "
                         r"checkpoint: the job cannot go on \(b-w\d\)$")
        self.assertRegex(a.lines[-1], r"^zshard-run: the job failed \(lost\)"
                         r": param '.*' .* has no live holder")
        for name in ("lost-a", "lost-b"):
            record = processes(self.path(name))
            self.assertEqual((record["state"], record["exit_status"]),
                             ("ended", 1))
            for d in record["daemons"]:
                self.assertFalse(alive(d["pid"]))
        left = subprocess.run(["pgrep", "-f", self.tmp],
                              capture_output=True, text=True)
        self.assertEqual(left.stdout, "", "processes left behind")


if __name__ == "__main__":
    unittest.main()
