#!/usr/bin/env python3
"""droce-sim under mpirun: a scenario split over 2, 3 and 4 processes (on
this 2-CPU machine oversubscribed) gives the one process's outputs byte
for byte: stdout (but for the wall-clock speed line) and every file --out
writes, collective.json of a ring all-reduce included. And what a
partitioned run cannot carry is refused by name, with exit 2.

  mpi_test.py SOURCE_ROOT DROCE_SIM [DROCE_PKTGEN]

With droce-pktgen: a collective replay with the receiver trigger, split
over 2 and 4 processes, prints and writes (--csv, --json) what one process
does; the sender trigger under mpirun is refused by name (exit 2).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

WALL = re.compile(r"packet events in .* s wall")

# 64 hosts on 4 leaves and 4 spines; every host writes 256 KiB to the host
# 21 further on (another leaf) and reads 128 KiB from the one 40 further
# on, with 0.5 % loss on every link, DCQCN and PFC: drops, retransmits,
# pauses and ECN marks all cross the partitions. An uplink between
# partitions fails for 250 us, with routes reconverging 20 us after each
# change. A retransmit timeout of about 1 ms (timeout = 8) recovers the
# lost tails within the run.
LOSSY = """[run]
duration = "20ms"
csv_interval = "5us"
reconverge = "20us"
[[outages]]
a = "leaf0"
b = "spine1"
down = [{ from = "50us", until = "300us" }]
[topology]
kind = "leaf_spine"
leaves = 4
spines = 4
hosts_per_leaf = 16
delay = "1us"
[switch]
buffer = "2MiB"
pfc = { enabled = true, priorities = [3], xoff = "256KiB", xon = "192KiB" }
[link]
loss = 0.005
[flow]
cc = "dcqcn"
bytes = "256KiB"
message = "64KiB"
verify = true
timeout = 8
"""


# A ring all-reduce over 32 hosts on 4 leaves, each step started by the
# data's arrival (the trigger a split run needs), with 0.1 % loss,
# selective repeat and a retransmit timeout of about 1 ms.
RING = """[run]
csv_interval = "10us"
[topology]
kind = "leaf_spine"
leaves = 4
spines = 2
hosts_per_leaf = 8
delay = "1us"
[link]
loss = 0.001
[flow]
cc = "hpcc"
recovery = "selective_repeat"
timeout = 8
[switch]
int = { enabled = true }
[collective]
pattern = "ring"
trigger = "receiver"
bytes = "512KiB"
iterations = 2
"""


def lossy_scenario():
    text = LOSSY
    for h in range(64):
        text += f'[[flows]]\nname = "w{h}"\nsrc = "h{h}"\ndst = "h{(h + 21) % 64}"\n'
        text += (f'[[flows]]\nname = "r{h}"\nsrc = "h{h}"\ndst = "h{(h + 40) % 64}"\n'
                 f'opcode = "read"\nbytes = "128KiB"\nstart = "{h}us"\n')
    return text


def run(argv, procs, out):
    cmd = list(argv) + ["--out", out]
    if procs > 1:
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(procs)] + cmd
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=600)
    return p.returncode, p.stdout, p.stderr


def differences(name, n, stdout, want, got):
    """What n processes' outputs `got` (and the speed line) lack against
    one process's `want`."""
    failures = []
    if f"({n} processes)" not in stdout:
        failures.append(f"{name}: {n} processes: the speed line does not say so")
    if set(got) != set(want):
        failures.append(f"{name}: {n} processes wrote {sorted(got)}, one process {sorted(want)}")
    for k in want:
        if got.get(k) != want[k]:
            failures.append(f"{name}: {n} processes: {k} differs from one process's")
    return failures


def outputs(out, stdout):
    files = {"stdout": "".join(l for l in stdout.splitlines(True) if not WALL.search(l))}
    for name in sorted(os.listdir(out)):
        with open(os.path.join(out, name), "rb") as f:
            files[name] = f.read()
    return files


# A replay over 16 ranks on 4 leaves with loss, verified, three sizes:
# arrivals, credits and retransmits cross the partitions. Its retransmit
# timeouts (67 ms each) stretch it over about 5 s of virtual time, so it
# is sampled every 100 us: at the default 10 us each run wrote 600 MB of
# CSV.
PKTGEN = ["--pattern", "ring", "--ranks", "16", "--topology", "leaf_spine",
          "--hosts-per-leaf", "4", "-b", "64K", "-e", "256K", "-f", "2", "--verify",
          "--loss", "0.5%", "--recovery", "sr", "--cc", "dcqcn", "--trigger", "receiver",
          "--sample-interval", "100us", "--quiet"]
PKTGEN_WALL = re.compile(r"s wall|^# wrote ")


