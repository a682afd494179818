"""A PyTorch model trained through zshard (trainer daemons on real worker
processes, W = 4, I = 2) ends with the parameters of a single-process
torch.optim.AdamW run on the whole global batch."""

import math
import os
import signal
import subprocess
import time
import unittest

import torch

import cluster
import models
import zshard
from zshard.torch import DistributedOptimizer, model_spec

STEPS = 20
GLOBAL_BATCH = 16
OPTIMIZER = {"lr": 0.01, "weight_decay": 0.1, "clip_grad_norm": 1.0,
             "lr_schedule": {"kind": "cosine", "warmup_steps": 3,
                             "decay_steps": STEPS, "min_lr": 0.001}}


def job(steps=STEPS, trainer_timeout_ms=20000, bf16=False, min_world=4):
    model = models.tied_lm()
    layout = {"bucket_size": 512}  # small buckets: the model spans several
    if bf16:
        model = model.to(torch.bfloat16)
        layout["grad_reduce_in_fp32"] = True
    return {
        "name": "pytrain",
        "model": model_spec(model, name="tiedlm"),
        "layout": layout,
        "optimizer": OPTIMIZER,
        "world": {"instances": 2, "min": min_world, "max": 4},
        "lease_timeout_ms": 3000,
        "heartbeat_interval_ms": 300,
        "workload": {"kind": "trainer", "steps": steps,
                     "global_batch": GLOBAL_BATCH,
                     "trainer_timeout_ms": trainer_timeout_ms},
    }


def one_rank_job():
    """The job on a world of one daemon (I = 1)."""
    j = job()
    j["world"] = {"instances": 1, "min": 1, "max": 1}
    return j


def lr_at(step):
    """The job's schedule (the formula of docs/reference/job-spec.md)."""
    s = OPTIMIZER["lr_schedule"]
    lr, wu, dd, m = OPTIMIZER["lr"], s["warmup_steps"], s["decay_steps"], \
        s["min_lr"]
    if step <= wu:
        return lr * step / wu
    if step > dd:
        return m
    r = (step - wu) / (dd - wu)
    return m + (lr - m) * 0.5 * (1 + math.cos(math.pi * r))


def reference(steps=STEPS, skip=(), model=None, loss_of=None,
              global_batch=GLOBAL_BATCH):
    """Single process, whole global batch, torch.optim.AdamW: the final
    state dict and each step's gradient norm before clipping. Steps in
    `skip` are skipped (no update; AdamW's own step count stays, as
    zshard's Adam step does). `model` (default models.tied_lm()) and
    `loss_of(model)` (default its summed loss over the global batch) are
    another model's, summed over `global_batch` samples."""
    if model is None:
        model = models.tied_lm()
        x, y = models.token_batch(GLOBAL_BATCH)

        def loss_of(m):
            return models.summed_loss(m, x, y, range(GLOBAL_BATCH))
    spec = {p["name"]: p for p in model_spec(model)["params"]}
    decay = [p for n, p in model.named_parameters()
             if not spec[n].get("no_weight_decay")]
    no_decay = [p for n, p in model.named_parameters()
                if spec[n].get("no_weight_decay")]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": OPTIMIZER["weight_decay"]},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=OPTIMIZER["lr"], betas=(0.9, 0.999), eps=1e-8)
    norms = []
    for step in range(1, steps + 1):
        for group in opt.param_groups:
            group["lr"] = lr_at(step)
        opt.zero_grad()
        (loss_of(model) / global_batch).backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(
            model.parameters(), OPTIMIZER["clip_grad_norm"])))
        if step not in skip:
            opt.step()
    return model.state_dict(), norms


def finish(test, c, trainers, workers):
    """Asserts in `test` that `trainers` and then `workers` of cluster `c`
    exit 0 (each failure shows the process's log)."""
    for t in trainers:
        test.assertEqual(c.wait(t, 300), 0, c.read_log(t))
    for w in workers:
        test.assertEqual(c.wait(w, 60), 0, c.read_log(w))


