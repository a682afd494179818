"""zshard-run's run directory (zshard.run): --state-dir DIR, kept, or a
temporary one removed at the end. What a script finds there:

    DIR/processes.json       every process of the run, rewritten (atomically)
                             at start, on each trainer restart and at the end
    DIR/events.jsonl         the job's events, one JSON object a line, as
                             zshard-run saw them (from its start on)
    DIR/job.json             the job given to the embedded coordinator
    DIR/store/               the embedded coordinator's SQLite store
    DIR/coordinator.log      its whole output
    DIR/wI.worker.log        daemon I's whole output (I = 0.. N + S - 1)
    DIR/wI.trainer.log       its trainer's stdout and stderr (every restart)
    DIR/wI.sock              its trainer socket (in a short temporary
                             directory instead when DIR's path is too long
                             for a Unix socket; processes.json names it)

processes.json:

    {"launcher": {"pid": P},
     "state": "running" | "ended", "exit_status": null | STATUS,
     "coordinator": {"address": "HOST:PORT[,...]", "pid": P | null,
                     "embedded": true | false, "metrics_port": PORT | null,
                     "log": PATH | null},
     "daemons": [{"index": I, "name": NAME, "pid": P, "socket": PATH,
                  "log": PATH, "exit_status": null | STATUS,
                  "trainer": {"pid": P | null, "restarts": R, "log": PATH,
                              "exit_status": null | STATUS}}, ...]}

(`pid` of the coordinator is null with --coordinator: it runs elsewhere; a
trainer's is null once it was given up.)
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import Any, Dict, Optional

__all__ = ["RunDir"]

# A Unix socket's path is at most 107 bytes on Linux.
_SOCKET_PATH_MAX = 100


class RunDir:
    """The run directory: paths in it, processes.json and events.jsonl."""

    def __init__(self, state_dir: Optional[str]) -> None:
        self.keep = bool(state_dir)
        self.dir = (os.path.abspath(state_dir) if state_dir else
                    tempfile.mkdtemp(prefix="zshard-run-"))
        os.makedirs(self.dir, exist_ok=True)
        self.sock_dir = self.dir
        if len(os.path.join(self.dir, "w%d.sock" % 10**6)) > _SOCKET_PATH_MAX:
            self.sock_dir = tempfile.mkdtemp(prefix="zshard-run-")
        self._events = None

    def path(self, name: str) -> str:
        return os.path.join(self.dir, name)

    def socket(self, i: int) -> str:
        return os.path.join(self.sock_dir, "w%d.sock" % i)

    def write_processes(self, record: Dict[str, Any]) -> None:
        """DIR/processes.json, replaced at once (a reader never sees half
        of it)."""
        tmp = self.path(".processes.json.tmp")
        with open(tmp, "w") as f:
            json.dump(record, f, indent=1)
            f.write("\n")
        os.replace(tmp, self.path("processes.json"))

    def add_event(self, event: Dict[str, Any]) -> None:
        """One line of DIR/events.jsonl."""
        if self._events is None:
            self._events = open(self.path("events.jsonl"), "a")
        self._events.write(json.dumps(event) + "\n")
        self._events.flush()

    def close(self) -> None:
        """Closes events.jsonl; removes the socket directory, and DIR
        itself unless it is --state-dir."""
        if self._events is not None:
            self._events.close()
            self._events = None
        if self.sock_dir != self.dir:
            shutil.rmtree(self.sock_dir, ignore_errors=True)
        if not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)
