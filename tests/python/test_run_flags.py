"""zshard-run's flags and the job it builds, without a cluster: the three
forms (--job FILE, --steps T ..., --coordinator HOST:PORT), the job JSON
of the form without a file (no model: the coordinator takes the first
trainer's), and the one-line refusals of bad combinations (exit status 2,
checked on the real command for a few)."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, PYTHON_DIR)

from zshard._run_flags import Usage, parse_args  # noqa: E402
from zshard._run_job import build_job, make_job  # noqa: E402


class FlagsTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="zshard-run-flags-")
        cls.script = os.path.join(cls.tmp.name, "my train.py")
        with open(cls.script, "w") as f:
            f.write("pass\n")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def parse(self, *flags):
        return parse_args([*flags, self.script, "--lr", "not ours"])

    def refused(self, *flags):
        with self.assertRaises(Usage) as e:
            self.parse(*flags)
        return str(e.exception)

    def test_the_job_without_a_file(self):
        args = self.parse("--nproc", "4", "--steps", "300", "--global-batch",
                          "32", "--lr", "0.01", "--schedule", "cosine",
                          "--warmup-steps", "10", "--min-lr", "0.001",
                          "--weight-decay", "0.01", "--clip-grad-norm", "1")
        # The script's own flags stay the script's.
        self.assertEqual(args.script_args, ["--lr", "not ours"])
        self.assertEqual(build_job(args), {
            "name": "mytrain",
            "optimizer": {"lr": 0.01, "weight_decay": 0.01,
                          "clip_grad_norm": 1.0,
                          "lr_schedule": {"kind": "cosine",
                                          "warmup_steps": 10,
                                          "decay_steps": 300,
                                          "min_lr": 0.001}},
            "world": {"instances": 1, "min": 4, "max": 4},
            "transition_timeout_ms": 60000,
            "workload": {"kind": "trainer", "steps": 300,
                         "global_batch": 32}})

    def test_defaults_of_the_job_without_a_file(self):
        job = build_job(self.parse("--nproc", "2", "--steps", "5",
                                   "--global-batch", "8", "--lr", "1e-3"))
        self.assertNotIn("model", job)
        self.assertEqual(job["optimizer"], {"lr": 1e-3, "weight_decay": 0.0,
                                            "clip_grad_norm": 0.0})
        self.assertEqual(job["world"], {"instances": 1, "min": 2, "max": 2})
        # A constant rate with a warmup; --world and --instances.
        job = build_job(self.parse(
            "--nproc", "2", "--world", "4", "--instances", "2", "--steps",
            "5", "--global-batch", "8", "--lr", "1e-3", "--warmup-steps",
            "2"))
        self.assertEqual(job["optimizer"]["lr_schedule"],
                         {"kind": "constant", "warmup_steps": 2})
        self.assertEqual(job["world"], {"instances": 2, "min": 4, "max": 4})

    def test_a_job_file_with_or_without_a_model(self):
        path = os.path.join(self.tmp.name, "job.json")
        job = {"name": "j", "world": {"instances": 2, "min": 1, "max": 8},
               "workload": {"kind": "trainer", "steps": 3}}
        with open(path, "w") as f:
            json.dump(job, f)
        self.assertEqual(make_job(path, 4, None)["world"],
                         {"instances": 2, "min": 4, "max": 4})
        self.assertEqual(make_job(path, 4, 1)["world"],
                         {"instances": 1, "min": 4, "max": 4})
        job["model"] = {"preset": "gpt2-small"}
        with open(path, "w") as f:
            json.dump(job, f)
        self.assertEqual(make_job(path, 4, None)["model"],
                         {"preset": "gpt2-small"})
        job["workload"]["kind"] = "synthetic"
        with open(path, "w") as f:
            json.dump(job, f)
        with self.assertRaisesRegex(Usage, "workload is of kind 'synthetic'"):
            make_job(path, 4, None)

    def test_joining_a_running_job(self):
        args = self.parse("--coordinator", "10.0.0.1:7070,[::1]:7071",
                          "--nproc", "8", "--spares", "1")
        self.assertEqual(args.coordinator, "10.0.0.1:7070,[::1]:7071")
        self.assertIsNone(args.job)

    def test_bad_combinations_in_one_line(self):
        steps = ["--steps", "5", "--global-batch", "8", "--lr", "0.1"]
        cases = [
            ([], "give --job FILE, or --steps T --global-batch B --lr LR "
             "(the job without a file), or --coordinator HOST:PORT (join a "
             "running job)"),
            (["--job", "j.json"] + steps,
             "give --job FILE or --steps T (the job without a file), not "
             "both"),
            (["--steps", "5", "--lr", "0.1"], "--steps needs --global-batch"),
            (["--steps", "5", "--global-batch", "8"], "--steps needs --lr"),
            (["--steps", "0", "--global-batch", "8", "--lr", "0.1"],
             "--steps must be at least 1, got 0"),
            (steps[:4] + ["--lr", "0"], "--lr must be above 0, got 0"),
            (steps + ["--min-lr", "0.01"],
             "--min-lr is for the cosine and linear schedules"),
            (steps + ["--schedule", "cosine", "--warmup-steps", "5"],
             "--warmup-steps (5) must be below --steps (5) with the cosine "
             "schedule"),
            (steps + ["--schedule", "linear", "--min-lr", "0.2"],
             "--min-lr (0.2) must be at most --lr (0.1)"),
            (steps + ["--weight-decay", "-1"],
             "--weight-decay must be at least 0, got -1.0"),
            (["--job", "j.json", "--lr", "0.1"],
             "--lr is for the job without a file (--steps); with --job it "
             "is the file's"),
            (["--coordinator", "h:1", "--job", "j.json"],
             "--job cannot be given with --coordinator: the job is the "
             "running coordinator's"),
            (["--coordinator", "h:1"] + steps,
             "--steps cannot be given with --coordinator: the job is the "
             "running coordinator's"),
            (["--coordinator", "h:1", "--world", "8"],
             "--world cannot be given with --coordinator: the job is the "
             "running coordinator's"),
            (["--coordinator", "h:1,h"], "--coordinator: 'h' is not "
             "HOST:PORT"),
            (["--coordinator", "h:0"], "--coordinator: 'h:0' is not "
             "HOST:PORT"),
            (["--job", "j.json", "--listen", "x"],
             "--listen: 'x' is not HOST:PORT"),
            (["--job", "j.json", "--world", "0"],
             "--world must be at least 1, got 0"),
            (["--job", "j.json", "--node-name", "a b"],
             "--node-name must be letters, digits, '.', '_' and '-', got "
             "'a b'"),
            (steps + ["--schedule", "step"], "argument --schedule: invalid "
             "choice: 'step' (choose from 'constant', 'cosine', 'linear')"),
        ]
        for flags, want in cases:
            with self.subTest(flags=flags):
                self.assertEqual(self.refused("--nproc", "2", *flags), want)

    def test_the_command_refuses_in_one_line(self):
        env = dict(os.environ, PYTHONPATH=PYTHON_DIR,
                   PYTHONDONTWRITEBYTECODE="1")
        for flags, want in [
                (["--coordinator", "127.0.0.1:1", "--steps", "3"],
                 "zshard-run: --steps cannot be given with --coordinator: "
                 "the job is the running coordinator's"),
                (["--steps", "3", "--lr", "0.1"],
                 "zshard-run: --steps needs --global-batch"),
                (["--job", "j.json", "--steps", "3"],
                 "zshard-run: give --job FILE or --steps T (the job without "
                 "a file), not both")]:
            out = subprocess.run(
                [sys.executable, "-m", "zshard.run", "--nproc", "2", *flags,
                 self.script], env=env, capture_output=True, text=True,
                timeout=60)
            self.assertEqual(out.returncode, 2, out.stderr)
            self.assertEqual(out.stdout, "")
            self.assertEqual(out.stderr.splitlines(), [want])


if __name__ == "__main__":
    unittest.main()
