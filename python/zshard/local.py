"""Local zshard processes on this machine: a coordinator on loopback and
worker daemons, each a real process whose stdout and stderr go to files in
one directory. For tests, benchmarks and trying zshard on one machine; a
cluster runs the same binaries under Kubernetes (deploy/k8s)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from typing import IO, Any, Dict, List, Mapping, Optional, Sequence, Union

__all__ = ["LocalProcesses"]


class LocalProcesses:
    """The processes of one local job, in a fresh temporary directory;
    stop() kills whatever is left."""

    def __init__(self, bin_dir: str, prefix: str = "zshard-local-") -> None:
        """Args:
            bin_dir: where zshard-coordinator and zshard-worker are.
            prefix: the temporary directory's name begins with this.
        """
        self.bin_dir = bin_dir
        self.dir = tempfile.mkdtemp(prefix=prefix)
        self.procs: Dict[str, subprocess.Popen] = {}
        self.files: List[IO[str]] = []
        self.address: Optional[str] = None

    def binary(self, name: str) -> str:
        """The path of the binary `name` in bin_dir."""
        return os.path.join(self.bin_dir, name)

    def log(self, name: str) -> str:
        """The file that `name`'s stderr goes to."""
        return os.path.join(self.dir, name + ".log")

    def read_log(self, name: str) -> str:
        """What `name` has written to its stderr so far."""
        with open(self.log(name)) as f:
            return f.read()

    def open(self, name: str) -> IO[str]:
        """A file in the directory, open for writing until stop()."""
        f = open(os.path.join(self.dir, name), "w")
        self.files.append(f)
        return f

    def spawn(self, name: str, argv: Sequence[str],
              stdout: Optional[str] = None,
              env: Optional[Mapping[str, str]] = None) -> subprocess.Popen:
        """Starts `argv` as `name`: stderr to log(name), stdout to the file
        `stdout` in the directory (discarded when None), with the
        environment `env` (default this process's).

        Returns:
            The process, also in procs[name].
        """
        out: Union[int, IO[str]] = (self.open(stdout) if stdout else
                                    subprocess.DEVNULL)
        self.procs[name] = subprocess.Popen(
            argv, stdout=out, stderr=self.open(name + ".log"), env=env)
        return self.procs[name]

    def start_coordinator(self, job: Dict[str, Any], timeout: float = 60,
                          extra: Sequence[str] = ()) -> str:
        """Writes `job` (a dict) as job.json and starts zshard-coordinator
        on a free loopback port with its state in the directory, with the
        flags `extra`.

        Returns:
            Its address (HOST:PORT) once it listens.

        Raises:
            RuntimeError: naming its log, when it exits or does not listen
                within `timeout` seconds.
        """
        path = os.path.join(self.dir, "job.json")
        with open(path, "w") as f:
            json.dump(job, f)
        proc = self.spawn("coordinator", [
            self.binary("zshard-coordinator"), "--job", path, "--listen",
            "127.0.0.1:0", "--state-dir", os.path.join(self.dir, "state"),
            *extra], stdout="coordinator.out")
        out = os.path.join(self.dir, "coordinator.out")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with open(out) as f:
                m = re.search(r"listening on ([0-9.:]+)", f.read())
            if m:
                self.address = m.group(1)
                return self.address
            if proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError("the coordinator did not start; see %s" %
                           self.log("coordinator"))

    def stop(self, keep: bool = False) -> Optional[str]:
        """Kills what is left and removes the directory, unless `keep`
        (to read the logs); returns the directory when kept."""
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
        for p in self.procs.values():
            p.wait()
        for f in self.files:
            f.close()
        if keep:
            return self.dir
        shutil.rmtree(self.dir, ignore_errors=True)
        return None
