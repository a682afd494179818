#!/usr/bin/env python3
"""Lints the project's container files without a Docker engine.

Checks, per Dockerfile:
  * it is multi-stage, and a final stage copies its payload from a builder;
  * every COPY/ADD source from the build context exists and is not excluded
    by the .dockerignore that applies (no remote ADD);
  * every binary copied out of a build tree (.../bin/NAME) and the program
    of ENTRYPOINT (or of CMD, without one) are executables that the CMake
    build defines (add_executable or OUTPUT_NAME in the tree, or files in
    --bin-dir), and that program is copied into its stage;
  * every final stage runs as a USER that is not root;
  * no final stage is a devel image or installs compilers, build tools or
    -dev packages.

Prints "ok PATH" or "FAIL PATH:LINE: message" lines; exits 0 when clean, 1 on
findings, 2 on bad usage.
"""

import argparse
import fnmatch
import glob
import json
import os
import re
import shlex
import sys

BUILD_TOOLS = re.compile(
    r"^(build-essential|cmake|ninja-build|make|gcc(-\d+)?|g\+\+(-\d+)?|"
    r"clang(-\d+)?|cpp|nvcc|cuda-toolkit.*|cuda-nvcc.*|.*-dev)$")
INSTALL_CMD = re.compile(r"\b(apt-get|apt|yum|dnf|microdnf|apk)\s+(-\S+\s+)*"
                         r"(install|add)\b")
ROOT_USERS = {"root", "0", "root:root", "0:0", "root:0", "0:root"}
SKIP_DIRS = {".git", "node_modules", "__pycache__"}


class Instruction:
  """One Dockerfile instruction after joining continuation lines."""

  def __init__(self, line, keyword, rest):
    self.line = line
    self.keyword = keyword.upper()
    self.rest = rest.strip()


class Stage:

  def __init__(self, index, image, name, line):
    self.index = index
    self.image = image
    self.name = name
    self.line = line
    self.instructions = []


def parse_dockerfile(text):
  """Returns (global ARG defaults, [Instruction]) for a Dockerfile's text."""
  instructions = []
  pending, start = "", 0
  for number, raw in enumerate(text.splitlines(), 1):
    stripped = raw.strip()
    if not pending and (not stripped or stripped.startswith("#")):
      continue
    if pending and stripped.startswith("#"):
      continue  # Comment lines inside a continuation are dropped.
    if not pending:
      start = number
    if stripped.endswith("\\"):
      pending += stripped[:-1] + " "
      continue
    full = pending + stripped
    pending = ""
    keyword, _, rest = full.partition(" ")
    instructions.append(Instruction(start, keyword, rest))
  if pending:
    keyword, _, rest = pending.partition(" ")
    instructions.append(Instruction(start, keyword, rest))
  return instructions


def substitute(value, args):
  """Expands ${NAME}, ${NAME:-default} and $NAME from build args."""

  def repl(match):
    name = match.group(1) or match.group(3)
    default = match.group(2)
    if args.get(name):
      return args[name]
    return default if default is not None else ""

  return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|"
                r"\$([A-Za-z_][A-Za-z0-9_]*)", repl, value)


def split_stages(instructions):
  """Groups instructions into stages; returns (stages, problems)."""
  global_args, stages, problems = {}, [], []
  for ins in instructions:
    if ins.keyword == "FROM":
      words = ins.rest.split()
      words = [w for w in words if not w.startswith("--platform")]
      if not words:
        problems.append((ins.line, "FROM without an image"))
        continue
      name = None
      if len(words) >= 3 and words[1].upper() == "AS":
        name = words[2]
      image = substitute(words[0], global_args)
      stages.append(Stage(len(stages), image, name, ins.line))
    elif not stages:
      if ins.keyword == "ARG":
        key, _, default = ins.rest.partition("=")
        global_args[key.strip()] = default.strip().strip('"')
      else:
        problems.append((ins.line, f"{ins.keyword} before the first FROM"))
    else:
      stages[-1].instructions.append(ins)
  return stages, problems


