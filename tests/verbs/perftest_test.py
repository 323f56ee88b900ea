"""perftest (Debian's, unmodified) on libdroce-verbs between two processes
over net_memif: every bandwidth and latency test of RDMA WRITE, READ, SEND
and atomics exits 0 on both sides with a results row whose figures are
positive (ib_read_lat's server reports nothing), with -q 4 and -a (every
size, 2 B to 8 MiB) too; perftest keeps its plain verbs path (droce is not
a Mellanox part: "ibv_wr* API : OFF"); -R (rdma_cm) fails with a message
that says so. With a rate cap in droce's configuration (port_rate_gbps),
ib_write_bw reports what the cap leaves for the payload, as droce-perf's
rate test checks it.

Usage: perftest_test.py LIBDROCE_VERBS"""

import math
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from verbs_common import (BW_HEADER, LAT_HEADER, Checks, MemifPair, env_for,  # noqa: E402
                          need_programs, rows_after, run_pair, show)
import subprocess  # noqa: E402

LIB = sys.argv[1]
BW = ["ib_write_bw", "ib_read_bw", "ib_send_bw", "ib_atomic_bw"]
LAT = ["ib_write_lat", "ib_read_lat", "ib_send_lat"]
need_programs(BW + LAT)
c = Checks()
tmp = tempfile.mkdtemp(prefix="droce_perftest_")
pair = MemifPair(tmp, "pt")

cases = [(t, ["-D", "1"], BW_HEADER) for t in BW]
cases += [("ib_write_bw", ["-D", "1", "-q", "4"], BW_HEADER)]
# Every size from 2 bytes to 8 MiB, 1000 messages each.
cases += [("ib_write_bw", ["-a"], BW_HEADER)]
cases += [(t, ["-n", "500"], LAT_HEADER) for t in LAT]
for tool, args, header in cases:
    cmd = [tool, "-x", "1", "--report_gbits", *args]
    name = " ".join([tool, *args])
    s, cl = run_pair(LIB, pair, cmd, cmd)
    for side, r in (("server", s), ("client", cl)):
        if tool == "ib_read_lat" and side == "server":
            # Its server only serves the READs; the client reports.
            c.ok(r[0] == 0, f"{name}: server exits 0", show(r))
            continue
        rows = rows_after(header, r[1])
        # Bandwidth rows: bytes, iterations, peak, average, rate; latency
        # rows: bytes, iterations, t_min, t_max, t_typical, ...
        good = bool(rows) and all(x[1] > 0 and x[3] > 0 and x[4] > 0 for x in rows)
        if "-a" in args and side == "client":
            good = good and [int(x[0]) for x in rows] == [2 ** k for k in range(1, 24)]
        c.ok(r[0] == 0 and good, f"{name}: {side} exits 0 with a results row", show(r))
    c.ok("ibv_wr* API     : OFF" in cl[1],
         f"{name}: perftest uses ibv_post_send (no ibv_wr_* API)", cl[1])

# The rate cap: 2 Gb/s on both ports, MTU 1024, 64 KiB WRITEs. What the cap
# leaves for the payload (tests/e2e_perf/rate_test.py): each of the 64
# frames carries Ethernet, IPv4, UDP, BTH and ICRC headers and the wire's
# FCS, preamble and gap, the first a RETH too.
RATE, SIZE, MTU = 2, 65536, 1024
capped = MemifPair(tmp, "ptcap", extra=f"mtu = {MTU}\nport_rate_gbps = {RATE}\n")
cmd = ["ib_write_bw", "-x", "1", "--report_gbits", "-s", str(SIZE), "-D", "2"]
s, cl = run_pair(LIB, capped, cmd, cmd)
per_frame = 14 + 20 + 8 + 12 + 4 + 24
want = RATE * SIZE / (SIZE + math.ceil(SIZE / MTU) * per_frame + 16)
rows = rows_after(BW_HEADER, cl[1])
avg = rows[0][3] if rows else 0.0
c.ok(s[0] == 0 and cl[0] == 0 and 0.85 * want <= avg <= 1.01 * want,
     f"ib_write_bw with port_rate_gbps = {RATE}: BW average {avg:.3f} Gb/s, "
     f"the cap leaves {want:.3f}", show(cl))

r = subprocess.run(["ib_write_bw", "-R", "-x", "1"], env=env_for(LIB, pair.configs["s"]),
                   capture_output=True, text=True, timeout=60)
c.ok(r.returncode != 0 and "rdma_cm (librdmacm) is not supported" in r.stderr,
     "ib_write_bw -R: rdma_cm refused with a clear message, non-zero exit",
     show((r.returncode, r.stdout, r.stderr)))

c.finish()
