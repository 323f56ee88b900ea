"""droce-perf's multipath options end to end (docs/MULTIPATH.md "In real
time"): two droce-perf processes over net_memif, write_bw with --recovery
sr --entropy spray --entropy-paths 8 on the client; the server, given no
--recovery, takes the client's (its header says so) and the data check
passes. What the client sent is read back with tshark from its capture
(--capture): its WRITE requests carry exactly 8 distinct UDP source ports,
and 1 with the default fixed entropy (also under --recovery sr alone).
With --entropy path_aware, --reorder-window, --tail-probe and
--reth-every-packet the data check passes too, over 8 ports, and every
WRITE request is a WRITE ONLY.

Then the same over a veth pair between two network namespaces
(net_af_packet), captured by tshark on the veth itself, a capture
independent of droce's own writer: 8 ports with spray, 1 with fixed
(skipped without root, ip or tshark).

And the mistakes: --entropy spray without --recovery sr is a usage error
(exit 2) naming --entropy and --recovery sr, before EAL starts; a server
given --recovery gbn refuses a client's sr, and the client prints the
server's reason.

usage: multipath_test.py DROCE_PERF"""

import os
import shutil
import subprocess
import sys
import tempfile
import time

from perf_common import (BW_HEADER, Checks, rows_after, run_memif_pair,
                         run_veth_pair_captured, veth_between_namespaces)

exe = os.path.abspath(sys.argv[1])
c = Checks()
tmp = tempfile.mkdtemp(prefix="droce-perf-multipath-")
pid = os.getpid()
HAVE_TSHARK = shutil.which("tshark") is not None
# RC RDMA WRITE FIRST, MIDDLE, LAST, ONLY (IBA 9.2.1 table 38).
WRITE_OPCODES = {6, 7, 8, 10}
SPRAY = ["--recovery", "sr", "--entropy", "spray", "--entropy-paths", "8"]
PATH_AWARE = ["--recovery", "sr", "--entropy", "path_aware", "--entropy-paths", "8",
              "--reorder-window", "20us", "--tail-probe", "--reth-every-packet"]
BW = ["-n", "200", "-s", "65536", "--check"]


def request_ports(pcap, src_ip):
    """The UDP source ports of the WRITE requests `src_ip` sent, by tshark,
    how many such frames there were and their opcodes."""
    r = subprocess.run(
        ["tshark", "-n", "-r", pcap, "-Y", f"ip.src == {src_ip} && infiniband.bth.opcode",
         "-T", "fields", "-E", "separator=|", "-e", "udp.srcport",
         "-e", "infiniband.bth.opcode"],
        capture_output=True, text=True, timeout=60)
    ports, frames, opcodes = set(), 0, set()
    for ln in r.stdout.splitlines():
        parts = ln.strip().split("|")
        if len(parts) == 2 and parts[1] and int(parts[1]) in WRITE_OPCODES:
            ports.add(int(parts[0]))
            opcodes.add(int(parts[1]))
            frames += 1
    return ports, frames, opcodes


def check_run(name, srv, cli):
    (src, sout, serr), (crc, cout, cerr) = srv, cli
    c.ok(crc == 0 and src == 0,
         f"{name}: both sides exit 0 (client {crc}: {cerr.strip()[-500:]}; "
         f"server {src}: {serr.strip()[-500:]})")
    c.ok("Data check: PASS" in cout and "Data check: PASS" in sout,
         f"{name}: data check passed on both sides")
    rows = rows_after(BW_HEADER, cout)
    c.ok(bool(rows) and int(rows[0][0]) == 65536, f"{name}: result row printed ({rows})")
    return sout, cout


def check_ports(name, pcap, src_ip, want, least_frames=200 * 64, opcodes=None):
    """`least_frames`: droce's own capture holds every frame (200 WRITEs
    of 64 packets); tshark on a loaded machine may miss some. `opcodes`:
    the WRITE opcodes expected, when given."""
    if not HAVE_TSHARK:
        print(f"skip {name}: no tshark to read the capture")
        return
    if not c.ok(os.path.exists(pcap), f"{name}: capture written"):
        return
    ports, frames, seen = request_ports(pcap, src_ip)
    if opcodes is not None:
        c.ok(seen == opcodes, f"{name}: WRITE opcodes {sorted(seen)}, want {sorted(opcodes)}")
    c.ok(frames >= least_frames,
         f"{name}: {frames} WRITE request frames from {src_ip} captured ({least_frames} at least)")
    c.ok(len(ports) == want,
         f"{name}: the requests carry {len(ports)} distinct UDP source ports, want {want} "
         f"({sorted(ports)[:10]})")
    c.ok(all(0xC000 <= p <= 0xFFFF for p in ports),
         f"{name}: every port is in the dynamic range 0xC000..0xFFFF")


