"""zshard-run: a training job on this machine with one command.

    python3 -m zshard.run --nproc N [--spares S] [--world W] [--instances I]
        (--job JOB | --steps T --global-batch B --lr LR [--schedule KIND]
                     [--warmup-steps K] [--min-lr LR] [--weight-decay WD]
                     [--clip-grad-norm C])
        [--listen HOST:PORT] [common flags] TRAIN.py [ARGS...]
    python3 -m zshard.run --coordinator HOST:PORT[,HOST:PORT...] --nproc N
        [--spares S] [common flags] TRAIN.py [ARGS...]

    common flags: [--state-dir DIR] [--bin-dir DIR] [--comm-host HOST]
        [--node-name NAME] [--max-trainer-restarts R] [--tee-all]

The first form starts an embedded zshard-coordinator (on loopback unless
--listen says otherwise; its SQLite store under DIR/store) with the job of
the file, or with a job built from --steps and its flags whose model the
coordinator takes from the first trainer that attaches; then N + S
zshard-worker daemons w0.. each with a trainer socket, and one trainer per
daemon: `python3 TRAIN.py ARGS` (this interpreter) with
ZSHARD_TRAINER_SOCKET (its daemon's socket, which DistributedOptimizer
attaches to by default), ZSHARD_LOCAL_RANK (the daemon's index, not its
rank, which re-shards change), ZSHARD_COORDINATOR (its address) and
PYTHONPATH (this package first). The second form is one node of a
multi-node job: no coordinator, only the N + S daemons (named NODE-wI,
NODE from --node-name or this host's name) and their trainers, joining the
running job of that coordinator; --job, --steps and the job's other flags
are refused with it.

Output: each trainer's lines prefixed [wI]; the daemons' and the
coordinator's warnings and errors prefixed [wI:worker] and [coordinator]
(everything with --tee-all); the job's notable events as [event] lines; on
a terminal, one progress line. DIR holds every child's whole output
(DIR/NAME.log), DIR/processes.json (every pid, socket and log, rewritten
at start, on each trainer restart and at the end) and DIR/events.jsonl;
the layout is in zshard._run_dir.

Exit status: 0 when the job finished (the coordinator's `finished` event;
with --coordinator, a daemon that exited as the job was done), 1 with one
line when it failed (with --coordinator: the reason a daemon was given), 2
for bad flags, a bad job or a missing binary, 130 on SIGINT or SIGTERM.
Whatever it started is stopped on every path: trainers, then daemons
(SIGTERM, a bounded wait, SIGKILL), then the coordinator. A trainer that
exits non-zero while its daemon runs is started again, up to
--max-trainer-restarts times; one more failure fails the run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Set

from zshard._children import Child, Console, level, stop
from zshard._run_dir import RunDir
from zshard._run_flags import Usage, coordinator_list, parse_args
from zshard._run_job import build_job, make_job
from zshard._run_watch import CoordinatorView

__all__ = ["main", "find_binaries", "make_job", "build_job"]

BINARIES = ("zshard-coordinator", "zshard-worker", "zshardctl")
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
# Events worth a line of their own (the rest: zshardctl events).
SHOWN_EVENTS = ("dead", "excluded", "lost", "failed", "finished",
                "trainer_lost", "trainer_refused")
TRAINER_STOP_S, WORKER_STOP_S, COORDINATOR_STOP_S = 5.0, 10.0, 5.0
# How long the embedded coordinator outlives the job's end while daemons
# of other nodes have not left yet (they must hear that the job is done).
REMOTE_LEAVE_S = 20.0
_WILDCARD = ("0.0.0.0", "::", "[::]", "")
_LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


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


def route_address(host: str, port: int) -> Optional[str]:
    """This machine's address on the route to HOST:PORT (a UDP socket's
    own address once connected: nothing is sent); None for loopback or
    when there is no route."""
    host = host.strip("[]")
    if host in _LOOPBACK:
        return None
    try:
        info = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0]
        with socket.socket(info[0], socket.SOCK_DGRAM) as s:
            s.connect(info[4])
            own = s.getsockname()[0]
    except OSError:
        return None
    return None if own.startswith("127.") or own == "::1" else own


def split_host(address: str) -> tuple:
    host, _, port = address.rpartition(":")
    return host, int(port)


class Launcher:
    """One run of zshard-run: start(), then loop() until the job ends, then
    stop(); see the module's docstring."""

    def __init__(self, args: argparse.Namespace, bins: Dict[str, str],
                 job: Optional[Dict[str, Any]], console: Console) -> None:
        self.args, self.bins, self.job, self.console = args, bins, job, console
        self.joining = args.coordinator is not None
        self.run_dir = RunDir(args.state_dir)
        self.dir = self.run_dir.dir
        self.node: Optional[str] = args.node_name or (
            socket.gethostname().split(".")[0] if self.joining else None)
        self.signals = 0
        self.coordinator: Optional[Child] = None
        self.address: Optional[str] = args.coordinator
        self.view: Optional[CoordinatorView] = None
        self.metrics_port: Optional[int] = None
        self.workers: List[Child] = []
        self.trainers: List[Optional[Child]] = []
        self.restarts: List[int] = []
        self.exited_at: Dict[int, float] = {}
        self.attached: Set[int] = set()  # pids of trainers that attached
        self.done: Set[int] = set()  # daemons that exited as the job was done
        self.job_failed: Optional[str] = None  # a daemon's "job failed" reason
        self.first_poll = True
        self.others_checked = 0.0
        self.finished = False
        self.failure: Optional[str] = None
        self.steps = int(job["workload"].get("steps", 0)) if job else 0
        self.world = int(job["world"]["max"]) if job else 0

    # -- output -------------------------------------------------------------

    def say(self, text: str) -> None:
        self.console.line("zshard-run: " + text, err=True)

    def _daemon_filter(self, prefix: str, index: Optional[int] = None
                       ) -> Callable[[str], Optional[str]]:
        """What a daemon's line is shown with: `prefix` for its warnings,
        errors and lines that are not log lines (all with --tee-all), else
        None. Notes the coordinator's addresses, attached trainers and how
        each daemon ended."""
        def show(line: str) -> Optional[str]:
            lvl = level(line)
            m = re.search(r"(coordinator|metrics) listening on "
                          r"(?:port )?([0-9A-Za-z.:\[\]]+)", line)
            if index is None and m and not lvl:
                if m.group(1) == "metrics":
                    self.metrics_port = int(m.group(2))
                else:
                    host, port = split_host(m.group(2))
                    self.address = "%s:%d" % (
                        "127.0.0.1" if host in _WILDCARD else host, port)
            attached = re.search(r" trainer attached .*\bpid=(\d+)", line)
            if attached:
                self.attached.add(int(attached.group(1)))
            if index is not None and lvl:
                if re.search(r" job done, exiting\b", line):
                    self.done.add(index)
                failed = re.search(r" training failed, exiting .*?\berror="
                                   r"job failed: (.*)$", line)
                if failed and self.job_failed is None:
                    self.job_failed = "%s (%s)" % (failed.group(1),
                                                   self.name(index))
            if index is None and self.address is None and not lvl:
                return None  # a refusal at start: the one line of main()
            if self.args.tee_all or lvl in ("warning", "error") or (
                    not lvl and not m and line.strip()):
                return prefix
            return None
        return show

    def name(self, i: int) -> str:
        """Daemon i's member name."""
        return "%s-w%d" % (self.node, i) if self.node else "w%d" % i

    # -- starting -----------------------------------------------------------

    def start_coordinator(self) -> None:
        """The embedded coordinator; returns once it listens."""
        path = self.run_dir.path("job.json")
        with open(path, "w") as f:
            json.dump(self.job, f, indent=1)
        self.coordinator = Child(
            "coordinator", [self.bins["zshard-coordinator"], "--job", path,
                            "--listen", self.args.listen or "127.0.0.1:0",
                            "--state-dir", self.run_dir.path("store"),
                            "--metrics-listen", "127.0.0.1:0",
                            *(["--init-from",
                               os.path.abspath(self.args.init_from)]
                              if self.args.init_from else [])],
            self.console, self.run_dir.path("coordinator.log"),
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

    def comm_host(self) -> Optional[str]:
        """--comm-host, else this machine's address toward the (first)
        coordinator, or the --listen host; None: the daemons' default."""
        if self.args.comm_host:
            return self.args.comm_host
        if self.joining:
            return route_address(*split_host(
                coordinator_list(self.args.coordinator)[0]))
        if self.args.listen:
            host, _ = split_host(self.args.listen)
            if host in _WILDCARD:
                return route_address("192.0.2.1", 9)  # no packet is sent
            return None if host.strip("[]") in _LOOPBACK else host
        return None

    def start(self) -> None:
        """The coordinator (unless joining), then each daemon with its
        trainer; then DIR/processes.json."""
        if not self.joining:
            self.start_coordinator()
            if self.signals:
                return
        assert self.address is not None
        self.view = CoordinatorView(self.bins["zshardctl"], self.address)
        extra: List[str] = []
        host = self.comm_host()
        if host:
            extra += ["--comm-host", host]
        if self.node:
            extra += ["--labels", "node=%s" % self.node]
        for i in range(self.args.nproc + self.args.spares):
            self.workers.append(Child(
                "w%d" % i, [self.bins["zshard-worker"], "--coordinator",
                            self.address, "--name", self.name(i),
                            "--trainer-socket", self.run_dir.socket(i),
                            *extra], self.console,
                self.run_dir.path("w%d.worker.log" % i),
                self._daemon_filter("w%d:worker" % i, i)))
            self.trainers.append(None)
            self.restarts.append(0)
            self.start_trainer(i)
        if self.coordinator is not None:
            self.say("coordinator %s (pid %d), run directory %s" % (
                self.address, self.coordinator.proc.pid, self.dir))
        else:
            self.say("joining the job of coordinator %s as node %s, run "
                     "directory %s" % (self.address, self.node, self.dir))
        self.say("worker pids %s; trainer pids %s" % (
            " ".join("w%d=%d" % (i, w.proc.pid)
                     for i, w in enumerate(self.workers)),
            " ".join("w%d=%d" % (i, t.proc.pid)
                     for i, t in enumerate(self.trainers) if t)))
        self.save()

    def start_trainer(self, i: int) -> None:
        package_root = os.path.dirname(os.path.dirname(
            os.path.abspath(__file__)))
        path = [package_root] + [p for p in os.environ.get(
            "PYTHONPATH", "").split(os.pathsep) if p]
        env = dict(os.environ, ZSHARD_TRAINER_SOCKET=self.run_dir.socket(i),
                   ZSHARD_LOCAL_RANK=str(i), ZSHARD_COORDINATOR=self.address
                   or "", PYTHONPATH=os.pathsep.join(path),
                   PYTHONUNBUFFERED="1")
        self.trainers[i] = Child(
            "trainer-w%d" % i, [sys.executable, self.args.script,
                                *self.args.script_args],
            self.console, self.run_dir.path("w%d.trainer.log" % i),
            lambda line, p="w%d" % i: p, env=env)

    def save(self, exit_status: Optional[int] = None) -> None:
        """DIR/processes.json (its format: zshard._run_dir)."""
        def status(c: Optional[Child]) -> Optional[int]:
            return None if c is None else c.proc.poll()
        c = self.coordinator
        self.run_dir.write_processes({
            "launcher": {"pid": os.getpid()},
            "state": "running" if exit_status is None else "ended",
            "exit_status": exit_status,
            "coordinator": {
                "address": self.address, "embedded": not self.joining,
                "pid": c.proc.pid if c else None,
                "metrics_port": self.metrics_port,
                "log": self.run_dir.path("coordinator.log") if c else None},
            "daemons": [{
                "index": i, "name": self.name(i), "pid": w.proc.pid,
                "socket": self.run_dir.socket(i),
                "log": self.run_dir.path("w%d.worker.log" % i),
                "exit_status": status(w),
                "trainer": {
                    "pid": t.proc.pid if t else None,
                    "restarts": self.restarts[i],
                    "log": self.run_dir.path("w%d.trainer.log" % i),
                    "exit_status": status(t)}}
                for i, (w, t) in enumerate(zip(self.workers,
                                               self.trainers))]})

    # -- watching -----------------------------------------------------------

    def poll_events(self) -> None:
        """New events: the notable ones as [event] lines, all in
        DIR/events.jsonl; an embedded coordinator's `finished`, `lost` and
        `failed` end the run. A joining node starts from the events after
        its first look."""
        assert self.view is not None
        events = self.view.new_events()
        if events is None:
            return
        first, self.first_poll = self.first_poll, False
        if first and self.joining:
            return
        for e in events:
            self.run_dir.add_event(e)
            kind, reason = e.get("kind"), e.get("reason", "")
            if kind in SHOWN_EVENTS:
                self.console.line("[event] %s: %s" % (kind, reason))
            if self.joining:
                continue
            if kind == "finished":
                self.finished = True
            elif kind in ("lost", "failed") and self.failure is None:
                self.failure = "the job failed (%s): %s" % (kind, reason)

    def check_daemons(self) -> None:
        """With --coordinator: the job's end as this node's daemons saw it
        (one exited as the job was done, or was told it failed)."""
        if self.job_failed and self.failure is None:
            self.failure = "the job failed: %s" % self.job_failed
        elif any(not self.workers[i].running() for i in self.done):
            self.finished = True

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
            self.save()

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

    def others(self) -> Optional[List[str]]:
        """The live members of other nodes, by the embedded coordinator's
        status; None when it could not be read."""
        assert self.view is not None
        status = self.view.ctl("status")
        if not isinstance(status, dict):
            return None
        ours = {self.name(i) for i in range(len(self.workers))}
        return [str(m.get("name")) for m in status.get("members") or []
                if m.get("name") not in ours and
                m.get("state") not in ("DEAD", "LEFT")]

    def end(self, code: int) -> int:
        """`code`, once the members of other nodes (--world above --nproc)
        have left the embedded coordinator, at most REMOTE_LEAVE_S later:
        each must hear how the job ended."""
        deadline = time.monotonic() + REMOTE_LEAVE_S
        while (not self.joining and time.monotonic() < deadline and
               not self.signals and self.others()):
            time.sleep(0.2)
        return code

    def ended(self) -> Optional[int]:
        """The exit status once the job ended, else None."""
        if self.failure:
            self.say(self.failure)
            return self.end(EXIT_FAILED)
        if self.coordinator is not None and not self.coordinator.running():
            self.coordinator.finish()
            self.say("the coordinator exited with status %d: %s" % (
                self.coordinator.proc.returncode, self.coordinator.last))
            return EXIT_FAILED
        self.check_trainers()
        if self.joining:
            self.check_daemons()
        if self.finished:
            self.stop_unattached()
        trainers_done = all(t is None or not t.running()
                            for t in self.trainers)
        workers_done = all(not w.running() for w in self.workers)
        if self.finished and trainers_done:
            for i, t in enumerate(self.trainers):
                if t is not None and t.proc.returncode != 0:
                    self.say("the trainer of w%d exited with status %d; "
                             "its daemon exited with status %s" % (
                                 i, t.proc.returncode,
                                 self.workers[i].proc.poll()))
            if self.joining:
                self.poll_events()  # the `finished` event, for the eye
            return self.end(EXIT_OK)
        if not (workers_done and trainers_done and not self.exited_at):
            return None
        if self.joining:
            self.check_daemons()
        else:
            self.poll_events()
            now = time.monotonic()
            if not self.finished and not self.failure and \
                    now - self.others_checked >= 1.0:
                # Ranks on other nodes go on: the coordinator will say.
                self.others_checked = now
                others = self.others()  # None: no answer
                if others or (others is None and self.world > len(
                        self.workers)):
                    return None
                # The others may have left because the job ended: its
                # `lost`, `failed` or `finished` event came before.
                self.poll_events()
            elif not self.finished and not self.failure:
                return None
        if self.finished or self.failure:
            return None  # said at the next round
        self.say("every worker daemon exited before the job finished: %s" %
                 "; ".join("w%d status %d: %s" % (i, w.proc.returncode,
                                                  w.last)
                           for i, w in enumerate(self.workers)))
        return EXIT_FAILED

    def loop(self) -> int:
        """Watches the job until it ends; returns the exit status."""
        last_poll = 0.0
        while not self.signals:
            assert self.view is not None
            now = time.monotonic()
            if now - last_poll >= 1.0:
                last_poll = now
                self.poll_events()
                self.view.metrics_port = self.metrics_port
                if self.console.tty and not self.finished:
                    text = self.view.progress(self.steps)
                    if text:
                        self.console.set_progress(text)
            code = self.ended()
            if code is not None:
                return code
            time.sleep(0.1)
        return EXIT_INTERRUPTED

    # -- stopping -----------------------------------------------------------

    def _stop(self, children: List[Child], wait_s: float) -> None:
        signals = self.signals  # a further signal cuts the wait short
        stop([c for c in children if c is not None], wait_s,
             lambda: self.signals != signals)

    def stop(self, code: int) -> None:
        """Trainers, then daemons, then the coordinator; then
        processes.json's last state and the temporary directories."""
        self.console.set_progress("")
        self._stop([t for t in self.trainers if t], TRAINER_STOP_S)
        self._stop(self.workers, WORKER_STOP_S)
        if self.coordinator is not None:
            self._stop([self.coordinator], COORDINATOR_STOP_S)
        try:
            if self.workers or self.coordinator is not None:
                self.save(code)
        except OSError:
            pass
        self.run_dir.close()


def main(argv: Optional[List[str]] = None) -> int:
    """zshard-run's command line; returns the exit status."""
    console = Console()
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
        bins = find_binaries(args.bin_dir)
        world = args.world if args.world is not None else args.nproc
        job = (None if args.coordinator is not None else
               make_job(args.job, world, args.instances) if args.job else
               build_job(args))
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
        launcher.stop(code)
        for s, handler in old.items():
            signal.signal(s, handler)
    return code


if __name__ == "__main__":
    sys.exit(main())
