"""The package itself: what `import zshard` exports (without importing
torch), the error hierarchy, the step result types, and `pip install
./python` offline with the in-tree build backend (python/build_backend):
the installed copy imports and runs `python -m zshard.spec`, and its
console script zshard-run answers --help."""

import base64
import csv
import hashlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
import tarfile
import tempfile
import unittest
import zipfile

import models
import zshard
import zshard.data
import zshard.optimizer
import zshard.spec
import zshard.torch
from zshard import _protocol

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "python"))
BACKEND_DIR = os.path.join(PYTHON_DIR, "build_backend")


def run_python(args, env=None, cwd=None, timeout=300):
    return subprocess.run([sys.executable, *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def package_files(root):
    """The files of the zshard package under `root`, without byte code."""
    found = set()
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, "zshard")):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in filenames:
            path = os.path.relpath(os.path.join(dirpath, name), root)
            found.add(path.replace(os.sep, "/"))
    return found


def load_backend():
    spec = importlib.util.spec_from_file_location(
        "zshard_backend", os.path.join(BACKEND_DIR, "zshard_backend.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class ExportsTest(unittest.TestCase):

    def test_importing_zshard_does_not_import_torch(self):
        env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
        result = run_python(["-c", (
            "import sys, zshard\n"
            "from zshard import StepInfo, StepResult, WorkerLost, "
            "ZshardError\n"
            "import zshard._protocol, zshard.errors, zshard.steps\n"
            "print(sorted(m for m in ('torch', 'zshard.data', "
            "'zshard.optimizer', 'zshard.spec') if m in sys.modules))")], env=env, timeout=120)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.strip(), "[]")

    def test_the_command_runs_without_a_warning(self):
        # zshard.spec is not imported with the package, so runpy finds it
        # unloaded and does not warn.
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([PYTHON_DIR,
                                                           HERE]))
        result = run_python(["-m", "zshard.spec", "models:tied_lm"],
                            env=env, timeout=120)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stderr, "")
        self.assertEqual(json.loads(result.stdout)["name"], "tiedlm")

    def test_one_object_under_every_name(self):
        self.assertEqual(sorted(zshard.__all__), [
            "DistributedOptimizer", "JobFailed", "StepInfo", "StepResult",
            "StepSampler", "WorkerLost", "ZshardError", "model_spec"])
        for name in zshard.__all__:
            self.assertIs(getattr(zshard, name),
                          getattr(zshard.torch, name), name)
        self.assertIs(zshard.DistributedOptimizer,
                      zshard.optimizer.DistributedOptimizer)
        self.assertIs(zshard.model_spec, zshard.spec.model_spec)
        self.assertIs(zshard.StepSampler, zshard.data.StepSampler)
        self.assertIs(_protocol.WorkerLost, zshard.WorkerLost)
        self.assertIs(_protocol.ZshardError, zshard.ZshardError)
        self.assertIn("DistributedOptimizer", dir(zshard))
        with self.assertRaises(AttributeError):
            zshard.no_such_name


class ErrorsTest(unittest.TestCase):

    def test_one_hierarchy(self):
        self.assertTrue(issubclass(zshard.ZshardError, RuntimeError))
        self.assertTrue(issubclass(zshard.WorkerLost, zshard.ZshardError))
        self.assertTrue(issubclass(zshard.WorkerLost, ConnectionError))
        self.assertFalse(issubclass(zshard.ZshardError, ConnectionError))
        # A failed job is no lost connection: the daemon is alive.
        self.assertTrue(issubclass(zshard.JobFailed, zshard.ZshardError))
        self.assertFalse(issubclass(zshard.JobFailed, ConnectionError))

    def test_a_closed_peer_is_worker_lost_for_either_handler(self):
        ours, theirs = socket.socketpair()
        with ours:
            ours.settimeout(10)
            theirs.close()
            with self.assertRaises(ConnectionError) as raised:
                _protocol.recv(ours)
            self.assertIsInstance(raised.exception, zshard.WorkerLost)
            with self.assertRaises(zshard.ZshardError) as raised:
                _protocol.send(ours, {"type": "detach"})
            self.assertIsInstance(raised.exception, zshard.WorkerLost)

    def test_fds_of_a_bad_frame_are_closed(self):
        ours, theirs = socket.socketpair()
        r, w = os.pipe()
        try:
            with ours, theirs:
                ours.settimeout(10)
                theirs.settimeout(10)
                before = set(os.listdir("/proc/self/fd"))
                socket.send_fds(theirs, [b"\0\0\0\0"], [r])
                with self.assertRaisesRegex(zshard.ZshardError,
                                            "a frame of 0 bytes"):
                    _protocol.recv(ours)
                self.assertEqual(set(os.listdir("/proc/self/fd")), before)
        finally:
            os.close(r)
            os.close(w)


