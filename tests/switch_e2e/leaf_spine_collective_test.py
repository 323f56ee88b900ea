"""A ring all-reduce in real time over a leaf-spine of droce-switch
processes: two leaves, two spines, every link a net_memif pair modelled at
50 Mb/s; four droce-pktgen-dpdk ranks, rank r on leaf r mod 2 (so every
ring hop crosses the spines, and each leaf sends two flows up its two
uplinks), each rank's one port used for both neighbours, each sender
capped at the link rate. Three ways to use the two paths
(docs/MULTIPATH.md):

- ecmp: the leaves hash, each QP keeps its UDP source port: each rank's
  WRITEs cross exactly one spine;
- adaptive: the leaves send each packet to the least queued uplink
  (selective repeat places what arrives out of order);
- spray: the leaves hash, the ranks vary the source port over 16 values
  per packet.

Checked: every rank exits 0, the result is verified (#wrong 0), each
rank's WRITEs crossed one spine (ecmp) or both (adaptive, spray), at
least as many as the collective needs. Printed, not checked (eight DPDK
processes share the machine's CPUs): JCT against the host links' bound,
frames per spine, frames resent, how late the switches ran.

Then the same through `scripts/multipath-experiment --real-time` (hashed
ECMP and adaptive routing): it exits 0 and writes a row a mode, verified,
where hashing loads the busiest uplink more than adaptive routing does;
and it refuses, naming the option, what real time cannot run (1 % loss,
the all-to-all, seeds).

usage: leaf_spine_collective_test.py DROCE_SWITCH DROCE_PKTGEN_DPDK DROCE_DECODE"""

import csv
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e_perf"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
from perf_common import Checks  # noqa: E402
from leaf_spine_fabric import LeafSpine, ring_frames_per_rank, run_ring  # noqa: E402

SWITCH, PKTGEN, DECODE = sys.argv[1:4]
RANKS, SIZE, MTU, ITERS, WARMUP = 4, 256 * 1024, 1024, 2, 1
RATE_BPS = 50e6
RANK_AT = [(r % 2, r // 2) for r in range(RANKS)]
ADDR = [f"10.0.0.{1 + r}" for r in range(RANKS)]  # droce-pktgen-dpdk's rank addresses
SR = ["--recovery", "sr", "--reorder-tolerance", "64", "--reth-every-packet"]
MODES = {"ecmp": ("ecmp", []),
         "adaptive": ("adaptive", SR),
         "spray": ("ecmp", SR + ["--entropy", "spray", "--entropy-paths", "16"])}
c = Checks()

# Each rank sends 2 (N - 1) / N of its buffer through its link at the
# modelled rate, each MTU of payload in a frame 78 bytes longer (Ethernet
# 14, IPv4 20, UDP 8, BTH 12, RETH 16, ICRC 4, FCS 4).
bound_s = 2 * (RANKS - 1) / RANKS * SIZE * 8 / RATE_BPS * (MTU + 78) / MTU
need = ring_frames_per_rank(RANKS, SIZE, MTU, ITERS + WARMUP)

table = []
for mode, (balance, rank_args) in MODES.items():
    tmp = tempfile.mkdtemp(prefix=f"droce_leaf_spine_ring_{mode}_")
    fabric = LeafSpine(SWITCH, tmp, dict(zip(RANK_AT, ADDR)), spines=2, rate="50M",
                       load_balance=balance, capture=True)
    try:
        fabric.start()
        outs, result = run_ring(fabric, PKTGEN, RANK_AT, SIZE, rank_args, ITERS, WARMUP,
                                rate_gbps=RATE_BPS / 1e9, mtu=MTU)
    finally:
        fabric.stop()
    for r, (rc, out) in enumerate(outs):
        c.ok(rc == 0, f"{mode}: rank {r} exit 0 ({rc}; {out.strip()[-300:]})")
    row = (result or {}).get("results", [{}])[0]
    c.ok(row.get("wrong") == 0 and row.get("iterations") == ITERS,
         f"{mode}: {ITERS} iterations, verified, #wrong 0 ({row})")
    carried = fabric.data_frames_by_sender(DECODE, ADDR)
    for ip in ADDR:
        spines = [carried[s][ip] for s in (0, 1)]
        want_both = mode != "ecmp"
        c.ok(sum(spines) >= need and (min(spines) > 0 if want_both else min(spines) == 0),
             f"{mode}: the WRITEs of {ip} crossed {'both spines' if want_both else 'one spine'}"
             f", at least {need} (through spine 0, 1: {spines})")
    per_spine = [sum(carried[s].values()) for s in (0, 1)]
    jct = row.get("jct_ns", {}).get("p50") or 0
    table.append((mode, jct / 1e6, bound_s / (jct / 1e9) if jct else 0, per_spine,
                  sum(per_spine) - need * RANKS, fabric.lag_ms()))
    if c.failed == 0:
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        print(f"     kept {tmp}")

# The experiment's real-time mode, over the same tools.
out = tempfile.mkdtemp(prefix="droce_mp_realtime_")
experiment = [os.path.join(HERE, "..", "..", "scripts", "multipath-experiment"), "--real-time",
              "--bin", os.path.dirname(os.path.abspath(PKTGEN)), "--out", out]
p = subprocess.run(experiment + ["--modes", "ecmp,adaptive", "--link-rate", "50M",
                                 "--iterations", "1"],
                   capture_output=True, text=True, timeout=300)
c.ok(p.returncode == 0, f"multipath-experiment --real-time exit 0 ({p.returncode}; "
                        f"{p.stderr.strip()[-400:]})")
rows = []
if os.path.exists(os.path.join(out, "realtime.csv")):
    with open(os.path.join(out, "realtime.csv")) as f:
        rows = {r["mode"]: r for r in csv.DictReader(f)}
c.ok(sorted(rows) == ["adaptive", "ecmp"] and all(r["wrong"] == "0" for r in rows.values()),
     f"a verified row for each mode ({list(rows)})")
if len(rows) == 2:
    spread = {m: float(r["uplink_max_over_mean"]) for m, r in rows.items()}
    c.ok(spread["ecmp"] > spread["adaptive"],
         f"hashing loads the busiest uplink more than adaptive routing ({spread})")
for bad, option in [(["--loss", "0.01"], "--loss"), (["--patterns", "all_to_all"], "--patterns"),
                    (["--seeds", "2"], "--seeds")]:
    p = subprocess.run(experiment + bad, capture_output=True, text=True, timeout=60)
    c.ok(p.returncode == 2 and p.stderr.startswith(f"multipath-experiment: {option}:"),
         f"--real-time {' '.join(bad)}: exit 2 naming {option} ({p.returncode}, {p.stderr.strip()})")
if c.failed == 0:
    shutil.rmtree(out, ignore_errors=True)

print(f"     {'mode':<9} {'JCT p50 ms':<11} {'of bound':<9} {'WRITE frames via spine 0, 1':<28} "
      f"{'resent':<7} switch lag max")
for mode, jct_ms, of_bound, per_spine, resent, lag in table:
    print(f"     {mode:<9} {jct_ms:<11.1f} {of_bound:<9.2f} {', '.join(map(str, per_spine)):<28} "
          f"{resent:<7} {lag:.1f} ms")
c.finish()
