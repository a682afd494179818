"""zshard-run (python -m zshard.run): one command starts the coordinator,
the worker daemons and a trainer per daemon; it trains to the end (exit 0,
the params of single-process AdamW) with a job file or with the job built
from --steps and its flags (no model: the first trainer's), survives a
daemon killed mid-run (exit 0, the same params bit for bit), fails in one
line (exit 1 or 2), and on SIGINT exits 130 leaving no process behind and
DIR/processes.json saying so. Two nodes joined by --coordinator:
test_run_join.py; the flags alone: test_run_flags.py."""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import torch

import models
import test_trainer

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "python"))

# The user's script: trains models.tied_lm(), prints each step's loss and,
# when it ran a step (a spare's trainer that never did gets None at the end
# and writes nothing), the final params to OUT/w<ZSHARD_LOCAL_RANK>.pt.
# --sleep S waits S
# seconds a step (time to kill something mid-run); --fail exits 1 at once.
TRAIN = '''
import os, sys, time
if "--fail" in sys.argv:
    sys.exit("train.py: failing on purpose")
import torch
import models
from zshard import DistributedOptimizer
out = sys.argv[1]
sleep = float(sys.argv[sys.argv.index("--sleep") + 1]) \\
    if "--sleep" in sys.argv else 0.0
model = models.tied_lm()
ran = False
with DistributedOptimizer(model) as opt:  # $ZSHARD_TRAINER_SOCKET
    while (info := opt.begin_step()) is not None:
        x, y = models.token_batch(info.global_batch)
        loss = models.summed_loss(model, x, y, opt.samples(info))
        loss.backward()
        result = opt.step(loss)
        print("step %d rank %d failed %s loss %r" % (
            result.step, info.rank, result.failed, result.loss))
        ran = True
        time.sleep(sleep)
if ran:
    torch.save(model.state_dict(), os.path.join(
        out, "w%s.pt" % os.environ["ZSHARD_LOCAL_RANK"]))
'''


class Run:
    """One zshard-run process; its output lines are collected (and acted
    on by `on_line`) by a thread."""

    def __init__(self, args, on_line=None):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([PYTHON_DIR, HERE]),
                   PYTHONDONTWRITEBYTECODE="1")
        self.lines = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "zshard.run", *args], env=env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.on_line = on_line
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if self.on_line:
                self.on_line(self, line.rstrip("\n"))

    def wait(self, timeout=150):
        code = self.proc.wait(timeout=timeout)
        self.thread.join(10)
        self.proc.stdout.close()
        return code

    def output(self):
        return "\n".join(self.lines)

    def pids(self, kind):
        """{name: pid} of the 'worker pids' or 'trainer pids' line."""
        for line in self.lines:
            m = re.search(r"%s pids ((?:w\d+=\d+ ?)+)" % kind, line)
            if m:
                return {k: int(v) for k, v in
                        (p.split("=") for p in m.group(1).split())}
        return {}


