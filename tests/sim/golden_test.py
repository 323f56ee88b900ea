#!/usr/bin/env python3
"""Golden outputs: every shipped scenario, run with a fixed seed, gives the
output stored under tests/sim/golden/, byte for byte.

A run is deterministic (docs/SIM.md "Determinism"), so any difference is a
change in behaviour: intended ones are stored again with --update and show
up in the diff of the commit that makes them.

  golden_test.py SOURCE_ROOT DROCE_SIM DROCE_PKTGEN [--update] [CASE...]

Each case runs from SOURCE_ROOT (the scenario paths in summary.json are
relative) into a scratch directory; its stdout, minus the one line that
reports wall-clock speed, and every file the run wrote are compared with
golden/CASE/. A file larger than 64 KiB (the time series of the longer
runs) is stored as FILE.sha256, its digest, line count and size, so the
golden set stays small; the summary next to it still shows what changed.
"""
import difflib
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile

# name -> (tool, arguments[, exit code]); {out} is the case's output
# directory.
CASES = {
    "sim-incast-2to1": ("sim", ["examples/sim/incast-2to1.toml", "--seed", "1", "--out", "{out}"]),
    "sim-incast-16to1-pfc": ("sim", ["examples/sim/incast-16to1-pfc.toml", "--seed", "1",
                                     "--out", "{out}"]),
    "sim-incast-16to1-lossy": ("sim", ["examples/sim/incast-16to1-lossy.toml", "--seed", "7",
                                       "--out", "{out}"]),
    "cc-incast-16to1": ("sim", ["examples/cc/incast-16to1.toml", "--seed", "1", "--out", "{out}"]),
    "cc-incast-16to1-hpcc": ("sim", ["examples/cc/incast-16to1.toml", "--seed", "1",
                                     "--cc", "hpcc", "--out", "{out}"]),
    # Both flows are still sending when the run ends: exit 1 by design.
    "cc-two-flow": ("sim", ["examples/cc/two-flow.toml", "--seed", "1", "--duration", "2ms",
                            "--out", "{out}"], 1),
    "cc-leaf-spine-a2a": ("sim", ["examples/cc/leaf-spine-a2a.toml", "--seed", "1",
                                  "--out", "{out}"]),
    "cc-leaf-spine-a2a-json": ("sim", ["examples/cc/leaf-spine-a2a.toml", "--seed", "3",
                                       "--cc", "timely", "--json"]),
    # droce-pktgen's collective replay drives the same runner through its
    # programmatic API (connect, post, completions) on generated testbeds.
    "pktgen-ring-single-switch": ("pktgen", [
        "--pattern", "ring", "--ranks", "8", "-b", "256K", "-e", "1M", "-f", "4", "-n", "2",
        "-w", "1", "--topology", "single_switch", "--cc", "dcqcn", "--verify", "--quiet",
        "--csv", "{out}", "--json", "{out}/result.json"]),
    "pktgen-a2a-leaf-spine": ("pktgen", [
        "--pattern", "all_to_all", "--ranks", "10", "-b", "120K", "-e", "120K", "-n", "2",
        "-w", "0", "--topology", "leaf_spine", "--hosts-per-leaf", "4", "--spines", "2",
        "--oversubscription", "2", "--cc", "hpcc", "--loss", "0.001", "--quiet",
        "--csv", "{out}", "--json", "{out}/result.json"]),
}

BIG = 64 * 1024

# Lines that depend on the machine, not on the simulation.
WALL = re.compile(r"(packet events in .* s wall|virtual in .* s wall)")


def run_case(tools, name, out):
    tool, args, *rc = CASES[name]
    argv = [tools[tool]] + [a.replace("{out}", out) for a in args]
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != (rc[0] if rc else 0):
        raise RuntimeError(f"{name}: {' '.join(argv)} exited {p.returncode}:\n{p.stderr}")
    stdout = "".join(l for l in p.stdout.splitlines(True) if not WALL.search(l))
    # Paths of the scratch directory stand for themselves in the output.
    stdout = stdout.replace(out, "OUT")
    with open(os.path.join(out, "stdout.txt"), "w") as f:
        f.write(stdout)
    for f in os.listdir(out):
        path = os.path.join(out, f)
        data = open(path, "rb").read()
        if len(data) > BIG:
            os.remove(path)
            with open(path + ".sha256", "w") as d:
                lines = data.count(b"\n")
                d.write(f"{hashlib.sha256(data).hexdigest()} {lines} lines {len(data)} bytes\n")


def compare(name, got_dir, want_dir):
    problems = []
    got = sorted(os.listdir(got_dir))
    want = sorted(os.listdir(want_dir)) if os.path.isdir(want_dir) else []
    for f in sorted(set(got) | set(want)):
        if f not in got:
            problems.append(f"{name}/{f}: not written")
            continue
        if f not in want:
            problems.append(f"{name}/{f}: written but not in the golden set")
            continue
        a = open(os.path.join(want_dir, f), "rb").read()
        b = open(os.path.join(got_dir, f), "rb").read()
        if a != b:
            diff = difflib.unified_diff(a.decode(errors="replace").splitlines(),
                                        b.decode(errors="replace").splitlines(),
                                        f"golden/{name}/{f}", f"now/{name}/{f}", lineterm="", n=1)
            problems.append("\n".join(list(diff)[:40]))
    return problems


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    update = "--update" in sys.argv
    root, sim, pktgen = args[:3]
    names = args[3:] or list(CASES)
    golden = os.path.join(root, "tests", "sim", "golden")
    tools = {"sim": os.path.abspath(sim), "pktgen": os.path.abspath(pktgen)}
    os.chdir(root)
    problems = []
    with tempfile.TemporaryDirectory(prefix="droce-golden.") as tmp:
        for name in names:
            out = os.path.join(tmp, name)
            os.makedirs(out)
            run_case(tools, name, out)
            want = os.path.join(golden, name)
            if update:
                shutil.rmtree(want, ignore_errors=True)
                shutil.copytree(out, want)
                print(f"stored {name}")
                continue
            p = compare(name, out, want)
            print(f"{'ok  ' if not p else 'FAIL'} {name}")
            problems += p
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
