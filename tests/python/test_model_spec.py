"""zshard.torch.model_spec and `python -m zshard.spec`: the job spec's model
object from a PyTorch module, accepted by the planner (zshardctl plan)."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import torch

import models
from zshard.torch import model_spec

HERE = os.path.dirname(os.path.abspath(__file__))
DEMO = os.path.join(HERE, "..", "..", "deploy", "demo")
PYTHONPATH = os.pathsep.join([os.path.join(HERE, "..", "..", "python"), HERE,
                              DEMO])


def run_spec(*args):
    env = dict(os.environ, PYTHONPATH=PYTHONPATH)
    return subprocess.run([sys.executable, "-m", "zshard.spec", *args],
                          env=env, capture_output=True, text=True,
                          timeout=120)


class ModelSpecTest(unittest.TestCase):

    def test_registration_order_tied_once_and_no_decay_for_1d(self):
        spec = model_spec(models.tied_lm(), name="lm")
        self.assertEqual(spec["name"], "lm")
        self.assertEqual(spec["params"], [
            {"name": "embed.weight", "shape": [50, 16], "dtype": "fp32",
             "shared_embedding": True},
            {"name": "hidden.weight", "shape": [16, 16], "dtype": "fp32"},
            {"name": "hidden.bias", "shape": [16], "dtype": "fp32",
             "no_weight_decay": True},
            {"name": "norm.weight", "shape": [16], "dtype": "fp32",
             "no_weight_decay": True},
            {"name": "norm.bias", "shape": [16], "dtype": "fp32",
             "no_weight_decay": True},
        ])

    def test_choices_dtypes_frozen_and_expert_marks(self):
        model = models.tied_lm().to(torch.bfloat16)
        model.norm.bias.requires_grad_(False)
        model.hidden.weight.allreduce = False  # Megatron's expert mark
        spec = model_spec(model, no_weight_decay={"embed.weight"})
        params = {p["name"]: p for p in spec["params"]}
        self.assertNotIn("norm.bias", params)
        self.assertEqual(params["hidden.weight"]["dtype"], "bf16")
        self.assertTrue(params["hidden.weight"]["expert"])
        self.assertTrue(params["embed.weight"]["no_weight_decay"])
        self.assertNotIn("no_weight_decay", params["hidden.bias"])
        self.assertEqual(spec["name"], "tiedlm")

    def test_bad_models_name_the_problem(self):
        with self.assertRaisesRegex(ValueError, "param 'hidden.weight' has "
                                    "dtype torch.float64"):
            model = models.tied_lm()
            model.hidden.double()
            model_spec(model)
        with self.assertRaisesRegex(TypeError, "torch.nn.Module"):
            model_spec(3)
        frozen = torch.nn.Linear(2, 2).requires_grad_(False)
        with self.assertRaisesRegex(ValueError, "no trainable parameters"):
            model_spec(frozen)

    def test_command_prints_a_spec_the_planner_takes(self):
        result = run_spec("models:tied_lm", "--name", "lm")
        self.assertEqual(result.returncode, 0, result.stderr)
        spec = json.loads(result.stdout)
        self.assertEqual(spec, model_spec(models.tied_lm(), name="lm"))
        bin_dir = os.environ.get("ZSHARD_BIN_DIR")
        if not bin_dir:
            self.skipTest("ZSHARD_BIN_DIR is not set (run through ctest)")
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            f.write(result.stdout)
            f.flush()
            plan = subprocess.run(
                [os.path.join(bin_dir, "zshardctl"), "plan", "--model", f.name,
                 "--world", "4", "--output", "json"],
                capture_output=True, text=True, timeout=60)
        self.assertEqual(plan.returncode, 0, plan.stderr)
        self.assertIn("embed.weight", plan.stdout)

    def test_tp_replicated_from_megatrons_mark_or_a_choice(self):
        sys.path.insert(0, DEMO)
        import mp_toy
        spec = model_spec(mp_toy.slot(1, 1))
        marked = [p["name"] for p in spec["params"] if p.get("tp_replicated")]
        # The LayerNorm and the row-parallel layer's bias carry
        # tensor_model_parallel = False.
        self.assertEqual(marked, ["norm.weight", "norm.bias", "d.bias"])
        spec = model_spec(models.tied_lm(), tp_replicated={"hidden.bias"})
        self.assertEqual([p["name"] for p in spec["params"]
                          if p.get("tp_replicated")], ["hidden.bias"])

    def test_command_prints_one_slot_with_the_slot_arguments(self):
        done = run_spec("mp_toy:slot", "--tp-rank", "1", "--pp-rank", "0")
        self.assertEqual(done.returncode, 0, done.stderr)
        slot = json.loads(done.stdout)
        self.assertEqual((slot["tp"], slot["pp"]), (1, 0))
        self.assertEqual([p["name"] for p in slot["params"]],
                         ["a.weight", "a.bias", "b.weight", "b.bias"])
        self.assertEqual(slot["params"][0]["shape"], [4, 4])  # half of 8
        self.assertTrue(slot["params"][3].get("tp_replicated"))

    def test_command_errors_are_one_line_exit_2(self):
        for target, message in [
                ("models", "target must be MODULE:FUNCTION"),
                ("no_such_module:f", "cannot import 'no_such_module'"),
                ("models:missing", "'models' has no function 'missing'"),
                ("models:not_a_model", "needs a torch.nn.Module")]:
            result = run_spec(target)
            self.assertEqual(result.returncode, 2, target)
            self.assertEqual(result.stdout, "")
            self.assertIn(message, result.stderr)
            self.assertEqual(result.stderr.count("\n"), 1, result.stderr)


if __name__ == "__main__":
    unittest.main()
