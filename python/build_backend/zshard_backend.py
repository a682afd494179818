"""The PEP 517 build backend of zshard's Python package, standard library
only: `pip install ./python` builds the wheel with nothing to download.

It builds one pure-Python wheel (py3-none-any) of the `zshard` directory
next to pyproject.toml, with the metadata of pyproject.toml's [project]
table (name, version, description, requires-python) and its
[project.scripts] as console scripts (entry_points.txt), and an sdist of the
same files that builds the same wheel. Builds are reproducible: entries are
sorted and dated SOURCE_DATE_EPOCH (default 1980-01-01).
"""

from __future__ import annotations

import base64
import csv
import gzip
import hashlib
import io
import json
import os
import re
import tarfile
import time
import zipfile
from typing import Any, Dict, List, Optional, Tuple

__all__ = ["build_sdist", "build_wheel", "get_requires_for_build_sdist",
           "get_requires_for_build_wheel", "prepare_metadata_for_build_wheel"]

PACKAGE = "zshard"
BACKEND = "build_backend/zshard_backend.py"
WHEEL_TAG = "py3-none-any"

_ZIP_EPOCH = 315532800  # 1980-01-01T00:00:00Z


def _parse_project(text: str) -> Dict[str, str]:
    """The string keys of the [project] table of pyproject.toml's `text`:
    with tomllib where there is one (Python 3.11), else line by line."""
    try:
        import tomllib
    except ImportError:  # Python 3.9 and 3.10
        return _parse_project_lines(text)
    project = tomllib.loads(text).get("project", {})
    return {k: v for k, v in project.items() if isinstance(v, str)}


def _parse_project_lines(text: str) -> Dict[str, str]:
    """_parse_project without tomllib: each key = "a basic string" of the
    [project] table on one line."""
    return _parse_table_lines(text, "project")


def _parse_scripts(text: str) -> Dict[str, str]:
    """The [project.scripts] table of pyproject.toml's `text` (console
    script name = "module:function"): with tomllib where there is one,
    else each entry as a basic string on one line."""
    try:
        import tomllib
    except ImportError:  # Python 3.9 and 3.10
        return _parse_table_lines(text, "project.scripts")
    scripts = tomllib.loads(text).get("project", {}).get("scripts", {})
    return {k: v for k, v in scripts.items() if isinstance(v, str)}


def _parse_table_lines(text: str, want: str) -> Dict[str, str]:
    """The basic-string keys of table `want`, line by line."""
    found: Dict[str, str] = {}
    table = None
    for line in text.splitlines():
        line = line.strip()
        header = re.fullmatch(r"\[([^\[\]]+)\]", line)
        if header:
            table = header.group(1).strip()
            continue
        m = re.fullmatch(r'("?)([A-Za-z0-9_.-]+)\1\s*=\s*"((?:[^"\\]|\\.)*)"'
                         r'\s*(#.*)?', line)
        if table == want and m:
            # A basic string's escapes are JSON's (all but \U and \e).
            found[m.group(2)] = json.loads('"%s"' % m.group(3))
    return found


def _scripts(root: str = ".") -> Dict[str, str]:
    with open(os.path.join(root, "pyproject.toml"), encoding="utf-8") as f:
        return _parse_scripts(f.read())


def _project(root: str = ".") -> Dict[str, str]:
    with open(os.path.join(root, "pyproject.toml"), encoding="utf-8") as f:
        project = _parse_project(f.read())
    missing = [k for k in ("name", "version") if not project.get(k)]
    if missing:
        raise ValueError("pyproject.toml's [project] has no %s" %
                         " or ".join(missing))
    return project


def _dist_name(project: Dict[str, str]) -> str:
    """The name and version as file names spell them: zshard-0.1.0."""
    name = re.sub(r"[-_.]+", "_", project["name"]).lower()
    return "%s-%s" % (name, project["version"].replace("-", "_"))


def _metadata(project: Dict[str, str]) -> str:
    lines = ["Metadata-Version: 2.1",
             "Name: %s" % project["name"],
             "Version: %s" % project["version"]]
    if project.get("description"):
        lines.append("Summary: %s" % project["description"])
    if project.get("requires-python"):
        lines.append("Requires-Python: %s" % project["requires-python"])
    return "\n".join(lines) + "\n"


def _wheel_file() -> str:
    return ("Wheel-Version: 1.0\nGenerator: zshard_backend\n"
            "Root-Is-Purelib: true\nTag: %s\n" % WHEEL_TAG)


