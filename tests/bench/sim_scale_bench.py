#!/usr/bin/env python3
"""Simulator speed and memory as hosts are added, against the 16-to-1 incast
in the same command (docs/PERFORMANCE.md "Simulator").

  sim_scale_bench.py DROCE_SIM DROCE_PKTGEN [--ranks 16,64,1024,8192] [--quick]
                     [--collectives] [--mpi]

Runs, each in its own process (so its peak memory is its own):

  reference  droce-sim, 16-to-1 incast at 100 Gb/s (the droce-bench-sim
             scenario, 32 MiB per sender); the median of three runs
  idle N     droce-sim, a leaf-spine of N hosts (16 per leaf, 4 spines) and
             no traffic: memory per idle host
  perm N     droce-pktgen, a permutation of 1 MiB (every rank writes to one
             other) on the same leaf-spine: events per second with N hosts
  ring N     droce-pktgen, ring all-reduce of 1 MiB (up to 1024 ranks, 64
             with --quick: the ring's 2(N-1) steps of N transfers grow as N
             squared)

and with --collectives, at every size (hours at 8192: see docs/PERFORMANCE.md):

  sim ring N  droce-sim's own [collective] ring all-reduce of 1 MiB, whose
              steps are posted as their inputs complete (no schedule is
              stored)
  sim a2a N   droce-sim's [collective] all-to-all of 1 MiB with a window of
              16 transfers per rank, each over a connection of its own
  a2a N       droce-pktgen's all-to-all of 1 MiB with --window 16, the same
              connections from a stored schedule

and with --mpi, at every size, droce-sim's wall time on a scenario of flows
(each host writes 1 MiB to another, a seeded random permutation) in one
process and split over two by mpirun (docs/SIM.md "Across processes"), and
up to 1024 ranks (64 with --quick) droce-pktgen's ring all-reduce of 1 MiB
with the receiver trigger the same way (docs/PKTGEN.md "Across processes"):

  mpi N      one process pinned to each vCPU in turn, then two processes;
             the speed-up of two over the faster one, and over what these
             two vCPUs could give at best (their speeds added: the vCPUs of
             a shared machine need not be equally fast)

all with DCQCN (ECN keeps the switch buffers short, as in a fabric run
with congestion control; with none they fill, and a run's memory and time
are its buffered frames').

and prints packet events per CPU second of the whole process (setup
included; CPU rather than wall time because the machine is shared), the
ratio to the reference, and peak resident memory, one row each.
"""
import os
import random
import re
import subprocess
import sys
import tempfile
import time

INCAST = """[run]
duration = "1s"
csv_interval = "10us"
[topology]
kind = "incast"
senders = 16
rate = "100G"
delay = "1us"
flow_bytes = "32MiB"
[switch]
buffer = "4MiB"
pfc = { enabled = true, priorities = [3], xoff = "64KiB", xon = "32KiB" }
[flow]
cc = "none"
message = "1MiB"
verify = false
"""

SIM_LINE = re.compile(r"(\d+) packet events in ([0-9.]+) s wall")
PKTGEN_LINE = re.compile(r"virtual in ([0-9.]+) s wall(?: \(\d+ processes\))?, (\d+) packet events")


def run_measured(argv):
    """Runs argv in its own process: its stdout, peak RSS (KiB) and CPU s."""
    with tempfile.TemporaryFile(mode="w+") as out, tempfile.TemporaryFile(mode="w+") as errf:
        p = subprocess.Popen(argv, stdout=out, stderr=errf)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        errf.seek(0)
        err = errf.read()
        code = p.returncode
        if code not in (0, 1):
            raise RuntimeError(f"{' '.join(argv)} exited {code}: {err.strip()[-400:]}")
        out.seek(0)
        return out.read(), usage.ru_maxrss, usage.ru_utime + usage.ru_stime  # KiB, s


def collective_scenario(n, pattern, window):
    leaves, hpl = leaf_spine(n)
    return (f'[run]\nduration = "10s"\ncsv_interval = 0\n[topology]\nkind = "leaf_spine"\n'
            f'leaves = {leaves}\nspines = 4\nhosts_per_leaf = {hpl}\nhosts = {n}\n'
            f'[flow]\ncc = "dcqcn"\nverify = false\n'
            f'[collective]\npattern = "{pattern}"\nbytes = "1MiB"\nwindow = {window}\n')