class TrainerTest(unittest.TestCase):

    def setUp(self):
        if not os.environ.get("ZSHARD_BIN_DIR"):
            self.skipTest("ZSHARD_BIN_DIR is not set (run through ctest)")
        # A trainer gone for good is given up after 3 s in its own test.
        timeout = 3000 if "gone_for_good" in self._testMethodName else 20000
        bf16 = "bf16" in self._testMethodName
        # A world of 2 may form in the failed-job test: it needs a lost
        # range, not a world too small to form.
        min_world = 2 if "failed_job" in self._testMethodName else 4
        self.cluster = cluster.Cluster(job(trainer_timeout_ms=timeout,
                                           bf16=bf16, min_world=min_world))
        self.addCleanup(self.cluster.stop)

    def assert_matches_reference(self, outs, steps_log, skip=()):
        got = [torch.load(o) for o in outs]
        # Every rank ends with the same all-gathered params, bit for bit.
        for other in got[1:]:
            for name, value in got[0].items():
                self.assertTrue(torch.equal(value, other[name]), name)
        want, norms = reference(skip=skip)
        # The gradient itself: each step's global norm (the world's summed
        # gradient / B, before clipping) equals the single-process one to
        # fp32 rounding of sums of 16 samples (relative 1e-5); clipping ran
        # (norm > 1).
        for s in steps_log:
            if s["step"] in skip:
                continue
            want_norm = norms[s["step"] - 1]
            self.assertLess(abs(s["grad_norm"] - want_norm), 1e-5 * want_norm,
                            s)
        self.assertGreater(max(norms), OPTIMIZER["clip_grad_norm"])
        initial = models.tied_lm().state_dict()
        # Tolerance. Both runs are the same AdamW in fp32; they differ in
        # the order of the gradient sums (per rank, then across ranks, vs
        # one batch through autograd) and of Adam's operations: a few ulps
        # of each gradient element per step. Adam divides by sqrt(v), so an
        # element whose gradient is small next to its own rounding noise
        # moves by up to a fraction of a step (lr <= 0.01) in either run:
        # a handful of elements differ by up to ~3e-5 (measured). Hence two
        # bounds: the median difference within a few ulps of the params
        # (5e-7), the largest within 1e-4. A wrong rate, schedule, weight
        # decay or step count moves the median by >= 7e-4 and the largest
        # by >= 1e-3 (measured with each perturbed by 1-10%), so both
        # bounds catch them; clipping barely changes Adam's result (it is
        # invariant to the gradient's scale), hence the norm check above.
        for name, value in want.items():
            moved = (value - initial[name]).abs().max().item()
            diff = (got[0][name] - value).abs()
            self.assertGreater(moved, 1e-2, name)
            self.assertLess(diff.median().item(), 5e-7, name)
            self.assertLess(diff.max().item(), 1e-4, "%s moved %g, differs "
                            "by %g" % (name, moved, diff.max().item()))

    def start(self, workers, extra=()):
        """Daemons w0..w{n-1}, each with a trainer (given `extra`);
        returns the trainers' names and output files."""
        c = self.cluster
        trainers, outs = [], []
        for i in range(workers):
            c.start_worker("w%d" % i)
            outs.append(os.path.join(c.dir, "w%d.pt" % i))
            trainers.append(c.start_trainer("w%d" % i, outs[-1], extra=extra))
        return trainers, outs

    def pause_after(self, step):
        """Trainer flags: wait after `step` until resume(), so that a
        fault injected there cannot come after the job's end (its steps
        take a millisecond)."""
        return ["--pause-after", str(step), "--resume-file",
                self.resume_file()]

    def resume_file(self):
        return os.path.join(self.cluster.dir, "resume")

    def resume(self):
        open(self.resume_file(), "w").close()

    def wait_for_step(self, trainers, step, timeout=240):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for t in trainers:
                if any(s["step"] >= step for s in self.cluster.steps(t)):
                    return t
            time.sleep(0.05)
        self.fail("no trainer reached step %d" % step)

    def finish(self, trainers, workers):
        finish(self, self.cluster, trainers, workers)

    def completed_steps(self, trainer):
        return [s for s in self.cluster.steps(trainer) if not s["failed"]]

    def test_four_ranks_two_instances_match_adamw(self):
        trainers, outs = self.start(4, extra=self.pause_after(2))
        self.wait_for_step(trainers, 2)
        # Refused with one line each while the world keeps training.
        sock = self.cluster.socket("w0")
        with self.assertRaisesRegex(zshard.ZshardError,
                                    "a trainer is already attached"):
            DistributedOptimizer(models.tied_lm(), socket=sock, timeout=5)
        with self.assertRaisesRegex(zshard.ZshardError,
                                    "is for job 'other', this daemon runs "
                                    "job 'pytrain'"):
            DistributedOptimizer(models.tied_lm(), socket=sock, timeout=5,
                                 job="other")
        with self.assertRaisesRegex(zshard.ZshardError,
                                    "param 1 'hidden.weight' has shape "
                                    r"\[8, 16\], the job's 'hidden.weight' "
                                    r"has \[16, 16\]"):
            bad = models.TiedLM()
            bad.hidden = torch.nn.Linear(16, 8)
            DistributedOptimizer(bad, socket=sock, timeout=5)
        # ... and the coordinator records each refusal as an event.
        refused = [e["reason"] for e in
                   self.cluster.events("trainer_refused")]
        self.assertEqual(len(refused), 3, refused)
        self.assertIn("member w0: trainer pid", refused[0])
        self.assertIn("a trainer is already attached", refused[0])
        self.assertIn("this daemon runs job 'pytrain'", refused[1])
        self.assertIn("param 1 'hidden.weight' has shape", refused[2])
        self.resume()
        self.finish(trainers, ["w%d" % i for i in range(4)])
        steps = self.completed_steps(trainers[0])
        self.assertEqual([s["step"] for s in steps], list(range(1, 21)))
        for s in steps:
            self.assertAlmostEqual(s["lr"], lr_at(s["step"]), places=12)
            self.assertTrue(s["applied"])
            self.assertEqual(s["world"], 4)
            self.assertEqual(s["steps"], STEPS)
        self.assert_matches_reference(outs, steps)

    def test_a_daemon_killed_mid_run_loses_nothing(self):
        # Five daemons for a world of four: one is a spare, whose trainer
        # waits in begin_step until its daemon takes the dead one's rank.
        trainers, outs = self.start(5, extra=self.pause_after(5))
        victim = self.wait_for_step(trainers, 5)
        index = trainers.index(victim)
        self.cluster.procs["w%d" % index].send_signal(signal.SIGKILL)
        self.resume()
        self.assertEqual(self.cluster.wait(victim, 60), 3,
                         "its trainer gets WorkerLost")
        alive = [i for i in range(5) if i != index]
        self.finish([trainers[i] for i in alive], ["w%d" % i for i in alive])
        survivor = trainers[alive[0]]
        # The step in flight at the kill failed on the survivors: no world
        # loss or norm was agreed for it.
        failed = [s for t in alive for s in self.cluster.steps(trainers[t])
                  if s["failed"]]
        self.assertTrue(failed)
        for s in failed:
            self.assertIsNone(s["loss"], s)
            self.assertIsNone(s["grad_norm"], s)
        self.assert_matches_reference(
            [outs[i] for i in alive], self.completed_steps(survivor))

    def test_a_spare_trainer_gets_none_at_the_end(self):
        # Five daemons for a world of four and no fault: the spare's trainer
        # waits in begin_step the whole run and gets None at the end, as
        # the ranks' trainers do (exit 0, not WorkerLost's 3).
        trainers, _ = self.start(5)
        self.finish(trainers, ["w%d" % i for i in range(5)])

    def test_a_failed_job_raises_job_failed(self):
        # The holders of ranks 0 and 2 (the same shard in both instances)
        # are killed: a range has no copy left and no checkpoint, so the
        # coordinator fails the job. The survivors' trainers get JobFailed
        # with its reason (exit 4), not WorkerLost: their daemons live.
        trainers, _ = self.start(4, extra=self.pause_after(3))
        self.wait_for_step(trainers, 3)
        ranks = {}
        for t in trainers:
            ranks[self.cluster.steps(t)[-1]["rank"]] = trainers.index(t)
        for rank in (0, 2):
            self.cluster.procs["w%d" % ranks[rank]].send_signal(
                signal.SIGKILL)
        self.resume()
        for rank in (1, 3):
            t = trainers[ranks[rank]]
            self.assertEqual(self.cluster.wait(t, 120), 4,
                             self.cluster.read_log(t))
            self.assertIn("the job failed: ", self.cluster.read_log(t))

    def test_a_daemon_killed_inside_backward_lets_its_trainer_exit(self):
        # The daemon is SIGKILLed from inside a gradient hook, with the
        # params still views of its shared memory: the next hook finds it
        # gone. The trainer gets WorkerLost (exit 3), its params become
        # private copies, and it exits within 5 s of the daemon's death,
        # 20 times in a row (each in a job of its own, world 1).
        self.cluster.stop()
        for attempt in range(20):
            c = cluster.Cluster(one_rank_job())
            try:
                c.start_worker("w0")
                daemon = c.procs["w0"]
                trainer = c.start_trainer(
                    "w0", os.path.join(c.dir, "w0.pt"),
                    extra=["--kill-daemon-in-backward", "3",
                           "--daemon-pid", str(daemon.pid)])
                daemon.wait(120)
                died = time.monotonic()
                try:
                    code = c.wait(trainer, 5)
                except subprocess.TimeoutExpired:
                    self.fail("attempt %d: the trainer still runs 5 s after "
                              "its daemon died:\n%s" %
                              (attempt, c.read_log(trainer)))
                self.assertEqual(code, 3, c.read_log(trainer))
                self.assertIn("trainer: the zshard worker daemon",
                              c.read_log(trainer))
                self.assertLess(time.monotonic() - died, 5)
            finally:
                c.stop()

    def test_a_trainer_gone_for_good_hands_its_state_over(self):
        # Past trainer_timeout_ms its daemon leaves as on SIGTERM (exit 0,
        # state handed over) and the spare takes its rank.
        trainers, outs = self.start(5, extra=self.pause_after(5))
        victim = self.wait_for_step(trainers, 5)
        index = trainers.index(victim)
        self.cluster.procs[victim].send_signal(signal.SIGKILL)
        self.cluster.wait(victim, 30)
        self.resume()
        self.assertEqual(self.cluster.wait("w%d" % index, 120), 0,
                         self.cluster.read_log("w%d" % index))
        self.assertIn("leaving the job",
                      self.cluster.read_log("w%d" % index))
        alive = [i for i in range(5) if i != index]
        self.finish([trainers[i] for i in alive], ["w%d" % i for i in alive])
        self.assert_matches_reference(
            [outs[i] for i in alive], self.completed_steps(trainers[alive[0]]))

    def test_a_trainer_killed_and_restarted_resumes(self):
        # w0's trainer kills itself with SIGKILL at step 6 in the last
        # gradient hook of its backward pass, after its other buckets were
        # handed over (and maybe reduce-scattered): its daemon keeps what
        # was reduced, and the trainer started next redoes the step.
        c = self.cluster
        trainers, outs = [], []
        for i in range(4):
            c.start_worker("w%d" % i)
            outs.append(os.path.join(c.dir, "w%d.pt" % i))
            extra = ["--die-in-backward", "6"] if i == 0 else []
            trainers.append(c.start_trainer("w%d" % i, outs[-1],
                                            extra=extra))
        self.assertEqual(c.wait(trainers[0], 240), -signal.SIGKILL)
        self.assertEqual(max(s["step"] for s in c.steps(trainers[0])), 5)
        outs[0] = os.path.join(c.dir, "restarted.pt")
        trainers[0] = c.start_trainer("w0", outs[0], tag="b")
        self.finish(trainers, ["w%d" % i for i in range(4)])
        self.assertIn("trainer lost mid-step", c.read_log("w0"))
        lost = [e["reason"] for e in c.events("trainer_lost")]
        self.assertEqual(len(lost), 1, lost)
        self.assertIn("member w0: trainer pid", lost[0])
        attached = [e["reason"] for e in c.events("trainer_attached")]
        self.assertEqual(len(attached), 1, attached)
        self.assertIn("(trainer 2 of this daemon)", attached[0])
        self.assert_matches_reference(outs, self.completed_steps(trainers[1]))

    def test_accumulation_in_no_sync_and_a_second_backward_refused(self):
        # Every trainer runs two backward passes per step, the first inside
        # no_sync(); at step 4 w2's trainer runs both outside it: the second
        # is refused and step 4 is skipped on every rank.
        c = self.cluster
        trainers, outs = [], []
        for i in range(4):
            c.start_worker("w%d" % i)
            outs.append(os.path.join(c.dir, "w%d.pt" % i))
            extra = ["--micro-batches", "2"]
            if i == 2:
                extra += ["--double-backward-at", "4"]
            trainers.append(c.start_trainer("w%d" % i, outs[-1],
                                            extra=extra))
        self.finish(trainers, ["w%d" % i for i in range(4)])
        for t in trainers:
            steps = self.completed_steps(t)
            self.assertEqual([s["step"] for s in steps], list(range(1, 21)))
            self.assertEqual([s["step"] for s in steps if not s["applied"]],
                             [4], t)
        refused = [s for s in c.steps(trainers[2]) if s["refused"]]
        self.assertEqual([s["step"] for s in refused], [4])
        self.assertIn("got a second gradient in step 4", refused[0]["refused"])
        self.assertIn("opt.no_sync()", refused[0]["refused"])
        self.assert_matches_reference(outs, self.completed_steps(trainers[0]),
                                      skip=(4,))

    def test_bf16_model_reduces_grads_in_fp32(self):
        # grad_reduce_in_fp32: torch keeps bf16 .grad, each backward's
        # gradient is added into the fp32 grad buffer (.main_grad) by the
        # param's hook, two micro-batches per step (the first in no_sync).
        c = self.cluster
        trainers, outs = [], []
        for i in range(4):
            c.start_worker("w%d" % i)
            outs.append(os.path.join(c.dir, "w%d.pt" % i))
            trainers.append(c.start_trainer(
                "w%d" % i, outs[-1], extra=["--bf16", "--micro-batches",
                                            "2"]))
        self.finish(trainers, ["w%d" % i for i in range(4)])
        got = [torch.load(o) for o in outs]
        for other in got[1:]:
            for name, value in got[0].items():
                self.assertEqual(value.dtype, torch.bfloat16)
                self.assertTrue(torch.equal(value, other[name]), name)
        steps = self.completed_steps(trainers[0])
        self.assertEqual([s["step"] for s in steps], list(range(1, 21)))
        self.assertTrue(all(s["applied"] for s in steps))
        self.assertLess(steps[-1]["loss"], 0.8 * steps[0]["loss"])
        # Step 1's gradient, emulated: each rank's micro-batches' bf16
        # gradients widened to fp32 and summed, then over the ranks. Only
        # the order of the fp32 sums differs: relative 1e-5.
        model = models.tied_lm().to(torch.bfloat16)
        x, y = models.token_batch(GLOBAL_BATCH)
        total = {n: torch.zeros(p.shape) for n, p in model.named_parameters()}
        for rank in range(4):
            samples = list(range(rank, GLOBAL_BATCH, 4))
            for chunk in (samples[0::2], samples[1::2]):
                model.zero_grad()
                models.summed_loss(model, x, y, chunk).backward()
                for n, p in model.named_parameters():
                    total[n] += p.grad.float()
        norm = math.sqrt(sum(float((g * g).sum()) for g in total.values()))
        norm /= GLOBAL_BATCH
        self.assertLess(abs(steps[0]["grad_norm"] - norm), 1e-5 * norm,
                        (steps[0]["grad_norm"], norm))


if __name__ == "__main__":
    unittest.main()