def parse_copy(ins):
  """Returns (flags dict, sources, dest) of a COPY/ADD instruction."""
  rest = ins.rest
  flags = {}
  words = shlex.split(rest) if not rest.lstrip().startswith("[") else None
  if words is None:
    # Exec (JSON) form may follow flags; flags never contain '['.
    head, _, tail = rest.partition("[")
    for flag in head.split():
      key, _, value = flag.partition("=")
      flags[key] = value
    try:
      items = json.loads("[" + tail)
    except json.JSONDecodeError:
      return flags, None, None
    return flags, items[:-1], items[-1] if items else None
  while words and words[0].startswith("--"):
    key, _, value = words.pop(0).partition("=")
    flags[key] = value
  if len(words) < 2:
    return flags, None, None
  return flags, words[:-1], words[-1]


def exec_form(rest):
  """Returns the argv of an ENTRYPOINT/CMD (exec or shell form)."""
  rest = rest.strip()
  if rest.startswith("["):
    try:
      return [str(x) for x in json.loads(rest)]
    except json.JSONDecodeError:
      return None
  return shlex.split(rest)


def cmake_targets(root):
  """Executable names the CMake build in ROOT defines."""
  names = set()
  pattern = re.compile(r"add_executable\s*\(\s*([A-Za-z0-9_.+-]+)")
  output = re.compile(r"OUTPUT_NAME\s+\"?([A-Za-z0-9_.+-]+)")
  for dirpath, dirnames, filenames in os.walk(root):
    dirnames[:] = [
        d for d in dirnames if d not in SKIP_DIRS and not d.startswith("build")
    ]
    for f in filenames:
      if f == "CMakeLists.txt" or f.endswith(".cmake"):
        try:
          with open(os.path.join(dirpath, f), encoding="utf-8") as fh:
            text = fh.read()
        except (OSError, UnicodeDecodeError):
          continue
        names.update(pattern.findall(text))
        names.update(output.findall(text))
  return names


def dockerignore_patterns(dockerfile, root):
  """Patterns of <Dockerfile>.dockerignore, else ROOT/.dockerignore."""
  for candidate in (dockerfile + ".dockerignore",
                    os.path.join(root, ".dockerignore")):
    if os.path.exists(candidate):
      with open(candidate, encoding="utf-8") as fh:
        return [
            line.strip().rstrip("/")
            for line in fh
            if line.strip() and not line.startswith("#")
        ]
  return []


def ignored_by(path, patterns):
  """Returns the pattern that excludes PATH (or one of its parents)."""
  parts = path.strip("/").split("/")
  for pattern in patterns:
    if pattern.startswith("!"):
      continue  # Re-inclusions only narrow exclusions; not used here.
    for i in range(1, len(parts) + 1):
      prefix = "/".join(parts[:i])
      if fnmatch.fnmatchcase(prefix, pattern) or (
          pattern.startswith("**/") and
          fnmatch.fnmatchcase(parts[i - 1], pattern[3:])):
        return pattern
  return None