class RunTest(unittest.TestCase):
    baseline = None  # the params of the run without a kill

    @classmethod
    def setUpClass(cls):
        if not os.environ.get("ZSHARD_BIN_DIR"):
            raise unittest.SkipTest("ZSHARD_BIN_DIR is not set (run "
                                    "through ctest)")
        cls.tmp = tempfile.mkdtemp(prefix="zshard-run-test-")
        cls.script = os.path.join(cls.tmp, "train.py")
        with open(cls.script, "w") as f:
            f.write(TRAIN)
        job = test_trainer.job()  # world 4 as I = 2: zshard-run sets 2
        job["name"] = "runtest"
        cls.job = os.path.join(cls.tmp, "job.json")
        with open(cls.job, "w") as f:
            json.dump(job, f)

    @classmethod
    def tearDownClass(cls):
        if os.environ.get("ZSHARD_KEEP_TEST_DIRS") != "1":
            subprocess.run(["rm", "-rf", cls.tmp])

    def out_dir(self, name):
        path = os.path.join(self.tmp, name)
        os.makedirs(path)
        return path

    def params(self, out):
        """The trainers' final params: every file equal, bit for bit."""
        files = sorted(os.listdir(out))
        got = [torch.load(os.path.join(out, f)) for f in files]
        self.assertEqual(len(got), 2, files)
        for name, value in got[0].items():
            self.assertTrue(torch.equal(value, got[1][name]), name)
        return got[0]

    def train(self):
        """The run without a kill (once for the class): two ranks and a
        spare; returns the final params."""
        if RunTest.baseline is None:
            out = self.out_dir("plain")
            run = Run(["--nproc", "2", "--spares", "1", "--job", self.job,
                       self.script, out])
            self.assertEqual(run.wait(), 0, run.output())
            self.assertIn("[event] finished: every rank reached step 20",
                          run.output())
            steps = [l for l in run.lines if re.match(r"\[w\d\] step ", l)]
            self.assertEqual(len(steps), 2 * test_trainer.STEPS, run.output())
            RunTest.baseline = self.params(out)
        return RunTest.baseline

    def test_two_ranks_and_a_spare_train_to_the_end(self):
        got = self.train()
        want, _ = test_trainer.reference()
        for name, value in want.items():
            diff = (got[name] - value).abs()
            self.assertLess(diff.median().item(), 5e-7, name)
            self.assertLess(diff.max().item(), 1e-4, name)

    def test_a_daemon_killed_mid_run_still_finishes(self):
        want = self.train()
        out = self.out_dir("killed")
        killed = []

        def kill_at_step_5(run, line):
            m = re.match(r"\[(w\d)\] step (\d+) ", line)
            if m and int(m.group(2)) >= 5 and not killed:
                pid = run.pids("worker")[m.group(1)]
                os.kill(pid, signal.SIGKILL)
                killed.append(m.group(1))

        run = Run(["--nproc", "2", "--spares", "1", "--job", self.job,
                   self.script, out, "--sleep", "0.1"], kill_at_step_5)
        self.assertEqual(run.wait(), 0, run.output())
        self.assertTrue(killed, run.output())
        self.assertRegex(run.output(), r"\[event\] dead: member %s" %
                         killed[0])
        # The spare took the rank over; the world's params are the plain
        # run's, bit for bit.
        self.assertNotIn("w%s.pt" % killed[0][1:], os.listdir(out))
        got = self.params(out)
        for name, value in want.items():
            self.assertTrue(torch.equal(got[name], value), name)

    def test_a_job_starts_from_a_torch_file(self):
        # --init-from: the trainers' first step runs on the file's params
        # (its loss is theirs, not the fresh model's).
        torch.manual_seed(7)
        start = models.tied_lm()
        for p in start.parameters():
            torch.nn.init.normal_(p, std=0.5)
        saved = os.path.join(self.tmp, "start.pt")
        torch.save(start.state_dict(), saved)
        b = test_trainer.GLOBAL_BATCH
        x, y = models.token_batch(b)
        want = float(models.summed_loss(start, x, y, list(range(b)))) / b
        fresh = float(models.summed_loss(models.tied_lm(), x, y,
                                         list(range(b)))) / b
        self.assertGreater(abs(want - fresh), 1.0)
        job = test_trainer.one_rank_job()
        job["name"] = "initfrom"
        path = os.path.join(self.tmp, "init-job.json")
        with open(path, "w") as f:
            json.dump(job, f)
        run = Run(["--nproc", "1", "--job", path, "--init-from", saved,
                   self.script, self.out_dir("init-from")])
        self.assertEqual(run.wait(), 0, run.output())
        first = next(l for l in run.lines if l.startswith("[w0] step 1 "))
        got = float(first.rsplit(" ", 1)[1])
        self.assertLess(abs(got - want), 1e-6 * want, first)

    def test_the_job_without_a_file(self):
        # --steps and its flags: a job built from them, with no model (the
        # coordinator takes the first trainer's); the optimizer of
        # test_trainer's job, so the params of single-process AdamW.
        o = test_trainer.OPTIMIZER
        s = o["lr_schedule"]
        self.assertEqual(s["decay_steps"], test_trainer.STEPS)
        state = os.path.join(self.tmp, "steps-state")
        out = self.out_dir("steps")
        run = Run(["--nproc", "2", "--spares", "1", "--instances", "2",
                   "--steps", str(test_trainer.STEPS), "--global-batch",
                   str(test_trainer.GLOBAL_BATCH), "--lr", str(o["lr"]),
                   "--weight-decay", str(o["weight_decay"]),
                   "--clip-grad-norm", str(o["clip_grad_norm"]),
                   "--schedule", s["kind"], "--warmup-steps",
                   str(s["warmup_steps"]), "--min-lr", str(s["min_lr"]),
                   "--state-dir", state, self.script, out])
        self.assertEqual(run.wait(), 0, run.output())
        self.assertIn("[event] finished: every rank reached step 20",
                      run.output())
        with open(os.path.join(state, "job.json")) as f:
            job = json.load(f)
        self.assertNotIn("model", job)
        self.assertEqual(job["optimizer"], o)
        with open(os.path.join(state, "coordinator.log")) as f:
            self.assertRegex(f.read(), r"the job's model is worker w\d's "
                             r"trainer's")
        got = self.params(out)
        want, _ = test_trainer.reference()
        for name, value in want.items():
            diff = (got[name] - value).abs()
            self.assertLess(diff.median().item(), 5e-7, name)
            self.assertLess(diff.max().item(), 1e-4, name)
        # --job FILE without a model: the same job from a file.
        with open(self.job) as f:
            job = json.load(f)
        del job["model"]
        path = os.path.join(self.tmp, "no-model.json")
        with open(path, "w") as f:
            json.dump(job, f)
        out = self.out_dir("no-model")
        run = Run(["--nproc", "2", "--job", path, self.script, out])
        self.assertEqual(run.wait(), 0, run.output())
        got = self.params(out)
        for name, value in want.items():
            self.assertLess((got[name] - value).abs().max().item(), 1e-4,
                            name)

    def test_failures_end_in_one_line(self):
        bad = os.path.join(self.tmp, "bad.json")
        with open(bad, "w") as f:
            f.write("{not json")
        cases = [
            (["--nproc", "2", "--job", bad, self.script], 2,
             r"^zshard-run: cannot read the job .*bad\.json: "),
            (["--nproc", "0", "--job", self.job, self.script], 2,
             r"^zshard-run: --nproc must be at least 1, got 0$"),
            (["--nproc", "2", "--job", self.job, "--bin-dir", "/nonexistent",
              self.script], 2,
             r"^zshard-run: no zshard-coordinator in /nonexistent "),
            (["--nproc", "2", "--bogus", "--job", self.job, self.script], 2,
             r"^zshard-run: unrecognized arguments: --bogus$"),
        ]
        for args, code, line in cases:
            run = Run(args)
            self.assertEqual(run.wait(60), code, run.output())
            self.assertEqual(len(run.lines), 1, run.output())
            self.assertRegex(run.lines[0], line)
        # The coordinator refuses the job (a world of 3 cannot be 2
        # instances): its one line.
        run = Run(["--nproc", "3", "--job", self.job, self.script, "x"])
        self.assertEqual(run.wait(60), 2, run.output())
        self.assertEqual(len(run.lines), 1, run.output())
        self.assertRegex(run.lines[0], r"^zshard-run: the coordinator exited "
                         r"with status 2: .*world.instances \(2\) does not "
                         r"divide world.max \(3\)$")
        # A trainer that keeps failing: started again once, then the run
        # fails naming it and its last line.
        run = Run(["--nproc", "1", "--max-trainer-restarts", "1", "--job",
                   self.job, "--instances", "1", self.script, "x", "--fail"])
        self.assertEqual(run.wait(60), 1, run.output())
        self.assertIn("zshard-run: the trainer of w0 exited with status 1; "
                      "starting it again (1 of 1)", run.output())
        self.assertEqual(run.lines[-1], (
            "zshard-run: the trainer of w0 exited with status 1 2 time(s) "
            "(--max-trainer-restarts 1): train.py: failing on purpose"))

    def test_sigint_stops_everything(self):
        long_job = os.path.join(self.tmp, "long.json")
        with open(self.job) as f:
            job = json.load(f)
        job["workload"]["steps"] = 100000
        with open(long_job, "w") as f:
            json.dump(job, f)
        state = os.path.join(self.tmp, "sigint-state")
        sent = []

        def interrupt_at_step_3(run, line):
            m = re.match(r"\[w\d\] step (\d+) ", line)
            if m and int(m.group(1)) >= 3 and not sent:
                run.proc.send_signal(signal.SIGINT)
                sent.append(time.monotonic())

        run = Run(["--nproc", "2", "--spares", "1", "--job", long_job,
                   "--state-dir", state, self.script, self.out_dir("sigint"),
                   "--sleep", "0.02"], interrupt_at_step_3)
        self.assertEqual(run.wait(), 130, run.output())
        self.assertTrue(sent)
        self.assertLess(time.monotonic() - sent[0], 30)
        self.assertIn("zshard-run: interrupted; stopping everything",
                      run.output())
        pids = list(run.pids("worker").values()) + \
            list(run.pids("trainer").values())
        self.assertEqual(len(pids), 6, run.output())
        for pid in pids:
            with self.assertRaises(ProcessLookupError):
                os.kill(pid, 0)
        left = subprocess.run(["pgrep", "-f", self.tmp],
                              capture_output=True, text=True)
        self.assertEqual(left.stdout, "", "processes left behind")
        # --state-dir is kept, with every child's log, and processes.json
        # names every process and how the run ended.
        self.assertTrue(os.path.exists(os.path.join(state, "w0.worker.log")))
        with open(os.path.join(state, "processes.json")) as f:
            record = json.load(f)
        self.assertEqual((record["state"], record["exit_status"]),
                         ("ended", 130))
        self.assertEqual(
            {d["name"]: d["pid"] for d in record["daemons"]},
            run.pids("worker"))
        self.assertEqual(
            {"w%d" % d["index"]: d["trainer"]["pid"]
             for d in record["daemons"]}, run.pids("trainer"))
        self.assertTrue(record["coordinator"]["embedded"])
        with self.assertRaises(ProcessLookupError):
            os.kill(record["coordinator"]["pid"], 0)
        self.assertEqual(record["coordinator"]["address"], re.search(
            r"coordinator (\S+) \(pid", run.output()).group(1))
        with open(os.path.join(state, "events.jsonl")) as f:
            kinds = [json.loads(l)["kind"] for l in f]
        self.assertEqual(kinds[:2], ["waiting", "join"])


if __name__ == "__main__":
    unittest.main()
