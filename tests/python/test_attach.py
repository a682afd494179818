"""A failed attach leaves nothing open: DistributedOptimizer against a fake
worker daemon (a Unix-socket server in a thread that speaks the trainer
protocol's hello exchange, client/worker/trainer/trainer_hub.cc) that
refuses, answers nonsense or goes away. After each failure the fake daemon
reads EOF on its end, and this process has the file descriptors it had
before. The successful exchange is checked against the same fake, so that
it is known to speak the protocol; the real daemon's refusals are in
test_trainer."""

import gc
import json
import os
import re
import signal
import socket
import struct
import tempfile
import threading
import unittest
import warnings

import models
import zshard
from zshard import _protocol
from zshard.torch import DistributedOptimizer, model_spec

# Every socket operation of the fake daemon gives up after this long, and
# then closes its end, so that a trainer waiting on it cannot hang either.
TIMEOUT = 10.0


def open_fds():
    """The numbers of this process's open file descriptors."""
    return set(os.listdir("/proc/self/fd"))


def frame(body):
    data = json.dumps(body).encode()
    return struct.pack("<I", len(data)) + data


def read_frame(conn):
    def exact(n):
        data = b""
        while len(data) < n:
            chunk = conn.recv(n - len(data))
            if not chunk:
                raise EOFError("the trainer closed before a whole frame")
            data += chunk
        return data
    (n,) = struct.unpack("<I", exact(4))
    return json.loads(exact(n))


class FakeDaemon:
    """Listens on `path`, takes one connection, reads its hello and calls
    `answer(conn)`; when that returns True it then reads what the trainer
    sends until EOF (the trainer closed its socket)."""

    def __init__(self, path, answer):
        self.answer = answer
        self.hello = None
        self.after = []     # the frames the trainer sent after the hello
        self.eof = False    # the trainer closed its end
        self.error = None
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.settimeout(TIMEOUT)
        self.listener.bind(path)
        self.listener.listen(1)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        try:
            conn, _ = self.listener.accept()
            with conn:
                conn.settimeout(TIMEOUT)
                self.hello = read_frame(conn)
                if not self.answer(conn):
                    return
                while True:
                    try:
                        self.after.append(read_frame(conn))
                    except EOFError:
                        self.eof = True
                        return
        except Exception as e:  # reported by stop()
            self.error = e

    def stop(self):
        """Waits for the connection to end and closes the listener."""
        self.thread.join(TIMEOUT + 5)
        self.listener.close()
        if self.thread.is_alive():
            raise AssertionError("the fake daemon did not finish")


def send_error(conn, message, fds=()):
    if fds:
        socket.send_fds(conn, [frame({"type": "error", "message": message})],
                        list(fds))
    else:
        conn.sendall(frame({"type": "error", "message": message}))
    return True


class AttachFailureTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="zshard-attach-")
        self.addCleanup(self.dir.cleanup)
        self.path = os.path.join(self.dir.name, "w0.sock")
        self.model = models.tied_lm()
        self.spec = model_spec(self.model)

    def attach_fails(self, answer, error, regex, **kwargs):
        """Attaches to a fake daemon that answers with `answer`; asserts
        that it raises `error` matching `regex`, and that nothing stays
        open. Returns the fake daemon."""
        before = open_fds()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ResourceWarning)
            daemon = FakeDaemon(self.path, answer)
            raised = None
            try:
                DistributedOptimizer(self.model, socket=self.path, timeout=5,
                                     **kwargs)
            except error as e:
                # Kept, with its traceback, while the fds are counted: the
                # traceback's frames would keep a socket left open alive.
                raised = e
            finally:
                daemon.stop()
            self.assertIsNotNone(raised, "no %s" % error.__name__)
            self.assertRegex(str(raised), regex)
            self.assertIsNone(daemon.error)
            self.assertEqual(open_fds(), before, raised)
            # A socket left to the garbage collector would warn.
            del raised
            gc.collect()
        unclosed = [str(w.message) for w in caught
                    if issubclass(w.category, ResourceWarning)]
        self.assertEqual(unclosed, [])
        self.assertEqual(daemon.hello["type"], "hello")
        self.assertEqual(daemon.hello["version"], _protocol.PROTOCOL_VERSION)
        self.assertEqual(daemon.hello["pid"], os.getpid())
        self.assertEqual(daemon.hello["model"], self.spec)
        return daemon

    def test_a_refused_hello_closes_the_socket(self):
        message = "a trainer is already attached to this daemon (pid 4242)"
        daemon = self.attach_fails(lambda conn: send_error(conn, message),
                                   zshard.ZshardError,
                                   "^%s$" % re.escape(message))
        self.assertTrue(daemon.eof, "the trainer's socket stayed open")
        self.assertEqual(daemon.after, [])

    def test_a_refusal_for_another_job_closes_the_socket(self):
        message = ("the trainer is for job 'other', this daemon runs job "
                   "'pytrain'")
        daemon = self.attach_fails(lambda conn: send_error(conn, message),
                                   zshard.ZshardError, "is for job 'other'",
                                   job="other")
        self.assertEqual(daemon.hello["job"], "other")
        self.assertTrue(daemon.eof)

    def test_fds_that_come_with_a_refusal_are_closed(self):
        r, w = os.pipe()
        try:
            daemon = self.attach_fails(
                lambda conn: send_error(conn, "refused", fds=[r]),
                zshard.ZshardError, "^refused$")
        finally:
            os.close(r)
            os.close(w)
        self.assertTrue(daemon.eof)

    def test_an_answer_other_than_welcome_closes_the_socket(self):
        def answer(conn):
            conn.sendall(frame({"type": "step", "step": 1}))
            return True
        daemon = self.attach_fails(answer, zshard.ZshardError,
                                   "answered 'step' to hello")
        self.assertTrue(daemon.eof, "the trainer's socket stayed open")

    def test_a_frame_too_large_closes_the_socket(self):
        def answer(conn):
            conn.sendall(struct.pack("<I", _protocol.MAX_FRAME_BYTES + 1))
            return True
        daemon = self.attach_fails(answer, zshard.ZshardError,
                                   "sent a frame of %d bytes" %
                                   (_protocol.MAX_FRAME_BYTES + 1))
        self.assertTrue(daemon.eof)

    def test_an_answer_that_is_not_json_closes_the_socket(self):
        def answer(conn):
            conn.sendall(struct.pack("<I", 5) + b"hello")
            return True
        daemon = self.attach_fails(answer, ValueError, "Expecting value")
        self.assertTrue(daemon.eof)

    def test_a_daemon_gone_before_it_answers_is_worker_lost(self):
        # The connection closes at once (answer returns False).
        self.attach_fails(lambda conn: False, zshard.WorkerLost,
                          "the zshard worker daemon is gone")

    def test_an_attach_interrupted_while_it_waits_closes_the_socket(self):
        # The fake daemon never answers the hello; a signal handler's
        # exception ends the trainer's wait, as Ctrl-C would.
        class Interrupted(Exception):
            pass

        def interrupt(*_):
            raise Interrupted("interrupted")

        def never_answer(conn):
            signal.setitimer(signal.ITIMER_REAL, 0.2)
            return True

        old = signal.signal(signal.SIGALRM, interrupt)
        self.addCleanup(signal.signal, signal.SIGALRM, old)
        self.addCleanup(signal.setitimer, signal.ITIMER_REAL, 0)
        daemon = self.attach_fails(never_answer, Interrupted, "interrupted")
        self.assertTrue(daemon.eof, "the trainer's socket stayed open")

    def test_no_daemon_within_the_timeout_leaves_no_socket(self):
        before = open_fds()
        with self.assertRaisesRegex(zshard.ZshardError,
                                    "no zshard worker daemon answers on"):
            DistributedOptimizer(self.model, socket=self.path, timeout=0.3)
        self.assertEqual(open_fds(), before)

    def test_a_socket_nobody_accepts_on_leaves_no_socket(self):
        # Bound but not listening: every connect is refused.
        bound = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(bound.close)
        bound.bind(self.path)
        before = open_fds()
        with self.assertRaisesRegex(zshard.ZshardError,
                                    "no zshard worker daemon answers on"):
            DistributedOptimizer(self.model, socket=self.path, timeout=0.3)
        self.assertEqual(open_fds(), before)

    def test_the_fake_daemon_speaks_the_protocol(self):
        # A welcome attaches; close() sends detach and closes the socket.
        def welcome(conn):
            conn.sendall(frame({"type": "welcome", "version":
                                _protocol.PROTOCOL_VERSION, "job": "pytrain",
                                "pid": 1}))
            return True
        before = open_fds()
        daemon = FakeDaemon(self.path, welcome)
        try:
            opt = DistributedOptimizer(self.model, socket=self.path,
                                       timeout=5)
            self.assertEqual(opt.job, "pytrain")
            opt.close()
        finally:
            daemon.stop()
        self.assertIsNone(daemon.error)
        self.assertEqual(daemon.after, [{"type": "detach"}])
        self.assertTrue(daemon.eof)
        self.assertEqual(open_fds(), before)


if __name__ == "__main__":
    unittest.main()
