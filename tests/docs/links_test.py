#!/usr/bin/python3
"""Every relative link in the project's markdown resolves inside the tree.

usage: links_test.py REPO_ROOT

Scans README.md, deploy/README.md and every docs/**/*.md for markdown links
([text](target), ![alt](target), [label]: target) and HTML links
(<a href="target">, src="target"), outside fenced code blocks and code
spans. Links with a scheme (http:, https:, mailto:, ...) are not checked.
A link fails when it:

  - is absolute (/path or file:), so it works on one machine only;
  - leaves the repository (../ past the root);
  - names a file or folder that does not exist;
  - names an anchor (#slug, alone or after a .md file) that matches no
    heading (GitHub's slugs) and no id/name attribute of that file.

Before the scan it checks itself on a small tree with one planted fault of
each kind, so a checker that stopped finding faults fails too. Prints one
line per broken link and exits 1 when there is any; standard library only.
"""

import os
import re
import sys
import tempfile
import urllib.parse

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
CODE_SPAN = re.compile(r"(`+)(?:(?!\n[ \t]*\n)[\s\S])*?\1")
INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^\s)]+)"
                    r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)")
REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)", re.M)
HTML = re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)\s*=\s*[\"']([^\"']*)[\"']",
                  re.I)
HTML_ID = re.compile(r"<[a-z][^>]*?\b(?:id|name)\s*=\s*[\"']([^\"']+)[\"']",
                     re.I)
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def markdown_files(root):
    """README.md, deploy/README.md and docs/**/*.md that exist under root."""
    files = [os.path.join(root, p) for p in ("README.md", "deploy/README.md")]
    for top, dirs, names in os.walk(os.path.join(root, "docs")):
        dirs.sort()
        files += [os.path.join(top, n) for n in sorted(names)
                  if n.endswith(".md")]
    return [f for f in files if os.path.isfile(f)]


def prose_lines(text):
    """The lines outside fenced code blocks, as (line number, line)."""
    fence = None
    for number, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
        elif fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
        else:
            yield number, line


def slug(heading):
    """GitHub's anchor for a heading's text (inline markup removed)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text)
    text = text.replace("`", "").replace("**", "").replace("__", "")
    text = re.sub(r"(^|\s)[*_]|[*_](\s|$)", r"\1\2", text)
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(text):
    """Every anchor a file offers: heading slugs (-1, -2 for repeats) and
    id/name attributes."""
    found, counts, previous = set(), {}, None
    for _, line in prose_lines(text):
        heading = None
        m = ATX.match(line)
        if m:
            heading = m.group(2)
        elif previous and previous.strip() and SETEXT.match(line) \
                and not ATX.match(previous):
            heading = previous.strip()
        if heading is not None:
            base = slug(heading)
            n = counts.get(base, 0)
            counts[base] = n + 1
            found.add(base if n == 0 else "%s-%d" % (base, n))
        found.update(HTML_ID.findall(line))
        previous = line
    return found


def blank_code(text):
    """The file's lines with those of fenced code blocks blanked (line
    numbers kept)."""
    lines = text.split("\n")
    keep = dict(prose_lines(text))
    return [lines[i] if (i + 1) in keep else "" for i in range(len(lines))]


def links(text):
    """(line number, target) of every link outside code."""
    prose = "\n".join(blank_code(text))
    prose = CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), prose)
    for pattern in (INLINE, REFERENCE, HTML):
        for m in pattern.finditer(prose):
            target = m.group(1)
            if target.startswith("<") and target.endswith(">"):
                target = target[1:-1]
            yield prose.count("\n", 0, m.start(1)) + 1, target


def check_link(root, source, target, anchor_cache):
    """None when `target` (a link in file `source`) resolves, else why not."""
    if target.startswith("file:"):
        return "is a file: URL (absolute, outside the repository)"
    if SCHEME.match(target) or target.startswith("//"):
        return None
    path, _, fragment = target.partition("#")
    path = urllib.parse.unquote(path)
    if path.startswith("/"):
        return "is absolute; link relative to the file instead"
    here = os.path.dirname(source)
    resolved = os.path.normpath(os.path.join(here, path)) if path else source
    real_root = os.path.realpath(root)
    real = os.path.realpath(resolved)
    if os.path.commonpath([real_root, real]) != real_root:
        return "leaves the repository"
    if not os.path.exists(resolved):
        return "names %s, which does not exist" % os.path.relpath(resolved, root)
    if fragment and resolved.endswith(".md") and os.path.isfile(resolved):
        if resolved not in anchor_cache:
            with open(resolved, encoding="utf-8") as f:
                anchor_cache[resolved] = anchors(f.read())
        if fragment not in anchor_cache[resolved]:
            return "names anchor #%s, which %s has no heading for" % (
                fragment, os.path.relpath(resolved, root))
    return None


def check_tree(root, files=None):
    """One 'FILE:LINE: link TARGET ...' line per broken link."""
    problems, cache = [], {}
    for source in files if files is not None else markdown_files(root):
        with open(source, encoding="utf-8") as f:
            text = f.read()
        for line, target in links(text):
            why = check_link(root, source, target, cache)
            if why:
                problems.append("%s:%d: link '%s' %s" % (
                    os.path.relpath(source, root), line, target, why))
    return problems


def self_check():
    """The checker finds each planted fault and passes the good links."""
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "repo")
        os.makedirs(os.path.join(root, "docs", "reference"))
        files = {
            "README.md": "# Title\n\n## Quick start (two commands)\n\n"
                         "[ok](docs/a.md) [ok](docs/a.md#the-step-worker) "
                         "[ok](#quick-start-two-commands) [ok](docs/)\n"
                         "[ok](https://example.com/x) <a href=\"docs/a.md\">"
                         "ok</a>\n`[not a link](nowhere.md)`\n"
                         "```\n[not a link](nowhere.md)\n```\n"
                         "[bad1](docs/missing.md)\n"
                         "[bad2](../outside.md)\n"
                         "[bad3](docs/a.md#no-such-heading)\n"
                         "[bad4](/etc/passwd)\n"
                         "[bad5]: #nowhere\n",
            "docs/a.md": "# A\n\n## The step (worker)\n\nSetext\n------\n"
                         "[ok](../README.md) [ok](reference/b.md#setext-1)\n"
                         "<a href=\"../../shared/x.md\">bad6</a>\n",
            "docs/reference/b.md": "# B\n\n## Setext\n\nSetext\n===\n"
                                   "[ok](../a.md#setext)\n",
            "outside.md": "",
        }
        for name, text in files.items():
            full = os.path.join(root if name != "outside.md" else tmp, name)
            with open(full, "w", encoding="utf-8") as f:
                f.write(text)
        problems = check_tree(root)
        expected = ["README.md:11:", "README.md:12:", "README.md:13:",
                    "README.md:14:", "README.md:15:", "docs/a.md:8:"]
        got = [p.split(" ", 1)[0] for p in problems]
        if got != expected:
            return ["self-check: expected faults at %s, found %s" %
                    (expected, problems)]
    return []


def main(argv):
    if len(argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    root = os.path.abspath(argv[1])
    problems = self_check()
    files = markdown_files(root)
    if not files:
        problems.append("no markdown files under %s" % root)
    problems += check_tree(root, files)
    for p in problems:
        print(p)
    if problems:
        return 1
    print("links_test: %d files, every relative link resolves" % len(files))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