def pktgen_outputs(pktgen, procs, out):
    os.makedirs(out)
    cmd = [pktgen] + PKTGEN + ["--csv", os.path.join(out, "csv"),
                               "--json", os.path.join(out, "run.json")]
    if procs > 1:
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(procs)] + cmd
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=600)
    files = {"stdout": "".join(l for l in p.stdout.splitlines(True)
                               if not PKTGEN_WALL.search(l))}
    for d, _, names in os.walk(out):
        for name in names:
            with open(os.path.join(d, name), "rb") as f:
                files[os.path.relpath(os.path.join(d, name), out)] = f.read()
    return p.returncode, p.stdout, p.stderr, files


def pktgen_cases(pktgen, tmp):
    failures = []
    rc, stdout, err, want = pktgen_outputs(pktgen, 1, os.path.join(tmp, "pktgen-1"))
    if rc != 0:
        return [f"droce-pktgen: one process exited {rc}: {err[-2000:]}"]
    if not re.search(r"retransmits [1-9]", stdout) or "#wrong" not in stdout:
        failures.append(f"droce-pktgen: the replay did not retransmit:\n{stdout}")
    for n in [2, 4]:
        rc, stdout, err, got = pktgen_outputs(pktgen, n, os.path.join(tmp, f"pktgen-{n}"))
        if rc != 0:
            failures.append(f"droce-pktgen: {n} processes exited {rc}: {err[-2000:]}")
            continue
        failures += differences("droce-pktgen", n, stdout, want, got)
        print(f"droce-pktgen: {n} processes: {len(want)} outputs compared")
    # The sender trigger needs another host's completion at once: refused.
    p = subprocess.run(["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2",
                        pktgen, "--ranks", "4", "-b", "64K", "-e", "64K", "--quiet"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    if p.returncode != 2 or "--trigger: a replay split over processes" not in p.stderr:
        failures.append(f"droce-pktgen --trigger sender under mpirun: exit {p.returncode}, "
                        f"stderr: {p.stderr[-1000:]}")
    return failures


def main():
    root, sim = sys.argv[1:3]
    pktgen = sys.argv[3] if len(sys.argv) > 3 else None
    if not shutil.which("mpirun"):
        sys.exit("mpirun not found (openmpi-bin)")
    failures = []
    with tempfile.TemporaryDirectory(prefix="droce-mpi.") as tmp:
        lossy = os.path.join(tmp, "lossy.toml")
        with open(lossy, "w") as f:
            f.write(lossy_scenario())
        ring = os.path.join(tmp, "ring.toml")
        with open(ring, "w") as f:
            f.write(RING)
        # The same ring with each step in two slices that pipeline.
        sliced = os.path.join(tmp, "sliced.toml")
        with open(sliced, "w") as f:
            f.write(RING.replace('trigger = "receiver"\n', 'trigger = "receiver"\nslices = 2\n'))
        cases = [("leaf-spine-a2a", [sim, os.path.join(root, "examples/cc/leaf-spine-a2a.toml"),
                                     "--seed", "1"], [2, 4]),
                 ("lossy-64", [sim, lossy, "--seed", "5"], [2, 4]),
                 ("ring-32", [sim, ring, "--seed", "3"], [2, 3]),
                 ("ring-32-sliced", [sim, sliced, "--seed", "3"], [2])]
        for name, argv, counts in cases:
            one = os.path.join(tmp, name + "-1")
            rc, stdout, err = run(argv, 1, one)
            if rc != 0:
                sys.exit(f"{name}: one process exited {rc}: {err}")
            want = outputs(one, stdout)
            for n in counts:
                out = os.path.join(tmp, f"{name}-{n}")
                rc, stdout, err = run(argv, n, out)
                if rc != 0:
                    failures.append(f"{name}: {n} processes exited {rc}: {err[-2000:]}")
                    continue
                failures += differences(name, n, stdout, want, outputs(out, stdout))
                print(f"{name}: {n} processes: {len(want)} outputs identical"
                      if not failures else f"{name}: {n} processes: see below")
            if name == "lossy-64":
                text = want["stdout"]
                for what, pattern in [("flows done", r"flows done 128/128"),
                                      ("verified", r"\byes\b"),
                                      ("retransmits", r"retransmits [1-9]")]:
                    if not re.search(pattern, text):
                        failures.append(f"{name}: the scenario did not exercise {what}:\n{text}")
            if name.startswith("ring-32") and "collective.json" not in want:
                failures.append(f"{name}: no collective.json")
        # A ring started by the sender's completion cannot be split: refused
        # by name, exit 2.
        coll = os.path.join(tmp, "coll.toml")
        with open(coll, "w") as f:
            f.write(RING.replace('trigger = "receiver"\n', ""))
        rc, _, err = run([sim, coll], 2, os.path.join(tmp, "coll"))
        if rc != 2 or 'collective.trigger: a ring split over processes needs' not in err:
            failures.append(f"sender-triggered ring under mpirun: exit {rc}, stderr: {err[-1000:]}")
        if pktgen:
            failures += pktgen_cases(pktgen, tmp)
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
