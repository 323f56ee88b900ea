"""The multipath experiment in real time (`multipath-experiment
--real-time`): the ring all-reduce of droce-pktgen-dpdk ranks over a
leaf-spine of droce-switch processes (leaf_spine_fabric.py), for each mode
and condition, instead of droce-sim's virtual time.

The fabric: 2 hosts per leaf, ranks / 2 leaves, 2 spines; rank r on leaf
r mod L, so every ring hop crosses the spines and each leaf sends as many
flows up as it has uplinks (the placement where hashing collides, as in
virtual time). Every link at the --link-rate (uplinks at half of it for
2:1), each rank's sends capped at it. The modes set the same things as in
virtual time (the switches' load balancing, the ranks' entropy, selective
repeat with a reorder tolerance of 64 packets and a RETH in every WRITE
packet), with the times scaled to the link rate: flowlet gaps of 12
frame times, RTO_low of 75 (what 4 us and 25 us are at 100 G). The
path-aware round-trip threshold is the transport's default (4 us); the
switches model no loss, so --loss is 0.

Outputs OUT/realtime.md and OUT/realtime.csv: JCT p50 / p99 over the
iterations against the host links' bound, the busiest uplink's bytes over
the mean (the leaves' counters), the WRITE frames beyond what the
collective needs (resent, from the spines' captures), PFC pause frames
sent, drops, and how late the switches ran at worst: on a machine with
fewer CPUs than the 2 + ranks / 2 + ranks processes, that lateness is part
of every figure.
"""
import csv
import os
import shutil
import sys

from leaf_spine_fabric import LeafSpine, ring_frames_per_rank, run_ring

MTU = 1024
HEADER_BYTES = 78  # Ethernet 14, IPv4 20, UDP 8, BTH 12, RETH 16, ICRC 4, FCS 4
HOSTS_PER_LEAF, SPINES = 2, 2
COLUMNS = ["ranks", "oversub", "pfc", "mode", "link_rate", "bytes", "iterations", "jct_p50_ms",
           "jct_p99_ms", "bound_ms", "of_bound", "of_bound_p99", "uplink_max_over_mean",
           "resent_frames", "pfc_xoff_sent", "drops", "switch_lag_max_ms", "wrong"]


def parse_rate(text):
    units = {"K": 1e3, "M": 1e6, "G": 1e9}
    try:
        if text[-1:].upper() in units:
            return float(text[:-1]) * units[text[-1].upper()]
        return float(text)
    except ValueError:
        return None


def mode_setup(mode, rate_bps):
    """(leaves' --load-balance, their extra flags, the ranks' flags)."""
    frame_us = (MTU + HEADER_BYTES) * 8 / rate_bps * 1e6
    gap_us = max(1, round(12 * frame_us))
    # RTO_low 25 us in virtual time is 75 of its 4 KiB frames at 100 G.
    rto_low_us = max(1, round(75 * frame_us))
    sr = ["--recovery", "sr", "--reorder-tolerance", "64", "--reth-every-packet",
          "--rto-low", f"{rto_low_us}us"]
    return {
        "ecmp": ("ecmp", [], sr),
        "spray": ("ecmp", [], sr + ["--entropy", "spray", "--entropy-paths", "16384"]),
        "flowlet": ("ecmp", [], sr + ["--entropy", "flowlet", "--entropy-paths", "64",
                                      "--flowlet-gap", f"{gap_us}us"]),
        "path_aware": ("ecmp", [], sr + ["--entropy", "path_aware", "--entropy-paths", "64"]),
        "adaptive": ("adaptive", [], sr),
        "adaptive_flowlet": ("adaptive_flowlet", ["--flowlet-gap", f"{gap_us}us"], sr),
        "adaptive_gbn": ("adaptive", [], ["--recovery", "gbn"]),
    }[mode]