def permutation_scenario(n):
    """Every host writes 1 MiB to another: a seeded random permutation
    without fixed points, so about half the flows of a 2-way split cross
    it, as in a job placed without regard to the partitions."""
    leaves, hpl = leaf_spine(n)
    rng = random.Random(n)
    dst = list(range(n))
    rng.shuffle(dst)
    for h in range(n):
        if dst[h] == h:  # swap with the next: no host writes to itself
            k = (h + 1) % n
            dst[h], dst[k] = dst[k], dst[h]
    text = (f'[run]\nduration = "1s"\ncsv_interval = 0\n[topology]\nkind = "leaf_spine"\n'
            f'leaves = {leaves}\nspines = 4\nhosts_per_leaf = {hpl}\nhosts = {n}\n'
            f'[flow]\ncc = "dcqcn"\nverify = false\nbytes = "1MiB"\n')
    return text + "".join(f'[[flows]]\nname = "f{h}"\nsrc = "h{h}"\ndst = "h{dst[h]}"\n'
                          for h in range(n))


def run_wall(argv):
    """Runs argv: (process wall s, the run's wall s from droce-sim's or
    droce-pktgen's speed line, events, peak RSS KiB of the largest
    process)."""
    t0 = time.monotonic()
    out, rss, _ = run_measured(argv)
    wall = time.monotonic() - t0
    m = SIM_LINE.search(out)
    if m:
        return wall, float(m.group(2)), int(m.group(1)), rss
    m = PKTGEN_LINE.search(out)
    return wall, float(m.group(1)), int(m.group(2)), rss


def mpi_rows(name, argv, n):
    """One process on each vCPU, then two: the MPI rows of argv."""
    one = [run_wall(["taskset", "-c", str(c)] + argv) for c in (0, 1)]
    two = run_wall(["mpirun", "--allow-run-as-root", "-np", "2"] + argv)
    fast = min(one, key=lambda r: r[0])
    # Both vCPUs busy on halves sized to their speeds: the best two can do.
    best = 1 / (1 / one[0][0] + 1 / one[1][0])
    return [(f"{name}, 1 process, vCPU {c}", n, r[2], r[0], r[1], r[3], None, None)
            for c, r in enumerate(one)] + [
        (f"{name}, 2 processes", n, two[2], two[0], two[1], two[3],
         fast[0] / two[0], best / two[0])]


