"""droce-perf between two droce processes over net_memif: WRITE, READ and
SEND bandwidth and latency with --check (byte-exact data verification on the
target, or on the reader for READ), also with several posting threads
(--threads), perftest's columns, sane numbers; -m 4096 where the memif
slots carry it, lowered with a message where they do not; end-to-end
credits (--honour-credits) against a nearly empty receive queue.

usage: memif_test.py DROCE_PERF"""

import sys
import tempfile
import time

from perf_common import (BW_HEADER, LAT_HEADER, Checks, rows_after,
                         run_memif_pair)

exe = sys.argv[1]
c = Checks()
tmp = tempfile.mkdtemp(prefix="droce-perf-memif-")


def pair(test, args, tag):
    return run_memif_pair(exe, test, args, tmp, tag)


CASES = [
    # test, app args, expected rows, sizes
    ("write_bw", ["-n", "300", "-s", "65536", "--check"], [65536]),
    ("write_bw", ["-n", "200", "-s", "3000", "-q", "2", "--check", "--report_gbits"], [3000]),
    # More WRs in flight than the engine's command queue holds (4096): the
    # batched posts fill it and must resume exactly where they stopped.
    ("write_bw", ["-n", "20000", "-s", "64", "-t", "8192", "--check"], [64]),
    ("read_bw", ["-n", "200", "-s", "10000", "--check"], [10000]),
    # Several application threads posting and polling, each with its own
    # QPs and CQ, one data path.
    ("write_bw", ["-n", "400", "-s", "4096", "-q", "4", "--threads", "2", "--check"], [4096]),
    ("read_bw", ["-n", "200", "-s", "10000", "-q", "4", "--threads", "4", "--check"], [10000]),
    ("send_bw", ["-n", "300", "-s", "1024", "-q", "3", "--threads", "3", "--check"], [1024]),
    ("send_bw", ["-n", "300", "-s", "4096", "--check"], [4096]),
    ("write_lat", ["-n", "100", "-s", "2", "--check"], [2]),
    ("read_lat", ["-n", "100", "-s", "64", "--check"], [64]),
    ("send_lat", ["-n", "100", "-s", "1500", "--check"], [1500]),
]

t_all = time.time()
for i, (test, args, sizes) in enumerate(CASES):
    t0 = time.time()
    (src, sout, serr), (crc, cout, cerr) = pair(test, args, f"{test}{i}")
    name = f"{test} {' '.join(args)}"
    c.ok(crc == 0, f"{name}: client exit 0 (got {crc}; stderr: {cerr.strip()[-600:]})")
    c.ok(src == 0, f"{name}: server exit 0 (got {src}; stderr: {serr.strip()[-600:]})")
    c.ok("Data check: PASS" in cout and "Data check: PASS" in sout,
         f"{name}: byte-exact data check passed on both sides")
    lat = test.endswith("_lat")
    rows = rows_after(LAT_HEADER if lat else BW_HEADER, cout)
    c.ok(rows is not None and [int(r[0]) for r in rows] == sizes,
         f"{name}: one row per size under perftest's columns ({rows})")
    if rows:
        r = rows[0]
        n = int(args[args.index("-n") + 1])
        q = int(args[args.index("-q") + 1]) if "-q" in args else 1
        c.ok(int(r[1]) == n * q, f"{name}: #iterations {int(r[1])} == {n * q}")
        if lat:
            tmin, tmax, typ, avg, std, p99, p999 = r[2:9]
            c.ok(0 < tmin <= typ <= p99 <= p999 <= tmax and tmin <= avg <= tmax
                 and std >= 0, f"{name}: min <= typical <= p99 <= p99.9 <= max")
        else:
            peak, avg, mpps = r[2:5]
            c.ok(avg > 0 and peak >= avg and mpps > 0,
                 f"{name}: peak {peak} >= average {avg} > 0, msg rate {mpps} Mpps")
    # A close racing with the peer's disconnect on DPDK's interrupt thread
    # showed up as a double free before it crashed.
    c.ok("Invalid memory" not in serr + cerr,
         f"{name}: no 'EAL: Error: Invalid memory' at shutdown")
    print(f"     ({time.time() - t0:.1f} s)", flush=True)

