"""libdroce-verbs against droce's own droce-perf on the same link: perftest
(unmodified, LD_PRELOAD) and droce-perf run the same test, size and QP
count over one net_memif pair, alternately, and the bench prints each
one's median and the ratio (perftest / droce-perf for bandwidth, the
difference in t_typical for latency).

Both run the way the preloaded library must: one lcore per process, the
engine's worker a thread beside the application's (droce-perf
--run-to-completion false), idle-sleeping workers (20 us), MTU 1024 (droce-perf's
default). perftest posts one WR per ibv_post_send; droce-perf posts up to
32 at a time (docs/ENGINE.md "Threading"), so the bandwidth ratio includes
that.

usage: verbs_bench.py BUILD_DIR [--rounds R] [--seconds S]"""

import os
import statistics
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "verbs"))
from verbs_common import (BW_HEADER, EAL_COMMON, LAT_HEADER, MemifPair, free_tcp_port,  # noqa: E402
                          need_programs, rows_after, run_pair)

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 3
seconds = sys.argv[sys.argv.index("--seconds") + 1] if "--seconds" in sys.argv else "3"
lib = os.path.join(build, "src/verbs/libdroce-verbs.so")
perf = os.path.join(build, "apps/droce-perf")
need_programs(["ib_write_bw", "ib_read_bw", "ib_send_bw", "ib_write_lat"])
tmp = tempfile.mkdtemp(prefix="droce-verbs-bench-")
pair = MemifPair(tmp, "vb", extra="mtu = 1024\n")
# MemifPair's configurations sleep 20 us when idle, as droce-perf below.

CASES = [("write_bw", 65536, 1), ("read_bw", 65536, 1), ("send_bw", 65536, 1),
         ("write_bw", 4096, 1), ("write_bw", 65536, 4), ("write_lat", 2, 1),
         ("send_lat", 2, 1)]


def droce_perf(test, size, qps):
    sock = os.path.join(tmp, "dp.sock")
    if os.path.exists(sock):
        os.unlink(sock)
    port = free_tcp_port()
    lat = test.endswith("_lat")
    common = ["--test", test, "-p", str(port), "-s", str(size), "--report_gbits",
              "--run-to-completion", "false", "--idle-sleep-us", "20"]
    common += ["-n", "2000"] if lat else ["-D", seconds, "-q", str(qps)]
    eal = {side: ["-l", str(i), f"--file-prefix=vbp_{side}_{os.getpid()}",
                  f"--vdev=net_memif0,role={role},socket={sock},socket-abstract=no",
                  *EAL_COMMON] for i, (side, role) in enumerate((("s", "server"),
                                                                  ("c", "client")))}
    srv = subprocess.Popen([perf, *eal["s"], "--", *common, "--server"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while not os.path.exists(sock) and srv.poll() is None:
        time.sleep(0.05)
    time.sleep(0.3)
    cli = subprocess.run([perf, *eal["c"], "--", *common, "--connect", "127.0.0.1"],
                         capture_output=True, text=True, timeout=120)
    srv.communicate(timeout=60)
    return figure(cli.stdout, lat)


def perftest(test, size, qps):
    lat = test.endswith("_lat")
    cmd = [f"ib_{test}", "-x", "1", "--report_gbits", "-s", str(size)]
    cmd += ["-n", "2000"] if lat else ["-D", seconds, "-q", str(qps)]
    _, cli = run_pair(lib, pair, cmd, cmd, timeout=120)
    return figure(cli[1], lat)


def figure(out, lat):
    rows = rows_after(LAT_HEADER if lat else BW_HEADER, out)
    if not rows:
        return None
    return rows[0][4] if lat else rows[0][3]  # t_typical [us] / BW average [Gb/s]


print(f"{'test':<10} {'size':>6} {'qps':>3}  {'droce-perf':>11}  {'perftest':>9}  ratio")
for test, size, qps in CASES:
    ours, theirs = [], []
    for _ in range(rounds):
        for fn, acc in ((droce_perf, ours), (perftest, theirs)):
            v = fn(test, size, qps)
            if v is not None:
                acc.append(v)
    if not ours or not theirs:
        print(f"{test:<10} {size:>6} {qps:>3}  failed ({len(ours)}, {len(theirs)} runs)")
        continue
    a, b = statistics.median(ours), statistics.median(theirs)
    unit = "us" if test.endswith("_lat") else "Gb/s"
    rel = f"{b - a:+.1f} us" if unit == "us" else f"{b / a:.2f}x"
    print(f"{test:<10} {size:>6} {qps:>3}  {a:>7.2f} {unit:<4} {b:>6.2f} {unit:<4} {rel}",
          flush=True)
