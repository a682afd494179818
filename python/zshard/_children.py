"""The processes zshard-run starts (zshard.run): each child's output line
by line to its log file and, filtered and prefixed, to one console that
keeps a progress line below them on a terminal."""

from __future__ import annotations

import collections
import ctypes
import re
import signal
import subprocess
import sys
import threading
import time
from typing import Callable, Dict, List, Optional

__all__ = ["Child", "Console", "level", "stop"]


class Console:
    """Lines to stdout (the launcher's own to stderr) under one lock, and
    on a terminal one progress line kept below them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.tty = sys.stdout.isatty()
        self.progress = ""

    def line(self, text: str, err: bool = False) -> None:
        with self.lock:
            if self.progress:
                sys.stdout.write("\r\033[K")
                sys.stdout.flush()
            out = sys.stderr if err else sys.stdout
            out.write(text + "\n")
            out.flush()
            if self.progress:
                sys.stdout.write(self.progress)
                sys.stdout.flush()

    def set_progress(self, text: str) -> None:
        if not self.tty:
            return
        with self.lock:
            self.progress = text
            sys.stdout.write("\r\033[K" + text)
            sys.stdout.flush()


def level(line: str) -> str:
    """The level of a zshard log line ('TIME LEVEL message ...' or JSON);
    '' for any other line."""
    m = re.match(r"\d{4}-\d\d-\d\dT\S+ (\w+) ", line)
    if m:
        return m.group(1)
    m = re.match(r'\{.*"level":\s*"(\w+)"', line)
    return m.group(1) if m else ""


def _die_with_parent() -> None:
    """In a child before exec: SIGKILL when the launcher dies (Linux)."""
    if _LIBC is not None:
        _LIBC.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


try:
    _LIBC: Optional[ctypes.CDLL] = (ctypes.CDLL(None, use_errno=True)
                                    if sys.platform == "linux" else None)
except OSError:  # pragma: no cover
    _LIBC = None


class Child:
    """One started process: its output goes line by line to its log file
    and, when `show` says so, to the console with `prefix`."""

    def __init__(self, name: str, argv: List[str], console: Console,
                 log: str, show: Callable[[str], Optional[str]], env: Optional[Dict[str, str]] = None
                 ) -> None:
        self.name, self.console, self.show = name, console, show
        self.last = ""
        self.lines: "collections.deque[str]" = collections.deque(maxlen=50)
        self.log = open(log, "a")
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, env=env, start_new_session=True,
            preexec_fn=_die_with_parent if _LIBC is not None else None)
        self.thread = threading.Thread(target=self._pump, daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            text = raw.decode("utf-8", "replace").rstrip("\n")
            self.log.write(text + "\n")
            self.log.flush()
            if text.strip():
                self.last = text
                self.lines.append(text)
            prefix = self.show(text)
            if prefix:
                self.console.line("[%s] %s" % (prefix, text))

    def running(self) -> bool:
        return self.proc.poll() is None

    def finish(self) -> None:
        """After the process exited: the rest of its output, its log."""
        self.thread.join(5)
        if not self.thread.is_alive():
            self.log.close()


def stop(children: List[Child], wait_s: float,
         interrupted: Callable[[], bool]) -> None:
    """SIGTERM to each child still running, up to `wait_s` seconds for
    them to exit (cut short when `interrupted()` turns true), then
    SIGKILL; waits for all of them."""
    for c in children:
        if c.running():
            try:
                c.proc.send_signal(signal.SIGTERM)
            except OSError:
                pass
    deadline = time.monotonic() + wait_s
    while (any(c.running() for c in children) and
           time.monotonic() < deadline and not interrupted()):
        time.sleep(0.05)
    for c in children:
        if c.running():
            c.proc.kill()
        c.proc.wait()
        c.finish()