# The path MTU and what the port carries: memif slots of 8192 bytes carry
# -m 4096; the default 2048-byte slots do not, and both sides lower it to
# the largest that fits (1024 with its headers), say so, and still deliver
# every byte, as perftest does with a port's active MTU.
t0 = time.time()
for bsize, want in ((8192, 4096), (None, 1024)):
    extra = f",bsize={bsize}" if bsize else ""
    (src, sout, serr), (crc, cout, cerr) = run_memif_pair(
        exe, "write_bw", ["-n", "200", "-s", "10000", "-m", "4096", "--check"], tmp,
        f"mtu{want}", vdev_extra=extra)
    name = f"write_bw -m 4096 over memif{extra or ' (default slots)'}"
    c.ok(src == 0 and crc == 0 and "Data check: PASS" in cout and "Data check: PASS" in sout,
         f"{name}: both exit 0, byte-exact ({src}, {crc}; {cerr.strip()[-300:]})")
    c.ok(f"Mtu             : {want}[B]" in cout, f"{name}: the client runs at MTU {want}")
    lowered = [f"-m 4096: port 0 carries" in err and f"using -m {want}" in err
               for err in (serr, cerr)]
    c.ok(lowered == [want < 4096] * 2,
         f"{name}: {'both sides say the MTU was lowered' if want < 4096 else 'no MTU lowered'} "
         f"({lowered})")
print(f"     ({time.time() - t0:.1f} s)", flush=True)

# End-to-end credits (IBA 9.7.7.2): a server that keeps only 4 receive WRs
# posted meets a stream of small SENDs. Without --honour-credits the client
# sends into the empty queue and is RNR NAKed; with it, it waits for the
# credits the server's ACKs advertise and is never NAKed. Both deliver every
# byte.
def rnr_naks(out):
    for line in out.splitlines():
        f = line.split()
        if len(f) == 2 and f[0] == "rnr_naks_received":
            return int(f[1])
    return 0


t0 = time.time()
for honour in (False, True):
    flags = ["--honour-credits"] if honour else []
    (src, sout, serr), (crc, cout, cerr) = run_memif_pair(
        exe, "send_bw", ["-n", "3000", "-s", "64", "-t", "256", "--check"], tmp,
        f"credits{int(honour)}", server_args=["-r", "4"], client_args=flags + ["--counters"])
    name = f"send_bw into 4 receive WRs{' --honour-credits' if honour else ''}"
    c.ok(src == 0 and crc == 0 and "Data check: PASS" in cout and "Data check: PASS" in sout,
         f"{name}: both exit 0, byte-exact ({src}, {crc}; {cerr.strip()[-300:]})")
    naks = rnr_naks(cout)
    if honour:
        c.ok(naks == 0, f"{name}: no RNR NAK (got {naks})")
    else:
        c.ok(naks > 0, f"{name}: RNR NAKed without credits (got {naks})")
print(f"     ({time.time() - t0:.1f} s)", flush=True)

# Start and teardown, many times: the client connecting to a memif server
# whose port was not started yet left both links down for good ("ID not
# found"), and both sides closing their ports at once crashed the slower
# one (SIGSEGV on its interrupt thread, exit -11). Short runs make many
# starts and closes.
t0 = time.time()
bad = []
for k in range(10):
    (src, sout, serr), (crc, cout, cerr) = pair(
        "write_lat", ["-n", "20", "-s", "2"], f"teardown{k}")
    if src != 0 or crc != 0 or "Invalid memory" in serr + cerr:
        bad.append((k, src, crc, serr.strip()[-300:], cerr.strip()[-300:]))
c.ok(not bad, f"10 short write_lat pairs start and stop cleanly ({bad})")
print(f"     ({time.time() - t0:.1f} s)", flush=True)

print(f"total {time.time() - t_all:.1f} s")
c.finish()