def lint(dockerfile, root, targets):
  """Returns a list of (line, message) problems for one Dockerfile."""
  with open(dockerfile, encoding="utf-8") as fh:
    stages, problems = split_stages(parse_dockerfile(fh.read()))
  if not stages:
    return problems + [(1, "no FROM: not a Dockerfile")]
  if len(stages) < 2:
    problems.append((stages[0].line, "single-stage build: build in a builder "
                     "stage and copy the binaries into a runtime stage"))
  names = {s.name: s for s in stages if s.name}
  referenced = set()
  for stage in stages:
    if stage.image in names:
      referenced.add(names[stage.image].index)
    for ins in stage.instructions:
      if ins.keyword in ("COPY", "ADD"):
        source = parse_copy(ins)[0].get("--from")
        if source in names:
          referenced.add(names[source].index)
        elif source is not None and source.isdigit():
          referenced.add(int(source))
  ignore = dockerignore_patterns(dockerfile, root)
  finals = [s for s in stages if s.index not in referenced]
  for stage in stages:
    final = stage in finals
    copied = set()
    for ins in stage.instructions:
      if ins.keyword in ("COPY", "ADD"):
        flags, sources, dest = parse_copy(ins)
        if sources is None:
          problems.append((ins.line, f"malformed {ins.keyword}"))
          continue
        for src in sources:
          if re.match(r"^[a-z]+://", src):
            problems.append((ins.line, f"remote ADD source '{src}'"))
          elif "--from" not in flags:
            rel = os.path.normpath(src).lstrip("/")
            if rel.startswith(".."):
              problems.append((ins.line, f"copy source '{src}' is outside "
                               "the build context"))
            elif not glob.glob(os.path.join(root, rel)):
              problems.append((ins.line, f"copy source '{src}' does not "
                               "exist in the build context"))
            elif rel != "." and ignored_by(rel, ignore):
              problems.append((ins.line, f"copy source '{src}' is excluded "
                               f"by .dockerignore pattern "
                               f"'{ignored_by(rel, ignore)}'"))
          elif re.search(r"/bin/[^/]+$", src):
            binary = os.path.basename(src)
            if binary not in targets:
              problems.append((ins.line, f"binary '{binary}' is not an "
                               "executable the CMake build produces"))
          base = os.path.basename(src.rstrip("/"))
          copied.add(dest if not dest.endswith("/") else dest + base)
          copied.add(os.path.join(dest, base))
      elif ins.keyword == "RUN" and final:
        for command in re.split(r"&&|;|\|\|", ins.rest):
          if INSTALL_CMD.search(command):
            for word in command.split():
              if BUILD_TOOLS.match(word):
                problems.append((ins.line, f"final stage installs build "
                                 f"tool or dev package '{word}'"))
      elif ins.keyword == "ENTRYPOINT" or (
          ins.keyword == "CMD" and final and
          not any(i.keyword == "ENTRYPOINT" for i in stage.instructions)):
        # Without an ENTRYPOINT, CMD names the program.
        what = ins.keyword.lower()
        argv = exec_form(ins.rest)
        if not argv:
          problems.append((ins.line, f"malformed {ins.keyword}"))
          continue
        program = os.path.basename(argv[0])
        if program not in targets:
          problems.append((ins.line, f"{what} '{program}' is not an "
                           "executable the CMake build produces"))
        elif not any(os.path.basename(p) == program for p in copied):
          problems.append((ins.line, f"{what} '{program}' is not copied "
                           "into this stage"))
    if not final:
      continue
    label = stage.name or f"#{stage.index}"
    if re.search(r"(^|[-:])devel\b|[-:]dev$", stage.image):
      problems.append((stage.line, f"final stage '{label}' is based on a "
                       f"devel image '{stage.image}'"))
    users = [i for i in stage.instructions if i.keyword == "USER"]
    if not users:
      problems.append((stage.line, f"final stage '{label}' has no USER "
                       "(runs as root)"))
    elif users[-1].rest.split()[0] in ROOT_USERS:
      problems.append((users[-1].line, f"final stage '{label}' runs as root"))
    if len(stages) > 1 and not any(
        i.keyword == "COPY" and "--from" in parse_copy(i)[0]
        for i in stage.instructions):
      problems.append((stage.line, f"final stage '{label}' copies nothing "
                       "from a builder stage"))
  return problems


def main(argv):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("dockerfiles", nargs="+", help="Dockerfiles to check")
  parser.add_argument("--root", required=True,
                      help="the build context (the repository root)")
  parser.add_argument("--bin-dir", help="a build's bin/ directory; its files "
                      "count as executables the build produces")
  parser.add_argument("--known-target", action="append", default=[],
                      help="an extra executable name to accept")
  args = parser.parse_args(argv)
  if not os.path.isdir(args.root):
    parser.error(f"build context '{args.root}' is not a directory")
  targets = cmake_targets(args.root) | set(args.known_target)
  if args.bin_dir and os.path.isdir(args.bin_dir):
    targets |= set(os.listdir(args.bin_dir))
  failed = False
  for path in args.dockerfiles:
    if not os.path.isfile(path):
      print(f"FAIL {path}: no such Dockerfile")
      failed = True
      continue
    problems = lint(path, args.root, targets)
    if not problems:
      print(f"ok   {path}")
    for line, message in sorted(problems):
      print(f"FAIL {path}:{line}: {message}")
    failed = failed or bool(problems)
  return 1 if failed else 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
