"""zshardctl checkpoint export / import --format torch against real torch:
a checkpoint of a real job leaves for plain PyTorch (AdamW takes the state
and steps on from it) and comes back bit for bit; a torch model with its
AdamW state goes through zshard and back unchanged; bf16 and fp16 params
(non-contiguous ones too) come out as exact fp32; bad input ends in one
line and exit 1 (bad usage: exit 2)."""

import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import unittest

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

from zshard.local import LocalProcesses  # noqa: E402
from zshard.spec import model_spec  # noqa: E402

BETAS = (0.9, 0.99)
EPS = 1e-7


def bin_path(name):
    return os.path.join(os.environ["ZSHARD_BIN_DIR"], name)


def ctl(*args):
    """zshardctl ARGS: (exit status, stdout, stderr)."""
    p = subprocess.run([bin_path("zshardctl"), *args], capture_output=True,
                       text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def small_model(seed=0):
    """Linear, LayerNorm, Linear: weights with decay, biases and norms
    without (zshard.spec's default marks)."""
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(16, 12),
                               torch.nn.LayerNorm(12), torch.nn.Linear(12, 10))


def job_spec(model, name, weight_decay, **extra):
    spec = {
        "name": name,
        "model": model_spec(model, name="small"),
        "optimizer": {"lr": 0.01, "beta1": BETAS[0], "beta2": BETAS[1],
                      "eps": EPS, "weight_decay": weight_decay},
        "world": {"instances": 1, "min": 1, "max": 1},
        "workload": {"kind": "idle"},
    }
    spec.update(extra)
    return spec


def read_checkpoint(directory):
    """A checkpoint directory's state by param index (master, exp_avg,
    exp_avg_sq as fp32 tensors, assembled from every rank file's ranges)
    and its Adam step, parsed here with the layout of
    common/checkpoint/rank_file_format.h."""
    with open(os.path.join(directory, "manifest.json")) as f:
        manifest = json.load(f)
    numels = [int(n) for n in manifest["param_numels"]]
    state = {i: [torch.full((n,), float("nan")) for _ in range(3)]
             for i, n in enumerate(numels)}
    adam_steps = set()
    for entry in manifest["files"]:
        with open(os.path.join(directory, entry["path"]), "rb") as f:
            data = f.read()
        magic, _, ranges, _, adam_step, _, _ = struct.unpack_from(
            "<8sIIqqiI", data, 0)
        assert magic == b"ZSHRDCKP"
        adam_steps.add(adam_step)
        for r in range(ranges):
            param, _, begin, end, offset = struct.unpack_from(
                "<iiqqq", data, 40 + 32 * r)
            n = end - begin
            arrays = torch.frombuffer(bytearray(data[offset:offset + 12 * n]),
                                      dtype=torch.float32).view(3, n)
            for a in range(3):
                state[param][a][begin:end] = arrays[a]
    assert len(adam_steps) == 1, adam_steps
    return state, adam_steps.pop()


