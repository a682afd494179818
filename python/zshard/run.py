"""zshard-run: a training job on this machine with one command.

    python3 -m zshard.run --nproc N [--spares S] [--instances I] --job JOB
        [--state-dir DIR] [--bin-dir DIR] [--max-trainer-restarts R]
        [--tee-all] TRAIN.py [ARGS...]

starts an embedded zshard-coordinator on loopback (its SQLite store under
DIR/store), N + S zshard-worker daemons w0.. each with a trainer socket,
and one trainer per daemon: `python3 TRAIN.py ARGS` (this interpreter) with
ZSHARD_TRAINER_SOCKET (its daemon's socket, which DistributedOptimizer
attaches to by default), ZSHARD_LOCAL_RANK (the daemon's index, not its
rank, which re-shards change), ZSHARD_COORDINATOR (its address) and
PYTHONPATH (this package first).

Output: each trainer's lines prefixed [wI]; the daemons' and the
coordinator's warnings and errors prefixed [wI:worker] and [coordinator]
(everything with --tee-all); the job's notable events as [event] lines; on
a terminal, one progress line. Every child's whole output is in DIR/NAME.log.

Exit status: 0 when the job finished (the coordinator's `finished` event),
1 with one line when it failed, 2 for bad flags, a bad job or a missing
binary, 130 on SIGINT or SIGTERM. Whatever it started is stopped on every
path: trainers, then daemons (SIGTERM, a bounded wait, SIGKILL), then the
coordinator. A trainer that exits non-zero while its daemon runs is started
again, up to --max-trainer-restarts times; one more failure fails the run.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import (Any, Callable, Deque, Dict, List, NoReturn, Optional,
                    Set, Tuple)

from zshard._children import Child, Console, level, stop

__all__ = ["main", "find_binaries", "make_job"]

BINARIES = ("zshard-coordinator", "zshard-worker", "zshardctl")
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
# Events worth a line of their own (the rest: zshardctl events).
SHOWN_EVENTS = ("dead", "excluded", "lost", "failed", "finished",
                "trainer_lost", "trainer_refused")
TRAINER_STOP_S, WORKER_STOP_S, COORDINATOR_STOP_S = 5.0, 10.0, 5.0


class Usage(Exception):
    """A bad flag, job or binary: one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise Usage(message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="zshard-run", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="""\
Trains TRAIN.py through zshard on this machine: an embedded coordinator
(loopback), N + S worker daemons w0.. and one trainer per daemon, run as
`python3 TRAIN.py ARGS` (this interpreter) with ZSHARD_TRAINER_SOCKET (its
daemon's socket), ZSHARD_LOCAL_RANK (the daemon's index) and PYTHONPATH
(this package first).""",
        epilog="""\
The job file is used as it is but for world.min and world.max, both set
to N, and world.instances, set to I when --instances is given; its
workload must be of kind 'trainer'.

Output: trainers' lines prefixed [wI]; the coordinator's and the daemons'
warnings and errors prefixed [coordinator] and [wI:worker] (every line
with --tee-all); notable events as [event] lines; on a terminal, a
progress line. Every child's whole output is in DIR/*.log.

Binaries: --bin-dir, else $ZSHARD_BIN_DIR, else build/bin of the checkout
this package is in, else PATH.

Exit status: 0 the job finished, 1 it failed (one line says why), 2 bad
usage, a bad job or a missing binary, 130 SIGINT or SIGTERM.""")
    p.add_argument("--nproc", type=int, required=True, metavar="N",
                   help="ranks: the job's world (world.min = world.max = N)")
    p.add_argument("--spares", type=int, default=0, metavar="S",
                   help="spare daemons (with trainers) that take over a lost "
                   "rank (default 0)")
    p.add_argument("--instances", type=int, default=None, metavar="I",
                   help="world.instances (default: the job file's)")
    p.add_argument("--job", required=True, metavar="JOB.json",
                   help="the job spec, with its model (python -m zshard.spec)")
    p.add_argument("--state-dir", metavar="DIR",
                   help="the coordinator's store, the logs and the sockets, "
                   "kept; a new one per run (default: a temporary directory, "
                   "removed at the end)")
    p.add_argument("--bin-dir", metavar="DIR",
                   help="where zshard-coordinator, zshard-worker and "
                   "zshardctl are")
    p.add_argument("--max-trainer-restarts", type=int, default=3, metavar="R",
                   help="restarts of a trainer that exits non-zero while its "
                   "daemon runs (default 3)")
    p.add_argument("--tee-all", action="store_true",
                   help="print every line of the coordinator and the daemons, "
                   "not only warnings and errors")
    p.add_argument("script", metavar="TRAIN.py", help="the training script")
    p.add_argument("script_args", nargs=argparse.REMAINDER, metavar="ARGS",
                   help="its arguments")
    return p


