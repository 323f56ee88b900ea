"""What a droce sender's data packets carry in their IP and 802.1Q headers,
end to end: two droce-perf processes over net_memif (memif_test.py's
set-up), the client capturing its port (--capture: every frame it sends
and receives), the capture decoded by scapy (scapy.contrib.roce).

- By default every WRITE request the client sends is ECT(0) with DSCP 0
  and untagged.
- With --dscp/--vlan/--pcp on both sides (each its own DSCP and PCP, one
  VLAN), every WRITE FIRST/MIDDLE/LAST of the client carries its DSCP,
  ECT(0), VLAN and PCP, and the server's ACKs carry the server's (with
  --ecn ect1 there, its codepoint).
- A PCP without --vlan: a priority tag (VLAN 0). send_lat, where both sides
  send SENDs: each side's SENDs carry its own DSCP and PCP, ECT(0).
- IPv6: the SENDs' traffic class is the DSCP and ECT(0).

Every run's data check passes, so the tagged and marked frames were also
accepted and placed by the peer.

usage: marking_test.py DROCE_PERF"""

import os
import sys
import tempfile
import time

from perf_common import Checks, run_memif_pair

from scapy.all import IP, Dot1Q, IPv6, rdpcap
from scapy.contrib.roce import BTH

exe = sys.argv[1]
c = Checks()
tmp = tempfile.mkdtemp(prefix="droce-perf-marking-")
ECT0, ECT1 = 2, 1
MTU = 1024
# RC opcodes (IBA 9.2.1 table 38).
SEND_FIRST, SEND_MIDDLE, SEND_LAST, SEND_ONLY = 0x00, 0x01, 0x02, 0x04
WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST = 0x06, 0x07, 0x08
ACK = 0x11
# droce-perf's default addresses (--ip); the IPv6 case gives its own.
SERVER_IP, CLIENT_IP = "192.168.77.1", "192.168.77.2"


def frames(pcap, src, opcodes):
    """(ToS or traffic class, VLAN id or None, PCP or None, opcode) of every
    RoCEv2 frame from `src` with one of `opcodes`."""
    out = []
    for p in rdpcap(pcap):
        if BTH not in p or p[BTH].opcode not in opcodes:
            continue
        ip = p[IP] if IP in p else p[IPv6]
        if ip.src != src:
            continue
        tos = ip.tos if IP in p else ip.tc
        tag = p[Dot1Q] if Dot1Q in p else None
        out.append((tos, tag.vlan if tag else None, tag.prio if tag else None,
                    p[BTH].opcode))
    return out


def check_marks(name, got, want_count, want_opcodes, dscp, ecn, vlan, pcp, who):
    c.ok(len(got) >= want_count,
         f"{name}: {len(got)} {who} frames captured (at least {want_count})")
    seen = {f[3] for f in got}
    c.ok(set(want_opcodes) <= seen,
         f"{name}: {who} opcodes {sorted(seen)} include {sorted(want_opcodes)}")
    bad = [f for f in got if f[0] != (dscp << 2 | ecn) or f[1] != vlan or f[2] != pcp]
    c.ok(got and not bad,
         f"{name}: every {who} frame has DSCP {dscp}, ECN {ecn}, VLAN {vlan}, PCP {pcp} "
         f"(first wrong of {len(bad)}: {bad[:1]})")


def run(tag, test, args, server_args=(), client_args=()):
    pcap = os.path.join(tmp, f"{tag}.pcap")
    t0 = time.time()
    (src, sout, serr), (crc, cout, cerr) = run_memif_pair(
        exe, test, args, tmp, tag, server_args=list(server_args),
        client_args=["--capture", pcap, *client_args])
    name = f"{test} {' '.join([*args, *client_args])}"
    if server_args:
        name += f" / server {' '.join(server_args)}"
    c.ok(crc == 0, f"{name}: client exit 0 (got {crc}; stderr: {cerr.strip()[-600:]})")
    c.ok(src == 0, f"{name}: server exit 0 (got {src}; stderr: {serr.strip()[-600:]})")
    c.ok("Data check: PASS" in cout and "Data check: PASS" in sout,
         f"{name}: byte-exact data check passed on both sides")
    c.ok(os.path.exists(pcap), f"{name}: the client wrote its capture")
    print(f"     ({time.time() - t0:.1f} s)", flush=True)
    return name, (pcap if os.path.exists(pcap) else None)


WRITES = {WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST}
SENDS = {SEND_FIRST, SEND_MIDDLE, SEND_LAST, SEND_ONLY}
N = 20
SIZE = 3000  # three packets at MTU 1024: FIRST, MIDDLE, LAST
PKTS = N * -(-SIZE // MTU)

# Defaults: ECT(0), DSCP 0, no tag.
name, pcap = run("default", "write_bw", ["-n", str(N), "-s", str(SIZE), "--check"])
if pcap:
    check_marks(name, frames(pcap, CLIENT_IP, WRITES), PKTS, WRITES, 0, ECT0, None, None,
                "client WRITE")

# Configured on both sides: one VLAN, each side its own DSCP and PCP; the
# server's ECN codepoint too.
name, pcap = run("vlan", "write_bw", ["-n", str(N), "-s", str(SIZE), "--check"],
                 server_args=["--dscp", "10", "--vlan", "100", "--pcp", "5", "--ecn", "ect1"],
                 client_args=["--dscp", "46", "--vlan", "100", "--pcp", "3"])
if pcap:
    check_marks(name, frames(pcap, CLIENT_IP, WRITES), PKTS, WRITES, 46, ECT0, 100, 3,
                "client WRITE")
    check_marks(name, frames(pcap, SERVER_IP, {ACK}), 1, {ACK}, 10, ECT1, 100, 5,
                "server ACK")

# A PCP alone: a priority tag (VLAN 0). Both sides send SENDs (ping-pong).
name, pcap = run("prio", "send_lat", ["-n", "20", "-s", "64", "--check"],
                 server_args=["--dscp", "34", "--pcp", "6"],
                 client_args=["--dscp", "26", "--pcp", "3"])
if pcap:
    check_marks(name, frames(pcap, CLIENT_IP, SENDS), 20, {SEND_ONLY}, 26, ECT0, 0, 3,
                "client SEND")
    check_marks(name, frames(pcap, SERVER_IP, SENDS), 20, {SEND_ONLY}, 34, ECT0, 0, 6,
                "server SEND")

# IPv6: the traffic class carries DSCP and ECN.
name, pcap = run("ipv6", "send_bw", ["-n", str(N), "-s", str(SIZE), "--check"],
                 server_args=["--ip", "fd00::1"],
                 client_args=["--ip", "fd00::2", "--dscp", "18"])
if pcap:
    check_marks(name, frames(pcap, "fd00::2", SENDS), PKTS,
                {SEND_FIRST, SEND_MIDDLE, SEND_LAST}, 18, ECT0, None, None, "client SEND")

c.finish()
