"""A local zshard cluster for the Python tests: a coordinator on loopback,
worker daemons with trainer sockets, trainer processes; real processes
whose logs stay in one directory."""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHONPATH = os.pathsep.join([os.path.join(HERE, "..", "..", "python"), HERE])
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

from zshard.local import LocalProcesses  # noqa: E402


def bin_path(name):
    """build/bin/NAME, from ZSHARD_BIN_DIR (ctest sets it)."""
    return os.path.join(os.environ["ZSHARD_BIN_DIR"], name)


class Cluster(LocalProcesses):
    """Processes of one job; stop() kills whatever is left."""

    def __init__(self, job):
        super().__init__(os.environ["ZSHARD_BIN_DIR"],
                         prefix="zshard-pytest-")
        self.start_coordinator(job, timeout=30)

    def socket(self, name):
        return os.path.join(self.dir, name + ".sock")

    def start_worker(self, name, *extra):
        self.spawn(name, [
            bin_path("zshard-worker"), "--coordinator", self.address,
            "--name", name, "--trainer-socket", self.socket(name),
            "--labels", "node=%s" % name, *extra])

    def start_trainer(self, worker, out, tag="", extra=()):
        """tests/python/trainer_main.py on `worker`'s socket, with the
        `extra` flags; returns its name."""
        name = "trainer-%s%s" % (worker, tag)
        env = dict(os.environ, PYTHONPATH=PYTHONPATH,
                   PYTHONDONTWRITEBYTECODE="1")
        self.spawn(name, [
            sys.executable, os.path.join(HERE, "trainer_main.py"),
            self.socket(worker), out, "--log",
            os.path.join(self.dir, name + ".steps"), *extra], env=env)
        return name

    def events(self, kind=None):
        """The coordinator's events (zshardctl events --output json), of
        `kind` when given."""
        out = subprocess.run(
            [bin_path("zshardctl"), "--coordinator", self.address, "events",
             "--output", "json"], capture_output=True, text=True, timeout=60,
            check=True).stdout
        try:
            events = json.loads(out)
        except ValueError:
            events = [json.loads(line) for line in out.splitlines() if line]
        if isinstance(events, dict):
            events = events.get("events", [])
        return [e for e in events if kind is None or e["kind"] == kind]

    def wait(self, name, timeout):
        return self.procs[name].wait(timeout=timeout)

    def steps(self, trainer):
        path = os.path.join(self.dir, trainer + ".steps")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]

    def stop(self, keep=False):
        """Kills what is left; removes the directory unless `keep` or
        ZSHARD_KEEP_TEST_DIRS=1 (to read the logs of a failed run)."""
        kept = super().stop(
            keep or os.environ.get("ZSHARD_KEEP_TEST_DIRS") == "1")
        if kept:
            print("logs kept in %s" % kept)