class StepTypesTest(unittest.TestCase):

    def test_fields_as_before(self):
        # `steps` (the job's length) and `repeated` came last, then a
        # model-parallel trainer's position and rendezvous, all with
        # defaults: code that builds a StepInfo of five values still works.
        self.assertEqual(zshard.StepInfo._fields,
                         ("step", "rank", "world", "global_batch", "lr",
                          "steps", "repeated", "tp_rank", "pp_rank",
                          "cp_rank", "replica", "model_parallel"))
        self.assertEqual(zshard.StepResult._fields,
                         ("step", "applied", "grad_norm", "loss", "failed"))

    def test_immutable_tuples(self):
        info = zshard.StepInfo(3, 1, 4, 16, 0.01)
        self.assertEqual(info.rank, 1)
        self.assertEqual(info.steps, 0)
        self.assertFalse(info.repeated)
        step, rank, world, batch, lr, steps, repeated = zshard.StepInfo(
            3, 1, 4, 16, 0.01, 300, True)[:7]
        self.assertEqual((step, world, batch, lr, steps, repeated),
                         (3, 4, 16, 0.01, 300, True))
        self.assertEqual(info[7:], (0, 0, 0, 0, None))
        with self.assertRaises(AttributeError):
            info.step = 4
        result = zshard.StepResult(3, True, 2.5, None, False)
        self.assertEqual(result, (3, True, 2.5, None, False))
        self.assertIsNone(result.loss)


class PipInstallTest(unittest.TestCase):
    """pip install ./python with no index and no network: pip's isolated
    build needs nothing (build-system requires = [])."""

    def setUp(self):
        check = run_python(["-m", "pip", "--version"], timeout=60)
        if check.returncode != 0:
            self.skipTest("no pip for %s (Debian: apt-get install "
                          "python3-pip)" % sys.executable)
        self.tmp = tempfile.TemporaryDirectory(prefix="zshard-pip-")
        self.addCleanup(self.tmp.cleanup)

    def test_installs_offline_and_imports_from_the_target(self):
        target = os.path.join(self.tmp.name, "site")
        result = run_python([
            "-m", "pip", "install", "--isolated", "--no-index", "--no-deps",
            "--no-cache-dir", "--disable-pip-version-check", "--no-compile",
            "--target", target, PYTHON_DIR], cwd=self.tmp.name)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        # Every file of the package, each as RECORD says.
        self.assertEqual(package_files(target), package_files(PYTHON_DIR))
        info = os.path.join(target, "zshard-0.1.0.dist-info")
        with open(os.path.join(info, "RECORD"), newline="") as f:
            record = {row[0]: row[1:] for row in csv.reader(f)}
        for path in package_files(target):
            with open(os.path.join(target, path), "rb") as f:
                data = f.read()
            digest = base64.urlsafe_b64encode(
                hashlib.sha256(data).digest()).rstrip(b"=").decode()
            self.assertEqual(record[path], ["sha256=" + digest,
                                            str(len(data))], path)
        with open(os.path.join(info, "METADATA")) as f:
            metadata = f.read()
        self.assertIn("Name: zshard\n", metadata)
        self.assertIn("Version: 0.1.0\n", metadata)
        # The installed copy, from a directory outside the tree.
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([target, HERE]))
        result = run_python(["-c", (
            "import zshard, zshard.torch\n"
            "print(zshard.__file__)\n"
            "print(zshard.torch.DistributedOptimizer.__module__)")],
            env=env, cwd=self.tmp.name, timeout=120)
        self.assertEqual(result.returncode, 0, result.stderr)
        file, module = result.stdout.split()
        self.assertEqual(file, os.path.join(target, "zshard", "__init__.py"))
        self.assertEqual(module, "zshard.optimizer")
        spec = run_python(["-m", "zshard.spec", "models:tied_lm", "--name",
                           "lm"], env=env, cwd=self.tmp.name, timeout=120)
        self.assertEqual(spec.returncode, 0, spec.stderr)
        self.assertEqual(json.loads(spec.stdout),
                         zshard.model_spec(models.tied_lm(), name="lm"))
        # The console script zshard-run (pyproject's [project.scripts]).
        with open(os.path.join(info, "entry_points.txt")) as f:
            self.assertEqual(f.read(), "[console_scripts]\n"
                             "zshard-run = zshard.run:main\n")
        script = os.path.join(target, "bin", "zshard-run")
        result = subprocess.run([script, "--help"], env=env, cwd=self.tmp.name,
                                capture_output=True, text=True, timeout=120)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("usage: zshard-run [-h] --nproc N", result.stdout)
        result = subprocess.run([script, "--nproc", "0"], env=env,
                                cwd=self.tmp.name, capture_output=True,
                                text=True, timeout=120)
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertEqual(len(result.stderr.splitlines()), 1, result.stderr)


