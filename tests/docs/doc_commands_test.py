"""The commands the docs show, run: a doc cannot drift from the code.

README.md and docs/*.md mark what is checked with an HTML comment (not
shown when the page is rendered) on the line before a fenced block or a
table:

  <!-- doc-test -->               the next ```sh block runs under bash
                                  (set -euo pipefail) and must exit 0
  <!-- doc-test: output -->       every line of the next fenced block must
                                  appear in what the last run block printed
                                  (spaces collapsed): for virtual-time
                                  output, which is deterministic
  <!-- doc-test: options CMD -->  every --option in the next block or table
                                  must appear in `CMD --help`

`doc-test dpdk` (e.g. `<!-- doc-test dpdk: options CMD -->`) marks a check
that needs the DPDK apps; with --no-dpdk (a build without them) it is
skipped.

A block the same as one already run (a page repeating the README's
command) is not run again: its output is reused.

Blocks run in the order of the pages, in one scratch directory holding
links to the source tree's top-level entries and `build` -> the build
directory, so a page's `build/apps/...` and `examples/...` paths work as
written and its outputs (`out/...`) land in the scratch directory.

usage: doc_commands_test.py [--no-dpdk] SOURCE_ROOT BUILD_ROOT [PAGE.md...]
"""
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

MARKER = re.compile(r"^<!--\s*doc-test(\s+dpdk)?(?::\s*(.*?))?\s*-->\s*$")
OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9_-]*[a-z0-9])")
TIMEOUT_S = 120


def checks(page):
    """Yields (line, dpdk, kind, argument, lines) for each marked block."""
    lines = page.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = MARKER.match(lines[i])
        i += 1
        if not m:
            continue
        at = i
        dpdk = bool(m.group(1))
        spec = (m.group(2) or "run").split(None, 1)
        kind, arg = spec[0], (spec[1] if len(spec) > 1 else "")
        while i < len(lines) and not lines[i].strip():
            i += 1
        body = []
        if i < len(lines) and lines[i].startswith("```"):
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            i += 1
        else:
            while i < len(lines) and lines[i].startswith("|"):
                body.append(lines[i])
                i += 1
        if not body:
            raise SystemExit(f"{page.name}:{at}: doc-test marker without a block after it")
        yield at, dpdk, kind, arg, body


def squash(s):
    return " ".join(s.split())


def main():
    argv = sys.argv[1:]
    no_dpdk = "--no-dpdk" in argv
    argv = [a for a in argv if a != "--no-dpdk"]
    if len(argv) < 2:
        raise SystemExit(__doc__)
    src = pathlib.Path(argv[0]).resolve()
    build = pathlib.Path(argv[1]).resolve()
    pages = [pathlib.Path(p) for p in argv[2:]] or \
        [src / "README.md"] + sorted((src / "docs").glob("*.md"))

    scratch = pathlib.Path(tempfile.mkdtemp(prefix="droce-doc-test-"))
    for entry in src.iterdir():
        if entry.name in (".git", "out") or entry.name.startswith("build"):
            continue
        (scratch / entry.name).symlink_to(entry)
    (scratch / "build").symlink_to(build)

    passed = failed = skipped = 0
    ran = {}  # script -> (status, output)
    try:
        for page in pages:
            name = page.resolve().relative_to(src) if page.resolve().is_relative_to(src) \
                else page
            last_output = None
            for line, dpdk, kind, arg, body in checks(page):
                where = f"{name}:{line}"
                if dpdk and no_dpdk:
                    skipped += 1
                    print(f"skip {where} ({kind}: needs the DPDK apps)", flush=True)
                    continue
                start = time.monotonic()
                problem = None
                if kind == "run":
                    script = "set -euo pipefail\n" + "\n".join(body) + "\n"
                    if script not in ran:
                        try:
                            r = subprocess.run(["bash", "-c", script], cwd=scratch,
                                               capture_output=True, text=True,
                                               timeout=TIMEOUT_S)
                            ran[script] = (r.returncode, r.stdout + r.stderr)
                        except subprocess.TimeoutExpired:
                            ran[script] = (None, "")
                    status, last_output = ran[script]
                    if status is None:
                        problem = f"still running after {TIMEOUT_S} s"
                    elif status != 0:
                        problem = f"exit status {status}\n{last_output[-2000:]}"
                elif kind == "output":
                    if last_output is None:
                        problem = "no run block before this output block"
                    else:
                        got = squash(last_output)
                        missing = [l for l in body if l.strip() and squash(l) not in got]
                        if missing:
                            problem = "not in the output:\n  " + "\n  ".join(missing[:10])
                elif kind == "options":
                    if not arg:
                        problem = "options needs the command whose --help lists them"
                    else:
                        r = subprocess.run(["bash", "-c", f"{arg} --help"], cwd=scratch,
                                           capture_output=True, text=True, timeout=TIMEOUT_S)
                        shown = set(OPTION.findall(r.stdout + r.stderr))
                        documented = sorted(set(OPTION.findall("\n".join(body))))
                        missing = [o for o in documented if o not in shown]
                        if r.returncode != 0:
                            problem = f"`{arg} --help` exited {r.returncode}"
                        elif missing:
                            problem = f"not in `{arg} --help`: {' '.join(missing)}"
                else:
                    problem = f"unknown doc-test kind '{kind}'"
                took = time.monotonic() - start
                if problem:
                    failed += 1
                    print(f"FAIL {where} ({kind}, {took:.1f} s): {problem}", flush=True)
                else:
                    passed += 1
                    print(f"ok   {where} ({kind}, {took:.1f} s)", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main())
