"""What zshard-run reads from the coordinator while a job runs
(zshard.run): its events and status through `zshardctl ... --output json`,
the loss from its /metrics, and the progress line made of them."""

from __future__ import annotations

import collections
import json
import re
import subprocess
import time
import urllib.request
from typing import Any, Deque, Dict, List, Optional, Tuple

__all__ = ["CoordinatorView"]


class CoordinatorView:
    """One coordinator (or a list of them: zshardctl follows the leader)
    as zshardctl and /metrics show it."""

    def __init__(self, zshardctl: str, address: str) -> None:
        self.zshardctl, self.address = zshardctl, address
        self.metrics_port: Optional[int] = None
        self.seen_seq = 0
        self.history: Deque[Tuple[float, int]] = collections.deque()

    def ctl(self, *command: str) -> Optional[Any]:
        """zshardctl COMMAND --output json, parsed; None when it fails."""
        try:
            out = subprocess.run(
                [self.zshardctl, "--coordinator", self.address, *command,
                 "--output", "json", "--timeout-ms", "3000"],
                stdin=subprocess.DEVNULL, capture_output=True, text=True,
                timeout=15)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if out.returncode != 0:
            return None
        try:
            return json.loads(out.stdout)
        except ValueError:
            try:
                return [json.loads(l) for l in out.stdout.splitlines() if l]
            except ValueError:
                return None

    def new_events(self) -> Optional[List[Dict[str, Any]]]:
        """The events after the last ones returned, in order; None when
        the coordinator could not be asked."""
        events = self.ctl("events")
        if isinstance(events, dict):
            events = events.get("events")
        if not isinstance(events, list):
            return None
        out = []
        for e in events:
            if isinstance(e, dict) and e.get("seq", 0) > self.seen_seq:
                self.seen_seq = e.get("seq", 0)
                out.append(e)
        return out

    def loss(self) -> Optional[float]:
        """The lowest rank's latest loss, from the coordinator's /metrics."""
        if not self.metrics_port:
            return None
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" %
                                        self.metrics_port, timeout=2) as r:
                text = r.read().decode()
        except (OSError, ValueError):
            return None
        found = sorted((int(m.group(1)), float(m.group(2))) for m in re.finditer(
            r'^zshard_rank_loss\{rank="(\d+)"[^}]*\} (\S+)$', text, re.M))
        return found[0][1] if found else None

    def progress(self, steps: int) -> Optional[str]:
        """The progress line: step (of `steps` when known), loss, steps/s,
        ETA, world and spares; None when the status could not be read."""
        status = self.ctl("status")
        if not isinstance(status, dict):
            return None
        members = status.get("members") or []
        step = max([m.get("step", 0) for m in members
                    if m.get("rank", -1) >= 0] or [0])
        now = time.monotonic()
        self.history.append((now, step))
        while len(self.history) > 2 and now - self.history[0][0] > 10:
            self.history.popleft()
        t0, s0 = self.history[0]
        rate = (step - s0) / (now - t0) if now > t0 else 0.0
        text = "step %d/%d" % (step, steps) if steps else "step %d" % step
        loss = self.loss()
        if loss is not None:
            text += "  loss %.4f" % loss
        if rate > 0:
            text += "  %.1f steps/s" % rate
            if steps:
                eta = int(max(0, steps - step) / rate)
                text += "  ETA %d:%02d:%02d" % (eta // 3600, eta // 60 % 60,
                                                eta % 60)
        spares = sum(1 for m in members if m.get("state") == "SPARE")
        text += "  world %s (%d spare%s) %s" % (
            status.get("world", "?"), spares, "" if spares == 1 else "s",
            str(status.get("state", "")).lower())
        return text
