"""droce-perf's perftest flags -a (all sizes) and -D (duration) between two
droce processes over net_memif (memif_test.py's set-up).

-a: one row per size, 2, 4, ... 2^23 in that order (perftest's -a), under
one column header, each with -n iterations (times -q), and the byte-exact
data check of every size passes on both sides; for all six tests, and for
write_lat / send_lat on the server's rows too.

-D: the run lasts about as long as asked, from both ends: the client
process takes at least D seconds (and not more than D plus a generous
start-up allowance), and the measurement the row reports covers D seconds
(bandwidth: #iterations / MsgRate; latency: the sum of the round trips),
so a run that stops early or late, or a row computed over the wrong time,
fails. The row is sane (enough iterations, average > 0, peak >= average,
MsgRate x size = average) and the data check passes.

usage: modes_test.py DROCE_PERF"""

import sys
import tempfile
import time

from perf_common import (BW_HEADER, LAT_HEADER, Checks, rows_after,
                         run_memif_pair)

exe = sys.argv[1]
c = Checks()
tmp = tempfile.mkdtemp(prefix="droce-perf-modes-")
SIZES = [2 ** i for i in range(1, 24)]  # perftest's -a: 2 .. 2^23
MB = 1 << 20                            # perftest's MB/sec


def pair(test, args, tag):
    return run_memif_pair(exe, test, args, tmp, tag)


def ran_clean(name, s, cl):
    (src, sout, serr), (crc, cout, cerr) = s, cl
    c.ok(crc == 0, f"{name}: client exit 0 (got {crc}; stderr: {cerr.strip()[-600:]})")
    c.ok(src == 0, f"{name}: server exit 0 (got {src}; stderr: {serr.strip()[-600:]})")
    c.ok("Data check: PASS" in cout and "Data check: PASS" in sout,
         f"{name}: byte-exact data check passed on both sides")


def rate_matches(size, iters, peak, avg, mpps):
    """BW average is MsgRate x #bytes, to the digits printed (half a unit in
    the last place of each: 0.01 MB/sec, 0.000001 Mpps)."""
    return abs(mpps * 1e6 * size / MB - avg) <= 0.006 + 0.5 * size / MB + 0.001 * avg


t_all = time.time()

# ---- -a: every size, in perftest's order ------------------------------------
ALL_CASES = [
    ("write_bw", ["-a", "-n", "5", "--check"]),
    ("write_bw", ["-a", "-n", "4", "-q", "2", "--check"]),
    ("read_bw", ["-a", "-n", "5", "--check"]),
    ("send_bw", ["-a", "-n", "5", "--check"]),
    ("write_lat", ["-a", "-n", "5", "--check"]),
    ("read_lat", ["-a", "-n", "5", "--check"]),
    ("send_lat", ["-a", "-n", "5", "--check"]),
]
for i, (test, args) in enumerate(ALL_CASES):
    t0 = time.time()
    s, cl = pair(test, args, f"all{i}")
    name = f"{test} {' '.join(args)}"
    ran_clean(name, s, cl)
    lat = test.endswith("_lat")
    header = LAT_HEADER if lat else BW_HEADER
    n = int(args[args.index("-n") + 1])
    q = int(args[args.index("-q") + 1]) if "-q" in args else 1
    # The server plays ping-pong in write_lat and send_lat and prints its rows.
    sides = [("client", cl[1])] + ([("server", s[1])] if test in ("write_lat", "send_lat")
                                   else [])
    for side, out in sides:
        c.ok(len(header.findall(out)) == 1, f"{name}: {side} prints the column header once")
        rows = rows_after(header, out) or []
        c.ok([int(r[0]) for r in rows] == SIZES,
             f"{name}: {side} #bytes column is 2 .. 2^23 in order "
             f"({[int(r[0]) for r in rows]})")
        c.ok(all(int(r[1]) == n * q for r in rows),
             f"{name}: {side} #iterations {n * q} in every row "
             f"({sorted({int(r[1]) for r in rows})})")
        if lat:
            c.ok(all(0 < r[2] <= r[4] <= r[3] for r in rows),
                 f"{name}: {side} t_min <= t_typical <= t_max in every row")
        else:
            # Five 2-byte messages make an average that prints as 0.00 MB/sec:
            # the message rate (six decimals) is the one that must be > 0.
            bad = [r for r in rows
                   if not (r[4] > 0 and r[2] >= r[3] >= 0 and rate_matches(*r[:5]))]
            c.ok(not bad, f"{name}: {side} msg rate > 0, BW average = msg rate x size, "
                          f"peak >= average in every row (wrong: {bad})")
    print(f"     ({time.time() - t0:.1f} s)", flush=True)

