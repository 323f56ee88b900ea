"""Unmodified RDMA programs on libdroce-verbs between two network namespaces
over a veth pair with net_af_packet, the link a real host's Ethernet port
stands for: the RC, UD and SRQ ping-pongs, perftest's WRITE and READ
bandwidth and SEND latency exit 0 on both sides with their results. droce
has no neighbour table here: it finds the peer's MAC by ARP, and its
counters at exit show no parse or ICRC error. Needs root (ip netns); the
namespaces go whatever happens.

Usage: veth_test.py LIBDROCE_VERBS"""

import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from verbs_common import (BW_HEADER, LAT_HEADER, SKIP, Checks, NetnsPair,  # noqa: E402
                          need_programs, rows_after, run_pair, show)

LIB = sys.argv[1]
if os.geteuid() != 0 or not shutil.which("ip"):
    print("skipped: needs root and ip (network namespaces)")
    sys.exit(SKIP)
need_programs(["ibv_rc_pingpong", "ibv_ud_pingpong", "ibv_srq_pingpong", "ib_write_bw",
               "ib_read_bw", "ib_send_lat"])
c = Checks()
tmp = tempfile.mkdtemp(prefix="droce_verbs_veth_")
# The counters the library prints at exit (docs/VERBS.md "Configuration").
pair = NetnsPair(tmp, "v", extra="counters_at_exit = true\n")
try:
    ITERS = re.compile(r"(\d+) iters in [\d.]+ seconds")
    for name, cmd, iters in [
        ("ibv_rc_pingpong -g 1", ["ibv_rc_pingpong", "-g", "1"], 1000),
        ("ibv_rc_pingpong -g 1 -s 65536 -n 500",
         ["ibv_rc_pingpong", "-g", "1", "-s", "65536", "-n", "500"], 500),
        ("ibv_ud_pingpong -g 1 -s 1024", ["ibv_ud_pingpong", "-g", "1", "-s", "1024"], 1000),
        ("ibv_srq_pingpong -g 1", ["ibv_srq_pingpong", "-g", "1"], 1000),
    ]:
        s, cl = run_pair(LIB, pair, cmd, cmd)
        for side, r in (("server", s), ("client", cl)):
            m = ITERS.search(r[1])
            c.ok(r[0] == 0 and m and int(m.group(1)) == iters,
                 f"veth: {name}: {side} exits 0 with its results line ({iters} iters)", show(r))

    for tool, args, header in [("ib_write_bw", ["-D", "1"], BW_HEADER),
                               ("ib_read_bw", ["-D", "1"], BW_HEADER),
                               ("ib_send_lat", ["-n", "500"], LAT_HEADER)]:
        cmd = [tool, "-x", "1", "--report_gbits", *args]
        name = " ".join([tool, *args])
        s, cl = run_pair(LIB, pair, cmd, cmd)
        for side, r in (("server", s), ("client", cl)):
            rows = rows_after(header, r[1])
            good = bool(rows) and all(x[1] > 0 and x[3] > 0 and x[4] > 0 for x in rows)
            c.ok(r[0] == 0 and good, f"veth: {name}: {side} exits 0 with a results row", show(r))
        # Each side's non-zero counters, printed at exit: frames went both
        # ways, none was malformed (the rx_error_* reasons and their sum).
        for side, r in (("server", s), ("client", cl)):
            err = r[2]
            counters = dict(re.findall(r"^\s+(\w+)\s+(\d+)$", err, re.M))
            c.ok("libdroce-verbs: counters at exit" in err
                 and int(counters.get("rx_delivered", 0)) > 0
                 and "rx_malformed" not in counters
                 and not any(k.startswith("rx_error_") for k in counters),
                 f"veth: {name}: {side}'s counters at exit: frames in, no parse or ICRC error",
                 err[-3000:])
finally:
    pair.remove()
    shutil.rmtree(tmp, ignore_errors=True)
c.finish()
