"""Smoke test of tools/bench/trainer_bench.py: a tiny model through the
whole benchmark (zshard with real coordinator, worker and trainer
processes, the DDP baseline, the bound, the hand-off runs), and its
--overlap-param-gather mode; its JSON parses and every figure is there and
consistent. Not a timed test."""

import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "tools", "bench", "trainer_bench.py")
# The baselines live beside the repository (../shared/baselines), not in
# it: a clone elsewhere runs everything but the DDP baseline.
BASELINE = os.path.join(HERE, "..", "..", "..", "shared", "baselines",
                        "torch_ddp_train.py")
HAVE_DDP = os.path.exists(BASELINE)


class TrainerBenchTest(unittest.TestCase):

    def setUp(self):
        if not os.environ.get("ZSHARD_BIN_DIR"):
            self.skipTest("ZSHARD_BIN_DIR is not set (run through ctest)")

    def run_bench(self, *flags):
        return subprocess.run(
            [sys.executable, BENCH, "--ranks", "2", "--width", "32",
             "--layers", "2", "--global-batch", "4", "--steps", "2",
             "--handoff-steps", "3", "--timeout", "240",
             *([] if HAVE_DDP else ["--no-ddp"]), *flags],
            capture_output=True, text=True, timeout=600)

    def test_tiny_model_json(self):
        out = self.run_bench()
        self.assertEqual(out.returncode, 0, out.stderr)
        r = json.loads(out.stdout)
        # 2 layers of 32x32 weights and 32 biases.
        self.assertEqual(r["params"], 2 * (32 * 32 + 32))
        if HAVE_DDP:
            self.assertEqual(r["ddp"]["params"], r["params"])
            self.assertGreater(r["ddp"]["step_s"], 0)
            self.assertAlmostEqual(r["zshard_over_ddp"],
                                   r["zshard"]["step_s"] / r["ddp"]["step_s"])
        else:
            self.assertIsNone(r["ddp"])
            self.assertIsNone(r["zshard_over_ddp"])
        self.assertEqual((r["ranks"], r["global_batch"]), (2, 4))
        z, b, h = r["zshard"], r["bound"], r["handoff"]
        for v in (z["step_s"], z["fwd_bwd_s"], z["exchange_s"],
                  b["fwd_bwd_s"],
                  h["one_daemon_cycle_s"], h["world_cycle_s"]):
            self.assertGreater(v, 0)
        self.assertEqual(len(z["step_s_per_rank"]), 2)
        self.assertEqual(len(b["fwd_bwd_s_per_rank"]), 2)
        # A step contains its forward, backward and exchange (each one; the
        # medians of the two need not compare so on a loaded machine).
        self.assertTrue(z["exchange_within_cycle"])
        self.assertAlmostEqual(r["zshard_over_bound"],
                               z["step_s"] / b["fwd_bwd_s"])
        self.assertEqual(len(r["load_avg_before"]), 3)

    def test_table_and_a_missing_baseline(self):
        out = self.run_bench("--output", "table")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("zshard / DDP", out.stdout)
        self.assertIn("bound: forward + backward only", out.stdout)
        out = subprocess.run(
            [sys.executable, BENCH, "--baselines-dir", "/nonexistent"],
            capture_output=True, text=True, timeout=600)
        self.assertEqual(out.returncode, 1)
        self.assertEqual(out.stderr.strip(), "trainer_bench: no baseline at "
                         "/nonexistent/torch_ddp_train.py (pass "
                         "--baselines-dir)")

    def test_overlap_param_gather_mode(self):
        out = self.run_bench("--overlap-param-gather", "--pairs", "1")
        self.assertEqual(out.returncode, 0, out.stderr)
        r = json.loads(out.stdout)
        modes = r["overlap_param_gather"]
        for mode in ("off", "on"):
            self.assertGreater(modes[mode]["step_s"], 0)
            self.assertEqual(len(modes[mode]["step_s_per_run"]), 1)
        self.assertAlmostEqual(r["on_over_off"],
                               modes["on"]["step_s"] / modes["off"]["step_s"])
        self.assertEqual(r["on_over_off_per_pair"], [r["on_over_off"]])
        self.assertNotIn("ddp", r)
        out = self.run_bench("--overlap-param-gather", "--pairs", "1",
                             "--output", "table")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("step on / off", out.stdout)


if __name__ == "__main__":
    unittest.main()