# ---- -D: runs for the duration -----------------------------------------------
# Start-up (EAL, memif connect, OOB) takes a second or two here, more on a
# loaded 2-core machine: the upper wall-clock bound is loose on purpose; the
# tight bound is on the measured window.
STARTUP_ALLOWANCE = 30
DUR_CASES = [
    ("write_bw", 1, ["--check"]),
    ("write_bw", 3, ["--check"]),
    ("send_bw", 2, ["-q", "2", "-s", "4096", "--check"]),
    ("read_bw", 2, ["-s", "16384", "--check"]),
    ("write_lat", 2, ["--check"]),
    ("read_lat", 2, ["--check"]),
]
for i, (test, dur, extra) in enumerate(DUR_CASES):
    args = ["-D", str(dur), *extra]
    name = f"{test} {' '.join(args)}"
    t0 = time.time()
    s, cl = pair(test, args, f"dur{i}")
    wall = time.time() - t0
    ran_clean(name, s, cl)
    c.ok(dur <= wall <= dur + STARTUP_ALLOWANCE,
         f"{name}: the pair ran {wall:.1f} s, within [{dur}, {dur + STARTUP_ALLOWANCE}] s")
    c.ok(f"Duration       : {dur} s" in cl[1], f"{name}: the header names the duration")
    lat = test.endswith("_lat")
    rows = rows_after(LAT_HEADER if lat else BW_HEADER, cl[1])
    if not c.ok(rows is not None and len(rows) == 1, f"{name}: one row ({rows})"):
        continue
    r = rows[0]
    size = int(r[0])
    iters = int(r[1])
    if lat:
        # Each iteration is one round trip (write_lat: twice the reported
        # half round trip; read_lat: the READ), back to back: their sum is
        # the run, less the little that happens between two iterations
        # (a preemption there is rare: it is a small part of each one).
        tmin, tmax, avg = r[2], r[3], r[5]
        rtt = avg * (2 if test == "write_lat" else 1) * 1e-6
        window = iters * rtt
        c.ok(iters >= 10, f"{name}: {iters} iterations (at least 10)")
        c.ok(0.75 * dur <= window <= dur + 2 * tmax * 1e-6 + 0.5,
             f"{name}: the iterations' round trips add up to {window:.2f} s, about {dur} s")
        c.ok(0 < tmin <= avg <= tmax, f"{name}: t_min <= t_avg <= t_max")
    else:
        peak, avg, mpps = r[2], r[3], r[4]
        c.ok(iters >= 100, f"{name}: {iters} iterations (at least 100)")
        c.ok(0 < avg <= peak and mpps > 0 and avg < 100_000,
             f"{name}: 0 < average {avg} <= peak {peak} MB/s, under 100 GB/s, msg rate {mpps}")
        # The window the row was measured over: messages / message rate. It
        # starts at the start barrier and ends with the last completion,
        # after the WRs in flight at the deadline drained.
        window = iters / (mpps * 1e6) if mpps > 0 else 0
        c.ok(0.95 * dur <= window <= dur + 2,
             f"{name}: measured over {window:.3f} s, about {dur} s")
        c.ok(rate_matches(size, iters, peak, avg, mpps),
             f"{name}: MsgRate x #bytes = BW average ({mpps * 1e6 * size / MB:.2f} vs {avg})")
    print(f"     ({wall:.1f} s)", flush=True)

print(f"total {time.time() - t_all:.1f} s")
c.finish()