def run_point(tools, out, ranks, oversub, pfc, mode, rate_bps, nbytes, iterations):
    balance, leaf_flags, rank_flags = mode_setup(mode, rate_bps)
    rank_at = [(r % (ranks // HOSTS_PER_LEAF), r // (ranks // HOSTS_PER_LEAF))
               for r in range(ranks)]
    addr = [f"10.0.0.{1 + r}" for r in range(ranks)]
    work = os.path.join(out, "realtime-runs", f"r{ranks}-os{oversub}-{mode}-pfc{int(pfc)}")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    pfc_flags = ["--pfc", "--pfc-priorities", "0"] if pfc else []
    fabric = LeafSpine(tools["switch"], work, dict(zip(rank_at, addr)), spines=SPINES,
                       rate=f"{rate_bps / 1e6:g}M", uplink_rate=f"{rate_bps / oversub / 1e6:g}M",
                       load_balance=balance, capture=True,
                       switch_args=leaf_flags + pfc_flags)
    try:
        fabric.start()
        outs, result = run_ring(fabric, tools["pktgen_dpdk"], rank_at, nbytes, rank_flags,
                                iters=iterations, warmup=1, rate_gbps=rate_bps / 1e9, mtu=MTU,
                                timeout_s=max(60, 200 * nbytes * 8 / rate_bps))
    finally:
        fabric.stop()
    failed = [f"rank {r}: exit {rc}: {o.strip()[-300:]}" for r, (rc, o) in enumerate(outs) if rc]
    row = (result or {}).get("results", [{}])[0]
    if failed or not row.get("iterations"):
        return None, "; ".join(failed) or "no result"
    # The host links' bound, or the uplinks' at 2:1 (every ring hop crosses them).
    share = 2 * (ranks - 1) / ranks * nbytes * 8 * (MTU + HEADER_BYTES) / MTU
    bound_ms = share / (rate_bps / oversub) * 1e3
    counters = fabric.counters()
    uplinks = [p["tx_bytes"] for l in range(fabric.leaves)
               for p in counters[f"leaf{l}"]["ports"][HOSTS_PER_LEAF:]]
    carried = fabric.data_frames_by_sender(tools["decode"], addr)
    need = ring_frames_per_rank(ranks, nbytes, MTU, iterations + 1)
    jct = row["jct_ns"]
    return {
        "ranks": ranks, "oversub": oversub, "pfc": "on" if pfc else "off", "mode": mode,
        "link_rate": f"{rate_bps / 1e6:g}M", "bytes": nbytes, "iterations": iterations,
        "jct_p50_ms": round(jct["p50"] / 1e6, 2), "jct_p99_ms": round(jct["p99"] / 1e6, 2),
        "bound_ms": round(bound_ms, 2),
        "of_bound": round(bound_ms / (jct["p50"] / 1e6), 3),
        "of_bound_p99": round(bound_ms / (jct["p99"] / 1e6), 3),
        "uplink_max_over_mean": round(max(uplinks) / (sum(uplinks) / len(uplinks)), 3)
        if sum(uplinks) else 0,
        "resent_frames": sum(sum(c.values()) for c in carried) - need * ranks,
        "pfc_xoff_sent": sum(p["tx_xoff"] for c in counters.values() for p in c["ports"]),
        "drops": sum(p["drops"] for c in counters.values() for p in c["ports"]),
        "switch_lag_max_ms": round(fabric.lag_ms(counters), 1), "wrong": row.get("wrong"),
    }, None


def run(tools, out, ranks_list, oversubs, pfcs, modes, rate_bps, nbytes, iterations):
    """Every point; writes the table and CSV; returns the exit code."""
    rows, failed = [], False
    for ranks in ranks_list:
        for oversub in oversubs:
            for pfc in pfcs:
                for mode in modes:
                    row, err = run_point(tools, out, ranks, oversub, pfc, mode, rate_bps, nbytes,
                                         iterations)
                    tag = f"real time/{ranks}/{oversub}:1/pfc {'on' if pfc else 'off'}/{mode}"
                    if row is None:
                        failed = True
                        print(f"multipath-experiment: {tag}: {err}", file=sys.stderr)
                        row = {"ranks": ranks, "oversub": oversub, "pfc": "on" if pfc else "off",
                               "mode": mode, "link_rate": f"{rate_bps / 1e6:g}M",
                               "bytes": nbytes, "iterations": iterations}
                        row.update({c: "failed" for c in COLUMNS if c not in row})
                    else:
                        print(f"{tag}: JCT {row['jct_p50_ms']} ms, bound {row['bound_ms']} ms",
                              file=sys.stderr)
                    rows.append(row)
    with open(os.path.join(out, "realtime.md"), "w") as f:
        f.write("| " + " | ".join(COLUMNS) + " |\n|" + "---|" * len(COLUMNS) + "\n")
        for r in rows:
            f.write("| " + " | ".join(str(r[c]) for c in COLUMNS) + " |\n")
    with open(os.path.join(out, "realtime.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    return 1 if failed else 0
