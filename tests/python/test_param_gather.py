"""overlap_param_gather (DistributedOptimizer(..., overlap_param_gather=True)):
the same job run twice on real coordinator, worker and trainer processes
(W = 4, I = 2, buckets of 512 elements), once with the all-gather overlapped
with the next forward and once without, ends with bit-identical params; a
daemon killed mid-run and a trainer killed and restarted still end with
torch AdamW's params; and against a fake daemon, a module's forward
pre-hook waits for its bucket's "gathered" message, in whatever order the
buckets come."""

import os
import socket
import tempfile
import threading
import time
import unittest

import torch

import cluster
import test_trainer
from test_attach import TIMEOUT, frame, read_frame
from zshard.torch import DistributedOptimizer


class OverlapParamGatherJobTest(unittest.TestCase):

    def setUp(self):
        if not os.environ.get("ZSHARD_BIN_DIR"):
            self.skipTest("ZSHARD_BIN_DIR is not set (run through ctest)")

    def run_job(self, overlap):
        """The job of test_trainer on four daemons; the final params of
        every rank and each trainer's step log."""
        c = cluster.Cluster(test_trainer.job())
        self.addCleanup(c.stop)
        extra = ["--overlap-param-gather"] if overlap else []
        trainers, outs = [], []
        for i in range(4):
            c.start_worker("w%d" % i)
            outs.append(os.path.join(c.dir, "w%d.pt" % i))
            trainers.append(c.start_trainer("w%d" % i, outs[-1],
                                            extra=extra))
        for t in trainers:
            self.assertEqual(c.wait(t, 300), 0, c.read_log(t))
        for i in range(4):
            self.assertEqual(c.wait("w%d" % i, 60), 0,
                             c.read_log("w%d" % i))
        logs = [c.steps(t) for t in trainers]
        got = [torch.load(o) for o in outs]
        c.stop()
        return got, logs

    def test_on_and_off_end_with_bit_identical_params(self):
        off, off_logs = self.run_job(overlap=False)
        on, on_logs = self.run_job(overlap=True)
        steps = test_trainer.STEPS
        for log in off_logs:
            self.assertEqual([s["step"] for s in log], list(range(1, steps + 1)))
            self.assertTrue(all(s["applied"] for s in log), log)
            self.assertEqual(max(s["param_gather"] for s in log), 0)
        for log in on_logs:
            self.assertEqual([s["step"] for s in log], list(range(1, steps + 1)))
            self.assertTrue(all(s["applied"] for s in log), log)
            # Every result deferred the gather (the log counts them).
            self.assertEqual([s["param_gather"] for s in log],
                             list(range(1, steps + 1)))
        for rank in range(4):
            for name, value in off[0].items():
                self.assertTrue(torch.equal(value, off[rank][name]), name)
                self.assertTrue(torch.equal(value, on[rank][name]),
                                "rank %d %s: on and off differ by %g" %
                                (rank, name,
                                 (value - on[rank][name]).abs().max()))
        # The params did move: the comparison is not of initial values.
        initial = test_trainer.models.tied_lm().state_dict()
        for name, value in initial.items():
            self.assertFalse(torch.equal(value, on[0][name]), name)


class OverlapFaultsTest(test_trainer.TrainerTest):
    """test_trainer's daemon killed mid-run (a spare takes its rank) and
    trainer killed and restarted, with every trainer on
    overlap_param_gather: the results still match torch AdamW."""

    KEEP = ("test_a_daemon_killed_mid_run_loses_nothing",
            "test_a_trainer_killed_and_restarted_resumes")

    def setUp(self):
        super().setUp()
        start = self.cluster.start_trainer

        def with_overlap(worker, out, tag="", extra=()):
            return start(worker, out, tag,
                         [*extra, "--overlap-param-gather"])
        self.cluster.start_trainer = with_overlap

    def finish(self, trainers, workers):
        super().finish(trainers, workers)
        # The results deferred the gather (each trainer's log counts them).
        for t in trainers:
            self.assertGreater(max(s["param_gather"]
                                   for s in self.cluster.steps(t)), 0, t)


# Only the fault tests run again here.
for _name in dir(test_trainer.TrainerTest):
    if _name.startswith("test_") and _name not in OverlapFaultsTest.KEEP:
        setattr(OverlapFaultsTest, _name, None)


def two_layers():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 4, bias=False),
                               torch.nn.Linear(4, 4, bias=False))


