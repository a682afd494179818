"""The trainer protocol's frames (client/worker/trainer/trainer_protocol.h):
a 4-byte little-endian length, then a JSON object with a "type"; file
descriptors ride with a frame's first byte (SCM_RIGHTS)."""

import json
import os
import socket
import struct
import time

PROTOCOL_VERSION = 2
MAX_FRAME_BYTES = 16 << 20
MAX_FDS = 16


class WorkerLost(ConnectionError):
    """The worker daemon went away (it died or closed the trainer socket)."""


class ZshardError(RuntimeError):
    """The daemon refused the trainer or broke the protocol; the message
    says why."""


def connect(path, timeout):
    """Connects to the daemon's socket at `path`, waiting up to `timeout`
    seconds for it to appear."""
    deadline = time.monotonic() + timeout
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
            return sock
        except (FileNotFoundError, ConnectionRefusedError) as e:
            sock.close()
            if time.monotonic() >= deadline:
                raise ZshardError(
                    "no zshard worker daemon answers on %s after %.0f s (%s); "
                    "start zshard-worker with --trainer-socket %s" %
                    (path, timeout, e.strerror, path)) from None
            time.sleep(0.05)


def send(sock, body):
    data = json.dumps(body).encode()
    try:
        sock.sendall(struct.pack("<I", len(data)) + data)
    except (BrokenPipeError, ConnectionResetError) as e:
        raise WorkerLost("the zshard worker daemon is gone (%s)" %
                         e.strerror) from None


def _recv_exact(sock, n):
    chunks = []
    while n > 0:
        try:
            chunk = sock.recv(n)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            raise WorkerLost("the zshard worker daemon is gone (its socket "
                             "closed)")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def recv(sock):
    """One message: (body dict, list of fds). Raises WorkerLost on EOF."""
    try:
        header, fds, _, _ = socket.recv_fds(sock, 4, MAX_FDS)
    except ConnectionResetError:
        header, fds = b"", []
    if not header:
        raise WorkerLost("the zshard worker daemon is gone (its socket "
                         "closed)")
    if len(header) < 4:
        header += _recv_exact(sock, 4 - len(header))
    (n,) = struct.unpack("<I", header)
    if n == 0 or n > MAX_FRAME_BYTES:
        for fd in fds:
            os.close(fd)
        raise ZshardError("the daemon sent a frame of %d bytes" % n)
    body = json.loads(_recv_exact(sock, n))
    return body, fds