def leaf_spine(n):
    leaves = max(1, (n + 15) // 16)
    return leaves, min(n, 16)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    sim, pktgen = (os.path.abspath(a) for a in args[:2])
    ranks = [16, 64, 1024, 8192]
    for a in sys.argv[1:]:
        if a.startswith("--ranks="):
            ranks = [int(x) for x in a.split("=", 1)[1].split(",")]
    quick = "--quick" in sys.argv
    collectives = "--collectives" in sys.argv
    mpi = "--mpi" in sys.argv
    rows, mpi_table = [], []
    with tempfile.TemporaryDirectory(prefix="droce-scale.") as tmp:
        incast = os.path.join(tmp, "incast.toml")
        with open(incast, "w") as f:
            f.write(INCAST)
        # The reference takes a fifth of a CPU second, where this machine's
        # speed moves by a third from one run to the next: the median of
        # three runs.
        refs = sorted((run_measured([sim, incast]) for _ in range(3)), key=lambda r: r[2])
        out, rss, cpu = refs[1]
        ref_events = int(SIM_LINE.search(out).group(1))
        ref_rate = ref_events / cpu
        rows.append(("reference: 16-to-1 incast", 17, ref_events, cpu, rss))
        idle16 = None
        for n in ranks:
            leaves, hpl = leaf_spine(n)
            idle = os.path.join(tmp, f"idle{n}.toml")
            with open(idle, "w") as f:
                f.write(f'[run]\nduration = "1us"\n[topology]\nkind = "leaf_spine"\n'
                        f'leaves = {leaves}\nspines = 4\nhosts_per_leaf = {hpl}\nhosts = {n}\n')
            _, rss, cpu = run_measured([sim, idle])
            rows.append(("idle leaf-spine", n, 0, cpu, rss))
            if idle16 is None:
                idle16 = (n, rss)
            common = ["--ranks", str(n), "-b", "1M", "-e", "1M", "-n", "1", "-w", "0",
                      "--topology", "leaf_spine", "--hosts-per-leaf", str(hpl), "--spines", "4",
                      "--cc", "dcqcn", "--quiet"]
            for pattern in ["permutation", "ring"]:
                if pattern == "ring" and (n > 1024 or (quick and n > 64)):
                    continue
                out, rss, cpu = run_measured([pktgen, "--pattern", pattern] + common)
                events = int(PKTGEN_LINE.search(out).group(2))
                rows.append((f"{pattern} 1 MiB", n, events, cpu, rss))
            if mpi:
                path = os.path.join(tmp, f"perm{n}.toml")
                with open(path, "w") as f:
                    f.write(permutation_scenario(n))
                mpi_table += mpi_rows("sim perm 1 MiB", [sim, path], n)
                # The replay split needs the receiver trigger (docs/PKTGEN.md
                # "Across processes"); the ring's N^2 transfers stop at 1024.
                if n <= (64 if quick else 1024):
                    mpi_table += mpi_rows("pktgen ring 1 MiB",
                                          [pktgen, "--pattern", "ring", "--trigger", "receiver",
                                           "--sample-interval", "100us"] + common, n)
            if not collectives:
                continue
            for name, pattern, window in [("sim ring 1 MiB", "ring", 0),
                                          ("sim a2a 1 MiB, window 16", "all_to_all", min(16, n - 1))]:
                path = os.path.join(tmp, f"{pattern}{n}.toml")
                with open(path, "w") as f:
                    f.write(collective_scenario(n, pattern, window))
                out, rss, cpu = run_measured([sim, path, "--out", os.path.join(tmp, "out")])
                if "STALLED" in out or "iterations 1/1" not in out:
                    raise RuntimeError(f"{name} at {n} ranks did not finish:\n{out[-400:]}")
                rows.append((name, n, int(SIM_LINE.search(out).group(1)), cpu, rss))
            out, rss, cpu = run_measured([pktgen, "--pattern", "all_to_all", "--window",
                                          str(min(16, n - 1))] + common)
            rows.append(("a2a 1 MiB, window 16", n, int(PKTGEN_LINE.search(out).group(2)), cpu,
                         rss))
    print("simulator scale: packet events per CPU second against the 16-to-1 incast, "
          "same command")
    print(f"{'run':<28} {'hosts':>6} {'events':>12} {'CPU s':>8} {'M ev/s':>8} "
          f"{'x incast':>8} {'peak MiB':>9} {'KiB/host':>9}")
    for name, hosts, events, cpu, rss in rows:
        rate = events / cpu if events and cpu > 0 else 0
        per_host = ""
        if name.startswith("idle") and idle16 and hosts > idle16[0]:
            per_host = f"{(rss - idle16[1]) / (hosts - idle16[0]):.1f}"
        print(f"{name:<28} {hosts:>6} {events:>12} {cpu:>8.2f} "
              f"{rate / 1e6 if rate else 0:>8.2f} "
              f"{rate / ref_rate if rate else 0:>8.2f} {rss / 1024:>9.1f} {per_host:>9}")
    print("(x incast: the run's events per CPU second over the reference's; KiB/host: peak "
          "memory over the smallest idle fabric's, per added host)")
    if mpi_table:
        print()
        print("droce-sim and droce-pktgen in one process and in two (mpirun -np 2): wall time")
        print(f"{'run':<36} {'hosts':>6} {'events':>10} {'wall s':>7} {'run s':>7} "
              f"{'M ev/s':>7} {'peak MiB':>9} {'x faster':>8} {'x best':>7}")
        for name, hosts, events, wall, run, rss, faster, best in mpi_table:
            print(f"{name:<36} {hosts:>6} {events:>10} {wall:>7.2f} {run:>7.2f} "
                  f"{events / run / 1e6 if run > 0 else 0:>7.2f} {rss / 1024:>9.1f} "
                  f"{'' if faster is None else f'{faster:.2f}':>8} "
                  f"{'' if best is None else f'{best:.2f}':>7}")
        print("(wall s: the whole command, set-up and mpirun included; run s: the run alone, "
              "from the speed line; peak MiB: the largest process; x faster: two "
              "processes against the faster vCPU alone; x best: against these two vCPUs' "
              "speeds added)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
