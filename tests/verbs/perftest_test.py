"""perftest (Debian's, unmodified) on libdroce-verbs between two processes
over net_memif: every bandwidth and latency test of RDMA WRITE, READ, SEND
and atomics exits 0 on both sides with a results row whose figures are
positive (ib_read_lat's server reports nothing), with -q 4 too; perftest keeps its plain verbs path (droce is not
a Mellanox part: "ibv_wr* API : OFF"); -R (rdma_cm) fails with a message
that says so.

Usage: perftest_test.py LIBDROCE_VERBS"""

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
        c.ok(r[0] == 0 and good, f"{name}: {side} exits 0 with a results row", show(r))
    c.ok("ibv_wr* API     : OFF" in cl[1],
         f"{name}: perftest uses ibv_post_send (no ibv_wr_* API)", cl[1])

r = subprocess.run(["ib_write_bw", "-R", "-x", "1"], env=env_for(LIB, pair.configs["s"]),
                   capture_output=True, text=True, timeout=60)
c.ok(r.returncode != 0 and "rdma_cm (librdmacm) is not supported" in r.stderr,
     "ib_write_bw -R: rdma_cm refused with a clear message, non-zero exit",
     show((r.returncode, r.stdout, r.stderr)))

c.finish()