def parse_args(argv: List[str]) -> argparse.Namespace:
    """The flags; raises Usage for a bad one."""
    args = _parser().parse_args(argv)
    if args.nproc < 1:
        raise Usage("--nproc must be at least 1, got %d" % args.nproc)
    if args.spares < 0:
        raise Usage("--spares must be at least 0, got %d" % args.spares)
    if args.instances is not None and args.instances < 1:
        raise Usage("--instances must be at least 1, got %d" % args.instances)
    if args.max_trainer_restarts < 0:
        raise Usage("--max-trainer-restarts must be at least 0")
    if not os.path.isfile(args.script):
        raise Usage("no training script %s" % args.script)
    return args


def find_binaries(bin_dir: Optional[str] = None) -> Dict[str, str]:
    """The paths of BINARIES: in `bin_dir`, else $ZSHARD_BIN_DIR, else the
    build/bin of the checkout this package is in, else on PATH.

    Raises:
        Usage: naming the first one that is missing.
    """
    here = os.path.dirname(os.path.abspath(__file__))
    dirs = [bin_dir] if bin_dir else (
        [os.environ["ZSHARD_BIN_DIR"]] if os.environ.get("ZSHARD_BIN_DIR")
        else [os.path.join(here, "..", "..", "build", "bin"), None])
    found = {}
    for name in BINARIES:
        for d in dirs:
            path = (shutil.which(name) if d is None else
                    os.path.join(d, name))
            if path and os.access(path, os.X_OK):
                found[name] = os.path.abspath(path)
                break
        else:
            where = ("in %s" % dirs[0] if len(dirs) == 1 else
                     "in %s or on PATH" % os.path.normpath(dirs[0]))
            raise Usage("no %s %s (give --bin-dir or set ZSHARD_BIN_DIR)" %
                        (name, where))
    return found


def make_job(path: str, nproc: int, instances: Optional[int]) -> Dict[str, Any]:
    """The job of the file `path` with world.min = world.max = `nproc` and
    world.instances = `instances` when given.

    Raises:
        Usage: the file cannot be read, is not a JSON object, or its
            workload is not of kind 'trainer'.
    """
    try:
        with open(path) as f:
            job = json.load(f)
    except (OSError, ValueError) as e:
        raise Usage("cannot read the job %s: %s" % (path, e)) from None
    if not isinstance(job, dict):
        raise Usage("the job %s is not a JSON object" % path)
    kind = (job.get("workload") or {}).get("kind")
    if kind != "trainer":
        raise Usage("the job %s's workload is of kind %r; zshard-run runs "
                    "trainers (kind 'trainer')" % (path, kind))
    world = dict(job.get("world") or {}, min=nproc, max=nproc)
    if instances is not None:
        world["instances"] = instances
    return dict(job, world=world)


