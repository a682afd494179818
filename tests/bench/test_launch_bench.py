"""Smoke test of tools/bench/launch_bench.py: one launch of each side on a
tiny model (zshard-run with a real coordinator, daemons and trainers;
torchrun with DDP over Gloo); both reach step 1 on every rank and the JSON
line parses. Not a timed test: the target is not checked."""

import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "tools", "bench", "launch_bench.py")


class LaunchBenchTest(unittest.TestCase):

    def setUp(self):
        if not os.environ.get("ZSHARD_BIN_DIR"):
            self.skipTest("ZSHARD_BIN_DIR is not set (run through ctest)")

    def test_both_launchers_reach_step_1(self):
        out = subprocess.run(
            [sys.executable, BENCH, "--runs", "1", "--nproc", "2", "--width",
             "32", "--layers", "2", "--global-batch", "4", "--timeout",
             "240"], capture_output=True, text=True, timeout=600)
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.splitlines()
        self.assertIn("zshard-run / torchrun: ", out.stdout)
        r = json.loads(lines[-1])
        self.assertEqual((r["nproc"], r["runs"]), (2, 1))
        for side in ("zshard_run", "torchrun"):
            self.assertEqual(len(r[side + "_s"]), 1)
            self.assertGreater(r[side + "_s"][0], 0)
            # Step 1 comes before the launcher's exit.
            self.assertLess(r[side + "_s"][0], r[side + "_exit_s"][0])
        self.assertAlmostEqual(r["zshard_run_over_torchrun"],
                               r["zshard_run_median_s"] /
                               r["torchrun_median_s"])

    def test_a_missing_binary_is_an_error(self):
        out = subprocess.run([sys.executable, BENCH, "--bin-dir",
                              "/nonexistent"], capture_output=True,
                             text=True, timeout=60)
        self.assertEqual(out.returncode, 1)
        self.assertEqual(out.stderr.strip(), "launch_bench: no "
                         "zshard-coordinator in /nonexistent (build it, or "
                         "pass --bin-dir)")


if __name__ == "__main__":
    unittest.main()