class ForwardHookTest(unittest.TestCase):
    """A fake daemon with one fp32 buffer of two buckets: bucket 0 holds
    '1.weight' (the buffer is in reverse registration order), bucket 1
    '0.weight'. After the step's result it gathers bucket 1, then, a while
    later, bucket 0: layer 1's forward must see bucket 0's new values."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="zshard-gather-")
        self.addCleanup(self.dir.cleanup)
        self.path = os.path.join(self.dir.name, "daemon.sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(self.listener.close)
        self.listener.settimeout(TIMEOUT)
        self.listener.bind(self.path)
        self.listener.listen(1)
        self.params_fd = os.memfd_create("params")
        self.grads_fd = os.memfd_create("grads")
        for fd in (self.params_fd, self.grads_fd):
            os.ftruncate(fd, 128 * 4)
            self.addCleanup(os.close, fd)
        self.frames = []      # what the trainer sent after its hello
        self.go = threading.Event()
        self.error = None

    def write_params(self, start, value):
        os.pwrite(self.params_fd,
                  torch.full((16,), value).numpy().tobytes(), start * 4)

    def serve(self, deferred):
        try:
            conn, _ = self.listener.accept()
            with conn:
                conn.settimeout(TIMEOUT)
                read_frame(conn)  # hello
                conn.sendall(frame({"type": "welcome", "version": 2,
                                    "job": "fake", "pid": os.getpid()}))
                layout = frame({
                    "type": "layout", "generation": 1, "buffers": [{
                        "param_dtype": "fp32", "grad_dtype": "fp32",
                        "expert": False, "numel": 128,
                        "params": [{"name": "1.weight", "start": 0},
                                   {"name": "0.weight", "start": 64}],
                        "buckets": [[0, 64], [64, 128]]}]})
                socket.send_fds(conn, [layout[:1]],
                                [self.params_fd, self.grads_fd])
                conn.sendall(layout[1:])
                conn.sendall(frame({
                    "type": "step", "step": 1, "rank": 0, "world": 1,
                    "global_batch": 1, "lr": 0.1, "steps": 1,
                    "repeated": False, "generation": 1}))
                while True:
                    body = read_frame(conn)
                    self.frames.append(body)
                    if body["type"] == "backward_done":
                        break
                result = {"type": "result", "step": 1, "failed": False,
                          "applied": True, "grad_norm": 1.0, "loss": None}
                if deferred:
                    result["param_gather"] = True
                conn.sendall(frame(result))
                if deferred:
                    self.go.wait(TIMEOUT)
                    self.write_params(64, 1.0)
                    conn.sendall(frame({"type": "gathered", "step": 1,
                                        "buffer": 0, "bucket": 1,
                                        "ok": True}))
                    time.sleep(0.3)
                    self.write_params(0, 2.0)
                    conn.sendall(frame({"type": "gathered", "step": 1,
                                        "buffer": 0, "bucket": 0,
                                        "ok": True}))
                conn.sendall(frame({"type": "done", "failed": False,
                                    "reason": ""}))
                read_frame(conn)  # detach
        except Exception as e:  # pylint: disable=broad-except
            self.error = e

    def train_one_step(self, overlap):
        server = threading.Thread(target=self.serve, args=(overlap,),
                                  daemon=True)
        server.start()
        model = two_layers()
        seen = {}
        for i, layer in enumerate(model):
            layer.register_forward_hook(
                lambda m, *_, i=i: seen.__setitem__(i, m.weight.clone()))
        opt = DistributedOptimizer(model, socket=self.path, timeout=5,
                                   overlap_param_gather=overlap)
        with opt:
            info = opt.begin_step()
            self.assertEqual(info.step, 1)
            model(torch.ones(2, 4)).sum().backward()
            result = opt.step()
            self.assertTrue(result.applied)
            # Neither bucket is gathered yet: step() did not wait.
            before = model[1].weight.detach().clone()
            self.go.set()
            model(torch.ones(2, 4))
            self.assertIsNone(opt.begin_step())
        server.join(TIMEOUT)
        self.assertIsNone(self.error)
        return before, seen

    def test_a_layer_waits_for_its_bucket(self):
        before, seen = self.train_one_step(overlap=True)
        self.assertTrue(torch.equal(seen[0], torch.full((4, 4), 1.0)))
        # Bucket 0 came 0.3 s after bucket 1: layer 1 waited for it.
        self.assertTrue(torch.equal(seen[1], torch.full((4, 4), 2.0)))
        self.assertFalse(torch.equal(before, seen[1]))
        done = [f for f in self.frames if f["type"] == "backward_done"]
        self.assertIs(done[0]["overlap_param_gather"], True)

    def test_off_the_trainer_does_not_ask(self):
        self.train_one_step(overlap=False)
        done = [f for f in self.frames if f["type"] == "backward_done"]
        self.assertNotIn("overlap_param_gather", done[0])


if __name__ == "__main__":
    unittest.main()
