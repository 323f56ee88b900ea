"""droce-perf between two processes over net_memif, each with its port's 4
QPs sharded over two worker lcores (--shards 2): write_bw and read_bw with
--check (byte-exact on the target / the reader), both directions of traffic,
retransmission and completions coming from two workers. --counters shows
per shard which lcore ran which QPs; both lcores must have QPs and traffic.
net_memif has one RX queue per side and, for memif, the engine keeps one TX
queue (its TX queue i is the peer's RX queue i), so shard 1 sends through
the ring to the RX lcore.

usage: perf_shard_test.py DROCE_PERF"""

import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e_perf"))
from perf_common import BW_HEADER, Checks, rows_after, run_pair  # noqa: E402

exe = sys.argv[1]
c = Checks()
tmp = tempfile.mkdtemp(prefix="droce-perf-shard-")
pid = os.getpid()
SHARD_RE = re.compile(r"shard (\d) lcore (\d+): qps (\d+) tx_queue (\S+) rx_delivered (\d+) "
                      r"tx_frames (\d+) rx_from_ring (\d+) tx_to_ring (\d+)")
QP_RE = re.compile(r"^qp (0x[0-9a-f]+) \(port 0, lcore (\d+),", re.M)


def pair(test, args, tag):
    sock = os.path.join(tmp, f"{tag}.sock")
    # Three lcores each (main + two workers) on a machine that may have two
    # CPUs: lcores share CPUs; the workers sleep when idle.
    s_eal = ["--lcores", "0@0,1@1,2@0", f"--file-prefix=dps_s_{pid}_{tag}",
             f"--vdev=net_memif0,role=server,socket={sock},socket-abstract=no"]
    c_eal = ["--lcores", "0@1,1@0,2@1", f"--file-prefix=dps_c_{pid}_{tag}",
             f"--vdev=net_memif0,role=client,socket={sock},socket-abstract=no"]
    common = ["--shards", "2", "--idle-sleep-us", "20", "--counters", *args]
    return run_pair(exe, test, s_eal, c_eal, common, wait_for_path=sock, timeout=120)


for i, (test, args) in enumerate([
        ("write_bw", ["-n", "200", "-s", "8192", "-q", "4", "--check"]),
        ("read_bw", ["-n", "100", "-s", "10000", "-q", "4", "--check"])]):
    (src, sout, serr), (crc, cout, cerr) = pair(test, args, f"{test}{i}")
    name = f"{test} {' '.join(args)} --shards 2"
    c.ok(crc == 0, f"{name}: client exit 0 (got {crc}; stderr: {cerr.strip()[-600:]})")
    c.ok(src == 0, f"{name}: server exit 0 (got {src}; stderr: {serr.strip()[-600:]})")
    c.ok("Data check: PASS" in cout and "Data check: PASS" in sout,
         f"{name}: byte-exact data check passed on both sides")
    rows = rows_after(BW_HEADER, cout)
    c.ok(rows is not None and len(rows) == 1 and int(rows[0][1]) == 4 * int(args[1]),
         f"{name}: #iterations {rows and rows[0][1]} == {4 * int(args[1])}")
    for side, out in (("server", sout), ("client", cout)):
        shards = [m.groups() for m in SHARD_RE.finditer(out)]
        c.ok([(s[0], s[1], s[2]) for s in shards] == [("0", "1", "2"), ("1", "2", "2")],
             f"{name}: {side}: shards 0/1 on lcores 1/2 with 2 QPs each ({shards})")
        c.ok(len(shards) == 2 and all(int(s[4]) > 0 and int(s[5]) > 0 for s in shards),
             f"{name}: {side}: both lcores received and sent")
        c.ok(len(shards) == 2 and shards[1][3] == "ring" and int(shards[1][7]) > 0,
             f"{name}: {side}: shard 1 sends through the ring (one TX queue on memif)")
        lcores = sorted(int(m.group(2)) for m in QP_RE.finditer(out))
        c.ok(lcores == [1, 1, 2, 2], f"{name}: {side}: QP lcores {lcores}")
    c.ok("Invalid memory" not in serr + cerr, f"{name}: clean shutdown")

# Bad values: exit 2, the option named.
for args in (["--shards", "0"], ["--shards", "3"]):
    (src, _, serr), (crc, _, cerr) = run_pair(
        exe, "write_bw", ["--lcores", "0@0,1@1,2@0", f"--file-prefix=dps_bad_{pid}",
                          "--vdev=net_null0"],
        ["--lcores", "0@0,1@1,2@0", f"--file-prefix=dps_bad2_{pid}", "--vdev=net_null0"],
        args, timeout=30)
    c.ok(src == 2 and "--shards" in serr, f"{args}: server exit 2 naming --shards "
         f"(got {src}: {serr.strip()[-300:]})")
c.finish()