class BackendTest(unittest.TestCase):
    """python/build_backend/zshard_backend.py, called as pip calls it (in a
    process whose working directory is the source tree)."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="zshard-backend-")
        self.addCleanup(self.tmp.cleanup)

    def hook(self, source, name, out):
        """Runs the backend's hook `name`(out) in `source`; returns the
        file it built, under `out`."""
        env = dict(os.environ, PYTHONPATH=os.path.join(source,
                                                       "build_backend"),
                   SOURCE_DATE_EPOCH="1700000000")
        result = run_python(["-c", "import sys, zshard_backend as b; "
                             "print(b.%s(sys.argv[1]))" % name, out],
                            env=env, cwd=source, timeout=120)
        self.assertEqual(result.returncode, 0, result.stderr)
        return os.path.join(out, result.stdout.strip())

    def test_the_sdist_builds_the_same_wheel(self):
        out = self.tmp.name
        wheel = self.hook(PYTHON_DIR, "build_wheel", os.path.join(out, "a"))
        self.assertEqual(os.path.basename(wheel),
                         "zshard-0.1.0-py3-none-any.whl")
        sdist = self.hook(PYTHON_DIR, "build_sdist", os.path.join(out, "s"))
        self.assertEqual(os.path.basename(sdist), "zshard-0.1.0.tar.gz")
        with tarfile.open(sdist) as tar:
            names = tar.getnames()
            # Python 3.12 wants a filter; 3.11.2 (Debian 12) has none.
            safe = ({"filter": "data"} if hasattr(tarfile, "data_filter")
                    else {})
            tar.extractall(os.path.join(out, "x"), **safe)
        self.assertIn("zshard-0.1.0/PKG-INFO", names)
        self.assertIn("zshard-0.1.0/build_backend/zshard_backend.py", names)
        again = self.hook(os.path.join(out, "x", "zshard-0.1.0"),
                          "build_wheel", os.path.join(out, "b"))
        with open(wheel, "rb") as a, open(again, "rb") as b:
            self.assertEqual(a.read(), b.read())
        with zipfile.ZipFile(wheel) as z:
            self.assertIsNone(z.testzip())
            names = set(z.namelist())
            wheel_meta = z.read("zshard-0.1.0.dist-info/WHEEL").decode()
        self.assertEqual({n for n in names if n.startswith("zshard/")},
                         package_files(PYTHON_DIR))
        self.assertIn("Root-Is-Purelib: true\n", wheel_meta)
        self.assertIn("Tag: py3-none-any\n", wheel_meta)

    def test_pyproject_read_with_and_without_tomllib(self):
        backend = load_backend()
        with open(os.path.join(PYTHON_DIR, "pyproject.toml"),
                  encoding="utf-8") as f:
            text = f.read()
        project = backend._parse_project(text)
        self.assertEqual(project["name"], "zshard")
        self.assertEqual(backend._parse_project_lines(text), project)
        scripts = backend._parse_scripts(text)
        self.assertEqual(scripts, {"zshard-run": "zshard.run:main"})
        self.assertEqual(backend._parse_table_lines(text, "project.scripts"),
                         scripts)


if __name__ == "__main__":
    unittest.main()