# ---- over net_memif, the client's own capture ---------------------------------

for tag, client_args, want, header, opcodes in [
        ("spray", SPRAY, 8, "Multipath       : sr, spray over 8 ports", {6, 7, 8}),
        ("fixed", [], 1, None, {6, 7, 8}),
        ("sr_fixed", ["--recovery", "sr"], 1, "Multipath       : sr", None),
        # RC RDMA WRITE ONLY alone: each packet carries its own RETH.
        ("path_aware", PATH_AWARE, 8,
         "Multipath       : sr (reorder window 20000 ns) (tail loss probe), a RETH in every "
         "WRITE packet, "
         "path-aware spray over 8 ports", {10}),
]:
    pcap = os.path.join(tmp, f"{tag}.pcap")
    t0 = time.time()
    srv, cli = run_memif_pair(exe, "write_bw", BW, tmp, tag,
                              client_args=[*client_args, "--capture", pcap])
    name = f"memif write_bw {' '.join(client_args) or '(fixed)'}"
    sout, cout = check_run(name, srv, cli)
    if header:
        c.ok(header in cout, f"{name}: the client's header says '{header}'")
        # The server was given no --recovery: it took the client's.
        c.ok(" Multipath       : sr" in sout,
             f"{name}: the server recovers by selective repeat too (its header)")
    else:
        c.ok("Multipath" not in cout and "Multipath" not in sout,
             f"{name}: no multipath line by default")
    check_ports(name, pcap, "192.168.77.2", want, opcodes=opcodes)
    print(f"     {name}: {time.time() - t0:.1f} s", flush=True)

# ---- mistakes ---------------------------------------------------------------------

r = subprocess.run([exe, "--", "--test", "write_bw", "--connect", "127.0.0.1",
                    "--entropy", "spray"], capture_output=True, text=True, timeout=30)
c.ok(r.returncode == 2 and "--entropy" in r.stderr and "--recovery sr" in r.stderr,
     f"--entropy spray without --recovery sr: exit 2 naming both "
     f"(rc {r.returncode}: {r.stderr.strip()[:300]})")
r = subprocess.run([exe, "--", "--test", "write_bw", "--connect", "127.0.0.1",
                    "--recovery", "sr", "--entropy-paths", "8"],
                   capture_output=True, text=True, timeout=30)
c.ok(r.returncode == 2 and "--entropy-paths" in r.stderr,
     f"--entropy-paths with fixed entropy: exit 2 naming it ({r.stderr.strip()[:300]})")
r = subprocess.run([exe, "--", "--test", "write_bw", "--connect", "127.0.0.1",
                    "--recovery", "irn"], capture_output=True, text=True, timeout=30)
c.ok(r.returncode == 2 and "--recovery" in r.stderr and "gbn" in r.stderr,
     f"--recovery irn: exit 2 naming the accepted values ({r.stderr.strip()[:300]})")

srv, cli = run_memif_pair(exe, "write_bw", ["-n", "10", "-s", "4096"], tmp, "refuse",
                          server_args=["--recovery", "gbn"], client_args=SPRAY, timeout=60)
(src, sout, serr), (crc, cout, cerr) = srv, cli
c.ok(crc == 1 and "the server refused the test" in cerr and "--recovery sr" in cerr
     and "--recovery gbn" in cerr,
     f"a server given --recovery gbn refuses sr: the client exits 1 with its reason "
     f"(rc {crc}: {cerr.strip()[-300:]})")
c.ok(src != 0, f"the refusing server exits non-zero too ({src})")

# ---- over veth, captured on the wire -----------------------------------------------

if os.geteuid() != 0 or not HAVE_TSHARK or not shutil.which("ip"):
    print("skip veth: needs root, ip and tshark")
else:
    NS_A, NS_B = f"dpma{pid}", f"dpmb{pid}"
    IF_A, IF_B = f"dma{pid % 100000}", f"dmb{pid % 100000}"
    try:
        veth_between_namespaces(NS_A, NS_B, IF_A, IF_B)
        for tag, client_args, want in [("veth_spray", SPRAY, 8), ("veth_fixed", [], 1)]:
            pcap = os.path.join(tmp, f"{tag}.pcap")
            srv, cli = run_veth_pair_captured(exe, "write_bw", BW, pcap, tag, (NS_A, NS_B),
                                              (IF_A, IF_B), client_args=client_args)
            name = f"veth write_bw {' '.join(client_args) or '(fixed)'}"
            check_run(name, srv, cli)
            check_ports(name, pcap, "10.77.0.2", want, least_frames=1000)
    finally:
        for ns in (NS_A, NS_B):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

shutil.rmtree(tmp, ignore_errors=True)
c.finish()