def _dist_info(project: Dict[str, str],
               scripts: Optional[Dict[str, str]] = None
               ) -> List[Tuple[str, bytes]]:
    """The .dist-info files but RECORD: (name, contents); with
    entry_points.txt when there are console `scripts`."""
    files = [("METADATA", _metadata(project).encode()),
             ("WHEEL", _wheel_file().encode()),
             ("top_level.txt", (PACKAGE + "\n").encode())]
    if scripts:
        text = "[console_scripts]\n" + "".join(
            "%s = %s\n" % item for item in sorted(scripts.items()))
        files.insert(0, ("entry_points.txt", text.encode()))
    return files


def _package_files(root: str = ".") -> List[str]:
    """The package's files, relative to `root`, sorted: everything under
    zshard/ but byte code."""
    found = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, PACKAGE)):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in filenames:
            if not name.endswith((".pyc", ".pyo")):
                found.append(os.path.relpath(os.path.join(dirpath, name),
                                             root))
    return sorted(path.replace(os.sep, "/") for path in found)


def _epoch() -> int:
    """The files' date: SOURCE_DATE_EPOCH, not before 1980 (zip's
    first)."""
    return max(int(os.environ.get("SOURCE_DATE_EPOCH", _ZIP_EPOCH)),
               _ZIP_EPOCH)


def _date_time() -> Tuple[int, int, int, int, int, int]:
    year, month, day, hour, minute, second = time.gmtime(_epoch())[:6]
    return year, month, day, hour, minute, second


def _record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _write_wheel(path: str, entries: List[Tuple[str, bytes]],
                 record_name: str) -> None:
    """A wheel at `path` of `entries` (archive name, contents), then their
    RECORD as `record_name`."""
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for name, data in entries:
        writer.writerow([name, _record_hash(data), str(len(data))])
    writer.writerow([record_name, "", ""])
    entries = entries + [(record_name, record.getvalue().encode())]
    date_time = _date_time()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, data in entries:
            info = zipfile.ZipInfo(name, date_time=date_time)
            info.external_attr = 0o100644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(info, data)


# -- the PEP 517 hooks ------------------------------------------------------

def get_requires_for_build_wheel(
        config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    """Nothing: the backend uses the standard library only."""
    return []


def get_requires_for_build_sdist(
        config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    """Nothing: the backend uses the standard library only."""
    return []


def prepare_metadata_for_build_wheel(
        metadata_directory: str,
        config_settings: Optional[Dict[str, Any]] = None) -> str:
    """Writes the wheel's .dist-info directory (without RECORD) into
    `metadata_directory`; returns its name."""
    project = _project()
    name = _dist_name(project) + ".dist-info"
    os.makedirs(os.path.join(metadata_directory, name), exist_ok=True)
    for filename, data in _dist_info(project, _scripts()):
        with open(os.path.join(metadata_directory, name, filename),
                  "wb") as f:
            f.write(data)
    return name


def build_wheel(wheel_directory: str,
                config_settings: Optional[Dict[str, Any]] = None,
                metadata_directory: Optional[str] = None) -> str:
    """Builds the wheel into `wheel_directory`; returns its file name."""
    project = _project()
    dist = _dist_name(project)
    entries = []
    for path in _package_files():
        with open(path, "rb") as f:
            entries.append((path, f.read()))
    info = dist + ".dist-info"
    entries += [(info + "/" + name, data)
                for name, data in _dist_info(project, _scripts())]
    filename = "%s-%s.whl" % (dist, WHEEL_TAG)
    os.makedirs(wheel_directory, exist_ok=True)
    _write_wheel(os.path.join(wheel_directory, filename), entries,
                 info + "/RECORD")
    return filename


def build_sdist(sdist_directory: str,
                config_settings: Optional[Dict[str, Any]] = None) -> str:
    """Builds the sdist (pyproject.toml, PKG-INFO, the backend and the
    package) into `sdist_directory`; returns its file name."""
    project = _project()
    dist = _dist_name(project)
    files = ["pyproject.toml", BACKEND]
    files += _package_files()
    mtime = _epoch()
    members = [("PKG-INFO", _metadata(project).encode())]
    for path in files:
        with open(path, "rb") as f:
            members.append((path, f.read()))
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w",
                      format=tarfile.PAX_FORMAT) as tar:
        for path, data in sorted(members):
            info = tarfile.TarInfo(dist + "/" + path)
            info.size, info.mtime, info.mode = len(data), mtime, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    filename = dist + ".tar.gz"
    os.makedirs(sdist_directory, exist_ok=True)
    with open(os.path.join(sdist_directory, filename), "wb") as f:
        f.write(gzip.compress(archive.getvalue(), mtime=mtime))
    return filename
