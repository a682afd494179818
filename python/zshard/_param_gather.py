"""overlap_param_gather's trainer side: after a step whose result says
"param_gather", the daemon all-gathers the updated params bucket by bucket
in forward order and sends one "gathered" message per bucket
(client/worker/trainer/trainer_protocol.h). The forward pre-hooks wait for
their module's buckets; every other reader of the socket hands the
"gathered" messages here and keeps the rest in order."""

from __future__ import annotations

import collections
import logging
import socket
import time
from typing import (Any, Callable, Deque, Dict, Iterable, List, Optional,
                    Set, Tuple)

import torch

from zshard import _protocol

__all__ = ["ParamGather", "hook_modules"]

Bucket = Tuple[int, int]  # (buffer, bucket)
Received = Tuple[Dict[str, Any], List[int]]

_log = logging.getLogger("zshard")


class ParamGather:
    """Which buckets' params are not in place yet, and the messages that
    came while waiting for them."""

    def __init__(self) -> None:
        # The step whose buckets are still being gathered; None: none.
        self.step: Optional[int] = None
        self.pending: Set[Bucket] = set()
        # Messages read by a wait that are not "gathered", in order.
        self.backlog: Deque[Received] = collections.deque()
        # A bucket's gather failed: its params are stale until the daemon
        # sends a new layout (the next step fails on every rank).
        self.failed = False
        # Results that deferred the gather so far.
        self.deferred = 0

    def expect(self, step: int, buckets: Iterable[Bucket]) -> None:
        """The result of `step` said its buckets are gathered after it."""
        self.step = step
        self.pending = set(buckets)
        self.deferred += 1

    def reset(self) -> None:
        """A new layout: its buffers hold complete params."""
        self.step = None
        self.pending = set()
        self.failed = False

    def take(self, body: Dict[str, Any]) -> bool:
        """Handles `body` when it is a "gathered" message (True)."""
        if body.get("type") != "gathered":
            return False
        if self.step is not None and body.get("step") == self.step:
            self.pending.discard((int(body["buffer"]), int(body["bucket"])))
            if not body.get("ok", False) and not self.failed:
                self.failed = True
                _log.warning("zshard: the all-gather of step %d's params "
                             "failed; this step's forward runs on stale "
                             "params and the daemon fails it", self.step)
            if not self.pending:
                self.step = None
        return True

    def wait(self, sock: socket.socket,
             buckets: Optional[Iterable[Bucket]] = None) -> None:
        """Reads the daemon's messages until none of `buckets` (default:
        every bucket) is pending; other messages go to the backlog.

        Raises:
            WorkerLost: the daemon went away.
        """
        want = None if buckets is None else set(buckets)
        while self.pending and (want is None or want & self.pending):
            body, fds = _protocol.recv(sock)
            if not self.take(body):
                self.backlog.append((body, fds))

    def recv(self, sock: socket.socket,
             timeout: Optional[float]) -> Optional[Received]:
        """The daemon's next message that is not "gathered" (the backlog's
        first); None when none came within `timeout` seconds (None: wait
        for one)."""
        if self.backlog:
            return self.backlog.popleft()
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if deadline is None:
                got: Optional[Received] = _protocol.recv(sock)
            else:
                got = _protocol.recv_waiting(
                    sock, max(0.0, deadline - time.monotonic()))
            if got is None or not self.take(got[0]):
                return got

    def receive(self, sock: socket.socket) -> Received:
        """recv without a timeout."""
        got = self.recv(sock, None)
        assert got is not None
        return got


def hook_modules(model: torch.nn.Module, params: List[torch.nn.Parameter],
                 before: Callable[[List[int]], None]) -> List[Any]:
    """Registers a forward pre-hook on every module of `model` that owns
    some of `params` (the spec's, in registration order): it calls
    `before` with their indices. Returns the hooks' handles."""
    index_of = {id(p): i for i, p in enumerate(params)}
    handles = []
    for module in model.modules():
        own = [index_of[id(p)] for p in module.parameters(recurse=False)
               if id(p) in index_of]
        if own:
            handles.append(module.register_forward_pre_hook(
                lambda *_, i=own: before(i)))
    return handles
