"""The trainer protocol's frames (client/worker/trainer/trainer_protocol.h):
a 4-byte little-endian length, then a JSON object with a "type"; file
descriptors ride with a frame's first byte (SCM_RIGHTS)."""

from __future__ import annotations

import json
import os
import select
import socket
import struct
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

# The errors lived here first; they stay importable from here.
from zshard.errors import WorkerLost, ZshardError

__all__ = ["MAX_FDS", "MAX_FRAME_BYTES", "PROTOCOL_VERSION", "WorkerLost",
           "ZshardError", "attach", "close_fds", "connect", "expect", "recv",
           "send"]

PROTOCOL_VERSION = 2
MAX_FRAME_BYTES = 16 << 20
MAX_FDS = 16

Message = Dict[str, Any]


def close_fds(fds: Iterable[int]) -> None:
    """Closes every file descriptor in `fds`."""
    for fd in fds:
        os.close(fd)


def connect(path: str, timeout: float) -> socket.socket:
    """Connects to the daemon's socket at `path`, waiting up to `timeout`
    seconds for it to appear.

    Args:
        path: the daemon's trainer socket.
        timeout: seconds to wait for a daemon to listen there.

    Returns:
        The connected socket (blocking, no timeout).

    Raises:
        ZshardError: nothing listens on `path` after `timeout` seconds.
        OSError: connecting failed for another reason (the socket is
            closed first).
    """
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
        except BaseException:
            sock.close()
            raise
        time.sleep(0.05)


def send(sock: socket.socket, body: Message) -> None:
    """Sends `body` as one frame.

    Raises:
        WorkerLost: the daemon has closed its end.
    """
    data = json.dumps(body).encode()
    try:
        sock.sendall(struct.pack("<I", len(data)) + data)
    except (BrokenPipeError, ConnectionResetError) as e:
        raise WorkerLost("the zshard worker daemon is gone (%s)" %
                         e.strerror) from None


def _recv_exact(sock: socket.socket, n: int) -> bytes:
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


def recv(sock: socket.socket) -> Tuple[Message, List[int]]:
    """Receives one frame. When this raises, the fds that came with the
    frame are closed.

    Returns:
        (body, fds): the frame's JSON object and the file descriptors that
        came with it, which the caller owns.

    Raises:
        WorkerLost: the daemon closed its end (EOF).
        ZshardError: a frame of 0 bytes or over MAX_FRAME_BYTES.
        ValueError: the frame is not JSON.
    """
    try:
        header, fds, _, _ = socket.recv_fds(sock, 4, MAX_FDS)
    except ConnectionResetError:
        header, fds = b"", []
    try:
        if not header:
            raise WorkerLost("the zshard worker daemon is gone (its socket "
                             "closed)")
        if len(header) < 4:
            header += _recv_exact(sock, 4 - len(header))
        (n,) = struct.unpack("<I", header)
        if n == 0 or n > MAX_FRAME_BYTES:
            raise ZshardError("the daemon sent a frame of %d bytes" % n)
        body = json.loads(_recv_exact(sock, n))
    except BaseException:
        close_fds(fds)
        raise
    return body, fds


def recv_waiting(sock: socket.socket, seconds: float,
                 ) -> Optional[Tuple[Message, List[int]]]:
    """recv, when a frame arrives within `seconds`; None otherwise."""
    readable, _, _ = select.select([sock], [], [], seconds)
    return recv(sock) if readable else None


def expect(sock: socket.socket, want: str, answering: str, refused: str,
           receive: Optional[Callable[[], Tuple[Message, List[int]]]] = None
           ) -> Message:
    """The daemon's next message, which must be of type `want` (the answer
    to `answering`); fds that came with it are closed. `receive` (default:
    recv(sock)) reads each message.

    Raises:
        ZshardError: the daemon sent an error (its message, else
            `refused`) or a message of another type.
        WorkerLost: the daemon closed the socket.
    """
    receive = receive or (lambda: recv(sock))
    body, fds = receive()
    close_fds(fds)
    while body.get("type") == "waiting":  # news for begin_step, not this
        body, fds = receive()
        close_fds(fds)
    if body.get("type") == "error":
        raise ZshardError(body.get("message", refused))
    if body.get("type") != want:
        raise ZshardError("the daemon answered %r to %s" %
                          (body.get("type"), answering))
    return body


def attach(path: str, timeout: float, job: Optional[str],
           spec: Message) -> Tuple[socket.socket, Message]:
    """Connects to the daemon at `path` and says hello with `spec`; the
    socket is closed whenever this raises.

    Returns:
        The socket and the daemon's welcome.

    Raises:
        ZshardError: no daemon within `timeout`, or it refused the trainer
            or answered something other than welcome.
        WorkerLost: the daemon closed the socket before it answered.
    """
    sock = connect(path, timeout)
    try:
        send(sock, {
            "type": "hello", "version": PROTOCOL_VERSION,
            "pid": os.getpid(), "job": job, "model": spec})
        body = expect(sock, "welcome", "hello", "refused by the daemon")
    except BaseException:
        sock.close()
        raise
    return sock, body
