"""A local zshard cluster for the Python tests: a coordinator on loopback,
worker daemons with trainer sockets, trainer processes; real processes
whose logs stay in one directory."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHONPATH = os.pathsep.join([os.path.join(HERE, "..", "..", "python"), HERE])


def bin_path(name):
    """build/bin/NAME, from ZSHARD_BIN_DIR (ctest sets it)."""
    return os.path.join(os.environ["ZSHARD_BIN_DIR"], name)


class Cluster:
    """Processes of one job; stop() kills whatever is left."""

    def __init__(self, job):
        self.dir = tempfile.mkdtemp(prefix="zshard-pytest-")
        self.procs = {}
        self.files = []
        job_path = os.path.join(self.dir, "job.json")
        with open(job_path, "w") as f:
            json.dump(job, f)
        self.procs["coordinator"] = subprocess.Popen(
            [bin_path("zshard-coordinator"), "--job", job_path, "--listen",
             "127.0.0.1:0", "--state-dir", os.path.join(self.dir, "state")],
            stdout=self._open("coordinator.out"),
            stderr=self._open("coordinator.log"))
        self.address = self._wait_for_address()

    def _open(self, name):
        f = open(os.path.join(self.dir, name), "w")
        self.files.append(f)
        return f

    def log(self, name):
        return os.path.join(self.dir, name + ".log")

    def _wait_for_address(self):
        path = os.path.join(self.dir, "coordinator.out")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with open(path) as f:
                m = re.search(r"listening on ([0-9.:]+)", f.read())
            if m:
                return m.group(1)
            time.sleep(0.05)
        raise RuntimeError("the coordinator did not start; see %s" %
                           self.log("coordinator"))

    def read_log(self, name):
        with open(self.log(name)) as f:
            return f.read()

    def socket(self, name):
        return os.path.join(self.dir, name + ".sock")

    def start_worker(self, name, *extra):
        self.procs[name] = subprocess.Popen(
            [bin_path("zshard-worker"), "--coordinator", self.address,
             "--name", name, "--trainer-socket", self.socket(name),
             "--labels", "node=%s" % name, *extra],
            stdout=subprocess.DEVNULL, stderr=self._open(name + ".log"))

    def start_trainer(self, worker, out, tag="", extra=()):
        """tests/python/trainer_main.py on `worker`'s socket, with the
        `extra` flags; returns its name."""
        name = "trainer-%s%s" % (worker, tag)
        env = dict(os.environ, PYTHONPATH=PYTHONPATH,
                   PYTHONDONTWRITEBYTECODE="1")
        self.procs[name] = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "trainer_main.py"),
             self.socket(worker), out, "--log",
             os.path.join(self.dir, name + ".steps")] + list(extra),
            env=env, stdout=subprocess.DEVNULL,
            stderr=self._open(name + ".log"))
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
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
        for p in self.procs.values():
            p.wait()
        for f in self.files:
            f.close()
        if keep or os.environ.get("ZSHARD_KEEP_TEST_DIRS") == "1":
            print("logs kept in %s" % self.dir)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)