class Launcher:
    """One run of zshard-run: start(), then loop() until the job ends, then
    stop(); see the module's docstring."""

    def __init__(self, args: argparse.Namespace, bins: Dict[str, str],
                 job: Dict[str, Any], console: Console) -> None:
        self.args, self.bins, self.job, self.console = args, bins, job, console
        self.keep = bool(args.state_dir)
        self.dir = (os.path.abspath(args.state_dir) if args.state_dir else
                    tempfile.mkdtemp(prefix="zshard-run-"))
        os.makedirs(self.dir, exist_ok=True)
        self.sock_dir = self.dir
        if len(os.path.join(self.dir, "w%d.sock" % 10**6)) > 100:
            self.sock_dir = tempfile.mkdtemp(prefix="zshard-run-")
        self.signals = 0
        self.coordinator: Optional[Child] = None
        self.address: Optional[str] = None
        self.metrics_port: Optional[int] = None
        self.workers: List[Child] = []
        self.trainers: List[Optional[Child]] = []
        self.restarts: List[int] = []
        self.exited_at: Dict[int, float] = {}
        self.attached: Set[int] = set()  # pids of trainers that attached
        self.seen_seq = 0
        self.finished = False
        self.failure: Optional[str] = None
        self.steps = int(job["workload"].get("steps", 0))
        self.history: Deque[Tuple[float, int]] = collections.deque()

    # -- output -------------------------------------------------------------

    def say(self, text: str) -> None:
        self.console.line("zshard-run: " + text, err=True)

    def _daemon_filter(self, prefix: str) -> Callable[[str], Optional[str]]:
        """What a daemon's line is shown with: `prefix` for its warnings,
        errors and lines that are not log lines (all with --tee-all), else
        None. Notes the coordinator's addresses and attached trainers."""
        def show(line: str) -> Optional[str]:
            lvl = level(line)
            m = re.search(r"(coordinator|metrics) listening on "
                          r"(?:port )?([0-9.:]+)", line)
            if prefix == "coordinator" and m and not lvl:
                if m.group(1) == "metrics":
                    self.metrics_port = int(m.group(2))
                else:
                    self.address = m.group(2)
            attached = re.search(r" trainer attached .*\bpid=(\d+)", line)
            if attached:
                self.attached.add(int(attached.group(1)))
            if prefix == "coordinator" and self.address is None and not lvl:
                return None  # a refusal at start: the one line of main()
            if self.args.tee_all or lvl in ("warning", "error") or (
                    not lvl and not m and line.strip()):
                return prefix
            return None
        return show

    # -- starting -----------------------------------------------------------

    def start(self) -> None:
        """The coordinator, then each daemon with its trainer."""
        path = os.path.join(self.dir, "job.json")
        with open(path, "w") as f:
            json.dump(self.job, f, indent=1)
        self.coordinator = Child(
            "coordinator", [self.bins["zshard-coordinator"], "--job", path,
                            "--listen", "127.0.0.1:0", "--state-dir",
                            os.path.join(self.dir, "store"),
                            "--metrics-listen", "127.0.0.1:0"],
            self.console, os.path.join(self.dir, "coordinator.log"),
            self._daemon_filter("coordinator"))
        deadline = time.monotonic() + 60
        while self.address is None:
            if not self.coordinator.running():
                self.coordinator.finish()
                code = self.coordinator.proc.returncode
                msg = "the coordinator exited with status %d: %s" % (
                    code, self.coordinator.last or "no output")
                if code == EXIT_USAGE:
                    raise Usage(msg)
                raise RuntimeError(msg)
            if self.signals:
                return
            if time.monotonic() > deadline:
                raise RuntimeError("the coordinator did not listen within "
                                   "60 s")
            time.sleep(0.02)
        for i in range(self.args.nproc + self.args.spares):
            name = "w%d" % i
            self.workers.append(Child(
                name, [self.bins["zshard-worker"], "--coordinator",
                       self.address, "--name", name, "--trainer-socket",
                       self.socket(i)], self.console,
                os.path.join(self.dir, name + ".worker.log"),
                self._daemon_filter(name + ":worker")))
            self.trainers.append(None)
            self.restarts.append(0)
            self.start_trainer(i)
        self.say("coordinator %s (pid %d), run directory %s" % (
            self.address, self.coordinator.proc.pid, self.dir))
        self.say("worker pids %s; trainer pids %s" % (
            " ".join("w%d=%d" % (i, w.proc.pid)
                     for i, w in enumerate(self.workers)),
            " ".join("w%d=%d" % (i, t.proc.pid)
                     for i, t in enumerate(self.trainers) if t)))

    def socket(self, i: int) -> str:
        return os.path.join(self.sock_dir, "w%d.sock" % i)

    def start_trainer(self, i: int) -> None:
        package_root = os.path.dirname(os.path.dirname(
            os.path.abspath(__file__)))
        path = [package_root] + [p for p in os.environ.get(
            "PYTHONPATH", "").split(os.pathsep) if p]
        env = dict(os.environ, ZSHARD_TRAINER_SOCKET=self.socket(i),
                   ZSHARD_LOCAL_RANK=str(i), ZSHARD_COORDINATOR=self.address
                   or "", PYTHONPATH=os.pathsep.join(path),
                   PYTHONUNBUFFERED="1")
        self.trainers[i] = Child(
            "trainer-w%d" % i, [sys.executable, self.args.script,
                                *self.args.script_args],
            self.console, os.path.join(self.dir, "w%d.trainer.log" % i),
            lambda line, p="w%d" % i: p, env=env)

    # -- watching -----------------------------------------------------------

    def ctl(self, *command: str) -> Optional[Any]:
        """zshardctl COMMAND --output json, parsed; None when it fails."""
        try:
            out = subprocess.run(
                [self.bins["zshardctl"], "--coordinator", str(self.address),
                 *command, "--output", "json", "--timeout-ms", "3000"],
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

    def poll_events(self) -> None:
        events = self.ctl("events")
        if isinstance(events, dict):
            events = events.get("events")
        for e in events if isinstance(events, list) else []:
            if not isinstance(e, dict) or e.get("seq", 0) <= self.seen_seq:
                continue
            self.seen_seq = e.get("seq", 0)
            kind, reason = e.get("kind"), e.get("reason", "")
            if kind in SHOWN_EVENTS:
                self.console.line("[event] %s: %s" % (kind, reason))
            if kind == "finished":
                self.finished = True
            elif kind in ("lost", "failed") and self.failure is None:
                self.failure = "the job failed (%s): %s" % (kind, reason)

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

    def poll_progress(self) -> None:
        """The progress line: step of total, loss, steps/s, ETA, world."""
        status = self.ctl("status")
        if not isinstance(status, dict):
            return
        members = status.get("members") or []
        step = max([m.get("step", 0) for m in members
                    if m.get("rank", -1) >= 0] or [0])
        now = time.monotonic()
        self.history.append((now, step))
        while len(self.history) > 2 and now - self.history[0][0] > 10:
            self.history.popleft()
        t0, s0 = self.history[0]
        rate = (step - s0) / (now - t0) if now > t0 else 0.0
        text = "step %d/%d" % (step, self.steps)
        loss = self.loss()
        if loss is not None:
            text += "  loss %.4f" % loss
        if rate > 0:
            eta = int(max(0, self.steps - step) / rate)
            text += "  %.1f steps/s  ETA %d:%02d:%02d" % (
                rate, eta // 3600, eta // 60 % 60, eta % 60)
        spares = sum(1 for m in members if m.get("state") == "SPARE")
        text += "  world %s (%d spare%s) %s" % (
            status.get("world", "?"), spares, "" if spares == 1 else "s",
            str(status.get("state", "")).lower())
        self.console.set_progress(text)

    def check_trainers(self) -> None:
        """Restarts a trainer that exited non-zero while its daemon runs
        (a second later, so that a daemon that just died is seen dead)."""
        for i, t in enumerate(self.trainers):
            if t is None or t.running():
                continue
            code = t.proc.returncode
            if code == 0 or self.finished or not self.workers[i].running():
                self.exited_at.pop(i, None)
                continue
            first = self.exited_at.setdefault(i, time.monotonic())
            if time.monotonic() - first < 1.0:
                continue
            del self.exited_at[i]
            t.finish()
            if self.restarts[i] >= self.args.max_trainer_restarts:
                self.trainers[i] = None
                self.failure = ("the trainer of w%d exited with status %d "
                                "%d time(s) (--max-trainer-restarts %d): %s"
                                % (i, code, self.restarts[i] + 1,
                                   self.args.max_trainer_restarts,
                                   t.last or "no output"))
                return
            self.restarts[i] += 1
            self.say("the trainer of w%d exited with status %d; starting it "
                     "again (%d of %d)" % (i, code, self.restarts[i],
                                           self.args.max_trainer_restarts))
            self.start_trainer(i)

    def stop_unattached(self) -> None:
        """After the job finished: stops the trainers whose daemon exited
        before they attached (late starters; nothing of theirs to keep)."""
        for i, t in enumerate(self.trainers):
            if t and t.running() and not self.workers[i].running():
                self.workers[i].finish()
                if t.proc.pid not in self.attached:
                    t.proc.terminate()
                    t.proc.wait()
                    t.finish()
                    self.trainers[i] = None

    def loop(self) -> int:
        """Watches the job until it ends; returns the exit status."""
        last_poll = 0.0
        while not self.signals:
            assert self.coordinator is not None
            now = time.monotonic()
            if now - last_poll >= 1.0:
                last_poll = now
                self.poll_events()
                if self.console.tty and not self.finished:
                    self.poll_progress()
            if self.failure:
                self.say(self.failure)
                return EXIT_FAILED
            if not self.coordinator.running():
                self.coordinator.finish()
                self.say("the coordinator exited with status %d: %s" % (
                    self.coordinator.proc.returncode, self.coordinator.last))
                return EXIT_FAILED
            self.check_trainers()
            if self.finished:
                self.stop_unattached()
            trainers_done = all(t is None or not t.running()
                                for t in self.trainers)
            workers_done = all(not w.running() for w in self.workers)
            if self.finished and trainers_done:
                for i, t in enumerate(self.trainers):
                    if t is not None and t.proc.returncode != 0:
                        self.say("the trainer of w%d exited with status %d; "
                                 "its daemon exited with status %d" % (
                                     i, t.proc.returncode,
                                     self.workers[i].proc.returncode))
                return EXIT_OK
            if workers_done and trainers_done and not self.exited_at:
                self.poll_events()
                if self.finished:
                    continue
                if self.failure:
                    self.say(self.failure)
                else:
                    self.say("every worker daemon exited before the job "
                             "finished: %s" % "; ".join(
                                 "w%d status %d: %s" % (
                                     i, w.proc.returncode, w.last)
                                 for i, w in enumerate(self.workers)))
                return EXIT_FAILED
            time.sleep(0.1)
        return EXIT_INTERRUPTED

    # -- stopping -----------------------------------------------------------

    def _stop(self, children: List[Child], wait_s: float) -> None:
        signals = self.signals  # a further signal cuts the wait short
        stop([c for c in children if c is not None], wait_s,
             lambda: self.signals != signals)

    def stop(self) -> None:
        """Trainers, then daemons, then the coordinator; then the
        temporary directories."""
        self.console.set_progress("")
        self._stop([t for t in self.trainers if t], TRAINER_STOP_S)
        self._stop(self.workers, WORKER_STOP_S)
        if self.coordinator is not None:
            self._stop([self.coordinator], COORDINATOR_STOP_S)
        if self.sock_dir != self.dir:
            shutil.rmtree(self.sock_dir, ignore_errors=True)
        if not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)


def main(argv: Optional[List[str]] = None) -> int:
    """zshard-run's command line; returns the exit status."""
    console = Console()
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
        bins = find_binaries(args.bin_dir)
        job = make_job(args.job, args.nproc, args.instances)
    except Usage as e:
        print("zshard-run: %s" % e, file=sys.stderr)
        return EXIT_USAGE
    try:
        launcher = Launcher(args, bins, job, console)
    except OSError as e:
        print("zshard-run: cannot make the run directory: %s" % e,
              file=sys.stderr)
        return EXIT_USAGE

    def on_signal(signum: int, frame: Any) -> None:
        launcher.signals += 1

    old = {s: signal.signal(s, on_signal)
           for s in (signal.SIGINT, signal.SIGTERM)}
    code = EXIT_FAILED
    try:
        launcher.start()
        code = launcher.loop()
    except Usage as e:
        launcher.say(str(e))
        code = EXIT_USAGE
    except (RuntimeError, OSError) as e:
        launcher.say(str(e))
        code = EXIT_FAILED
    finally:
        if launcher.signals:
            code = EXIT_INTERRUPTED
            launcher.say("interrupted; stopping everything")
        launcher.stop()
        for s, handler in old.items():
            signal.signal(s, handler)
    return code


if __name__ == "__main__":
    sys.exit(main())