class TorchFileTest(unittest.TestCase):
    """Offline: torch files through zshardctl import and export."""

    def setUp(self):
        if not os.environ.get("ZSHARD_BIN_DIR"):
            self.skipTest("ZSHARD_BIN_DIR is not set (run through ctest)")
        self.tmp = tempfile.mkdtemp(prefix="zshard-torch-ckpt-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def path(self, name):
        return os.path.join(self.tmp, name)

    def write_job(self, spec, name="job.json"):
        with open(self.path(name), "w") as f:
            json.dump(spec, f)
        return self.path(name)

    def import_export(self, saved, job, tag):
        """zshardctl import then export; returns torch.load of the result
        and the checkpoint directory."""
        ckpt = self.path("ckpt-" + tag)
        code, out, err = ctl("checkpoint", "import", saved, "--format",
                             "torch", "--job", job, ckpt)
        self.assertEqual(code, 0, err)
        self.assertIn("zshard-coordinator --restore " + ckpt, out)
        back = self.path("back-%s.pt" % tag)
        code, out, err = ctl("checkpoint", "export", ckpt, "--format",
                             "torch", back, "--job", job)
        self.assertEqual(code, 0, err)
        self.assertEqual(err, "")
        return torch.load(back), ckpt

    def test_torch_to_zshard_to_torch_is_bit_identical(self):
        model = small_model()
        decay = [p for p in model.parameters() if p.dim() > 1]
        no_decay = [p for p in model.parameters() if p.dim() <= 1]
        opt = torch.optim.AdamW(
            [{"params": decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=0.01, betas=BETAS, eps=EPS, weight_decay=0.1)
        for _ in range(3):
            opt.zero_grad()
            model(torch.randn(4, 16)).square().sum().backward()
            opt.step()
        want = {"model": model.state_dict(), "optimizer": opt.state_dict()}
        torch.save(want, self.path("in.pt"))
        job = self.write_job(job_spec(model, "roundtrip", 0.1))
        got, ckpt = self.import_export(self.path("in.pt"), job, "b")

        self.assertEqual(list(got["model"]), list(want["model"]))
        for name, value in want["model"].items():
            self.assertEqual(got["model"][name].dtype, torch.float32)
            self.assertTrue(torch.equal(got["model"][name], value), name)
        ws, gs = want["optimizer"], got["optimizer"]
        self.assertEqual(sorted(gs["state"]), sorted(ws["state"]))
        for i, s in ws["state"].items():
            for key in ("exp_avg", "exp_avg_sq"):
                self.assertTrue(torch.equal(gs["state"][i][key], s[key]),
                                (i, key))
            self.assertEqual(gs["state"][i]["step"].dtype, torch.float32)
            self.assertEqual(gs["state"][i]["step"].item(), 3.0)
        self.assertEqual(gs["param_groups"], ws["param_groups"])
        # The checkpoint holds the Adam step, and a fresh optimizer of the
        # same groups takes the state back.
        self.assertEqual(read_checkpoint(ckpt)[1], 3)
        fresh = small_model(1)
        fresh.load_state_dict(got["model"])
        again = torch.optim.AdamW(
            [{"params": [p for p in fresh.parameters() if p.dim() > 1]},
             {"params": [p for p in fresh.parameters() if p.dim() <= 1],
              "weight_decay": 0.0}], lr=0.5)
        again.load_state_dict(got["optimizer"])
        self.assertEqual(again.param_groups[0]["lr"], 0.01)

    def test_a_job_starts_from_a_torch_file(self):
        # zshard-coordinator --init-from: the file becomes a checkpoint in
        # the state dir, which the job restores from.
        model = small_model(2)
        opt = torch.optim.AdamW(model.parameters(), lr=0.01, betas=BETAS,
                                eps=EPS, weight_decay=0.0)
        for _ in range(2):
            opt.zero_grad()
            model(torch.randn(4, 16)).square().sum().backward()
            opt.step()
        saved = self.path("init.pt")
        torch.save({"model": model.state_dict(),
                    "optimizer": opt.state_dict()}, saved)
        spec = job_spec(model, "initfrom", 0.0)
        procs = LocalProcesses(os.environ["ZSHARD_BIN_DIR"],
                               prefix="zshard-init-from-")
        try:
            procs.start_coordinator(spec, timeout=30,
                                    extra=["--init-from", saved])
            code, out, err = ctl("--coordinator", procs.address, "events",
                                 "--output", "json")
            self.assertEqual(code, 0, err)
            self.assertIn("job starts from the checkpoint of step 2 in " +
                          os.path.join(procs.dir, "state", "init-from-torch"),
                          out)
            state, adam_step = read_checkpoint(
                os.path.join(procs.dir, "state", "init-from-torch"))
            self.assertEqual(adam_step, 2)
            for i, (name, value) in enumerate(model.state_dict().items()):
                self.assertTrue(torch.equal(state[i][0],
                                            value.reshape(-1)), name)
        finally:
            procs.stop()
        # A file that is not the job's model: one line, exit status 2.
        other = torch.nn.Linear(3, 3)
        torch.save(other.state_dict(), self.path("other.pt"))
        job = self.write_job(spec)
        p = subprocess.run(
            [bin_path("zshard-coordinator"), "--job", job, "--listen",
             "127.0.0.1:0", "--state-dir", self.path("bad-state"),
             "--init-from", self.path("other.pt")],
            capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertRegex(p.stderr, r"^zshard-coordinator: flag --init-from: "
                         r"[^\n]+\n$")

    def test_a_plain_state_dict_starts_with_zero_moments(self):
        model = small_model()
        torch.save(model.state_dict(), self.path("plain.pt"))
        job = self.write_job(job_spec(model, "plain", 0.0))
        got, ckpt = self.import_export(self.path("plain.pt"), job, "plain")
        state, adam_step = read_checkpoint(ckpt)
        self.assertEqual(adam_step, 0)
        for master, m, v in state.values():
            self.assertTrue(torch.equal(m, torch.zeros_like(master)))
            self.assertTrue(torch.equal(v, torch.zeros_like(master)))
        for name, value in model.state_dict().items():
            self.assertTrue(torch.equal(got["model"][name], value), name)
        # weight_decay 0: one group, as AdamW(model.parameters()) has.
        self.assertEqual(len(got["optimizer"]["param_groups"]), 1)
        torch.optim.AdamW(model.parameters()).load_state_dict(
            got["optimizer"])

    def test_half_precision_params_come_out_as_exact_fp32(self):
        for dtype in (torch.bfloat16, torch.float16):
            model = small_model().to(dtype)
            # Non-contiguous views as torch saves them: transposed storage.
            saved = {k: (v.t().contiguous().t() if v.dim() == 2 else v)
                     for k, v in model.state_dict().items()}
            self.assertFalse(saved["0.weight"].is_contiguous())
            tag = str(dtype).split(".")[1]
            torch.save({"model": saved}, self.path(tag + ".pt"))
            spec = job_spec(model, tag, 0.0)
            self.assertEqual(spec["model"]["params"][0]["dtype"],
                             {"bfloat16": "bf16", "float16": "fp16"}[tag])
            job = self.write_job(spec, tag + ".json")
            got, _ = self.import_export(self.path(tag + ".pt"), job, tag)
            for name, value in model.state_dict().items():
                self.assertEqual(got["model"][name].dtype, torch.float32)
                self.assertTrue(torch.equal(got["model"][name],
                                            value.float()), (tag, name))

    def test_bad_input_ends_in_one_line(self):
        model = small_model()
        job = self.write_job(job_spec(model, "bad", 0.0))
        state = model.state_dict()
        state["2.wieght"] = state.pop("2.weight")
        torch.save(state, self.path("renamed.pt"))
        torch.save(model.state_dict(), self.path("whole.pt"))
        with open(self.path("whole.pt"), "rb") as f:
            data = f.read()
        with open(self.path("truncated.pt"), "wb") as f:
            f.write(data[:len(data) // 2])
        cases = [
            ("renamed.pt", "param '2.weight' of the job's model is not in "
                           "the torch file"),
            ("truncated.pt", "is not a whole zip archive: no end of central "
                             "directory (truncated?)"),
            ("missing.pt", "missing.pt"),
        ]
        for name, message in cases:
            out_dir = self.path("out-" + name)
            code, out, err = ctl("checkpoint", "import", self.path(name),
                                 "--format", "torch", "--job", job, out_dir)
            self.assertEqual(code, 1, err)
            self.assertEqual(out, "")
            self.assertEqual(len(err.splitlines()), 1, err)
            self.assertTrue(err.startswith("zshardctl checkpoint import: "),
                            err)
            self.assertIn(message, err)
            self.assertFalse(os.path.exists(out_dir), name)
        # An export of what is not a checkpoint: exit 1 too.
        code, _, err = ctl("checkpoint", "export", self.tmp, "--format",
                           "torch", self.path("x.pt"), "--job", job)
        self.assertEqual((code, len(err.splitlines())), (1, 1), err)
        self.assertIn("manifest.json", err)
        # Bad usage: exit 2, one line.
        for args, message in [
                (["export", self.tmp, "--format", "torch", "x.pt"],
                 "--job JOB.json is required: the checkpoint's manifest "
                 "records each param's element count but not its shape"),
                (["import", "a.pt", "--format", "onnx", "--job", job, "d"],
                 "--format must be torch (got 'onnx')"),
                (["import", "a.pt", "--job", job], "needs IN.pt and OUT_DIR")]:
            code, out, err = ctl("checkpoint", *args)
            self.assertEqual((code, out), (2, ""), err)
            self.assertEqual(len(err.splitlines()), 1, err)
            self.assertIn(message, err)


class JobCheckpointTest(unittest.TestCase):
    """A real job's checkpoint (two ranks, params split between their
    files) out to plain PyTorch and back."""

    def setUp(self):
        if not os.environ.get("ZSHARD_BIN_DIR"):
            self.skipTest("ZSHARD_BIN_DIR is not set (run through ctest)")
        self.procs = LocalProcesses(os.environ["ZSHARD_BIN_DIR"],
                                    prefix="zshard-torch-job-")
        self.addCleanup(self.stop)

    def stop(self):
        self.procs.stop(os.environ.get("ZSHARD_KEEP_TEST_DIRS") == "1")

    def path(self, name):
        return os.path.join(self.procs.dir, name)

    def wait_for(self, predicate, what, timeout=90):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.1)
        self.fail("timed out waiting for %s; logs in %s" %
                  (what, self.procs.dir))

    def run_job(self, model, job_file):
        """Coordinator and two workers until the step-6 checkpoint."""
        ckpt_root = self.path("ckpt")
        spec = job_spec(
            model, "torchjob", 0.0,
            layout={"bucket_size": 16},
            world={"instances": 1, "min": 2, "max": 2},
            lease_timeout_ms=3000, heartbeat_interval_ms=300,
            workload={"kind": "synthetic", "steps": 6, "global_batch": 8,
                      "step_delay_ms": 10},
            checkpoint={"dir": ckpt_root, "every_steps": 3})
        with open(job_file, "w") as f:
            json.dump(spec, f)
        self.procs.start_coordinator(spec, timeout=30)
        for name in ("w0", "w1"):
            self.procs.spawn(name, [
                self.procs.binary("zshard-worker"), "--coordinator",
                self.procs.address, "--name", name])
        last = os.path.join(ckpt_root, "step-00000006")
        self.wait_for(
            lambda: os.path.exists(os.path.join(last, "manifest.json")),
            "the checkpoint of step 6")
        return last

    def test_zshard_to_torch_to_zshard(self):
        model = small_model()
        job = self.path("job.json")
        ckpt = self.run_job(model, job)
        with open(os.path.join(ckpt, "manifest.json")) as f:
            manifest = json.load(f)
        self.assertEqual(len(manifest["files"]), 2)
        # Some param is spread over both ranks' files.
        held = [{r.get("param_index", 0) for r in f["ranges"]}
                for f in manifest["files"]]
        self.assertTrue(held[0] & held[1], manifest["files"])
        want, adam_step = read_checkpoint(ckpt)
        self.assertGreater(adam_step, 0)

        out = self.path("export.pt")
        code, stdout, err = ctl("checkpoint", "export", ckpt, "--format",
                                "torch", out, "--job", job)
        self.assertEqual(code, 0, err)
        self.assertIn("Adam step %d" % adam_step, stdout)
        saved = torch.load(out)
        names = [n for n, _ in model.named_parameters()]
        self.assertEqual(list(saved["model"]), names)
        model.load_state_dict(saved["model"])
        for i, name in enumerate(names):
            self.assertTrue(torch.equal(saved["model"][name].flatten(),
                                        want[i][0]), name)
        # Plain torch AdamW takes the state and steps on from it.
        opt = torch.optim.AdamW(model.parameters(), lr=0.01, betas=BETAS,
                                eps=EPS, weight_decay=0.0)
        opt.load_state_dict(saved["optimizer"])
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        grads = {n: torch.randn_like(p) for n, p in model.named_parameters()}
        for n, p in model.named_parameters():
            p.grad = grads[n].clone()
        opt.step()
        t = adam_step + 1
        for i, (n, p) in enumerate(model.named_parameters()):
            self.assertEqual(opt.state[p]["step"].item(), t)
            m = BETAS[0] * want[i][1] + (1 - BETAS[0]) * grads[n].flatten()
            v = BETAS[1] * want[i][2] + (1 - BETAS[1]) * \
                grads[n].flatten().square()
            step = 0.01 / (1 - BETAS[0] ** t) * m / (
                (v / (1 - BETAS[1] ** t)).sqrt() + EPS)
            expect = before[n].flatten() - step
            self.assertTrue(torch.allclose(p.detach().flatten(), expect,
                                           rtol=1e-5, atol=1e-6), n)
            self.assertTrue(torch.allclose(opt.state[p]["exp_avg"].flatten(),
                                           m, rtol=1e-6, atol=1e-9), n)

        # Back in: the rank data are the job's, bit for bit.
        again = self.path("again")
        code, _, err = ctl("checkpoint", "import", out, "--format", "torch",
                           "--job", job, again)
        self.assertEqual(code, 0, err)
        got, got_step = read_checkpoint(again)
        self.assertEqual(got_step, adam_step)
        for i in want:
            for a, what in enumerate(("master", "exp_avg", "exp_avg_sq")):
                self.assertEqual(want[i][a].numpy().tobytes(),
                                 got[i][a].numpy().tobytes(), (i, what))

        # And a job restores from it: the coordinator takes the directory,
        # a worker reads the rank file and trains on.
        restored = LocalProcesses(os.environ["ZSHARD_BIN_DIR"],
                                  prefix="zshard-torch-restore-")
        try:
            with open(job) as f:
                spec = json.load(f)
            spec["checkpoint"] = {"dir": "", "every_steps": 0}
            spec["world"] = {"instances": 1, "min": 1, "max": 1}
            spec["workload"]["steps"] = adam_step + 2
            restored.start_coordinator(spec, timeout=30,
                                       extra=["--restore", again])
            restored.spawn("w0", [restored.binary("zshard-worker"),
                                  "--coordinator", restored.address,
                                  "--name", "w0"])

            def events():
                code, stdout, err = ctl("--coordinator", restored.address,
                                        "events", "--output", "json")
                self.assertEqual(code, 0, err)
                return stdout

            self.wait_for(lambda: "every rank reached step %d" %
                          (adam_step + 2) in events(), "the restored job")
            log = events()
            self.assertIn("job starts from the checkpoint of step %d" %
                          adam_step, log)
            self.assertIn("resume step %d from the checkpoint of step %d" %
                          (adam_step, adam_step), log)
            self.assertNotIn('"kind":"prepare_failed"', log)
        finally:
            restored.stop(os.environ.get("ZSHARD_KEEP_TEST_DIRS") == "1")


if __name__ == "__main__":
    unittest.main()
