"""droce-perf between two network namespaces over a veth pair with
net_af_packet, the traffic captured with tshark on the veth: every RoCEv2
frame decodes as well-formed InfiniBand over UDP 4791 (no _ws.malformed, no
expert errors; tshark's IPv6 "UDP checksum 0" note is expected for IPv6
only, since RoCEv2 senders leave it zero, annex A17.4.3), and the data
checks pass. IPv4 and IPv6. In send_lat, each side's ACKs leave in one TX
burst with its next SEND (port_tx_joined), behind it on the wire. Then an RX
queue per shard on a real multi-queue port: the server's af_packet port has
qpairs=2, which the kernel fills by its flow hash over the UDP ports
(PACKET_FANOUT_HASH, what RSS does on a NIC), and the server shards 16 QPs
over two lcores with --shard-rx queues: both queues carry traffic, frames of
the other lcore's QPs are handed over by ring, and the data check passes.
Needs root (ip netns); the namespaces, veths and captures are removed
whatever happens.

usage: veth_test.py DROCE_PERF"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

from perf_common import (BW_HEADER, LAT_HEADER, Checks, rows_after, run_pair,
                         run_veth_pair_captured, veth_between_namespaces)

exe = os.path.abspath(sys.argv[1])
c = Checks()
if os.geteuid() != 0 or not shutil.which("tshark") or not shutil.which("ip"):
    print("SKIP: needs root, ip and tshark")
    sys.exit(77)

pid = os.getpid()
NS_A, NS_B = f"dpva{pid}", f"dpvb{pid}"
IF_A, IF_B = f"dpa{pid % 100000}", f"dpb{pid % 100000}"
tmp = tempfile.mkdtemp(prefix="droce-perf-veth-")
# Same list as tests/interop/tshark_test.py: tshark's heuristic dissectors
# for InfiniBand payloads would read random payload as SMC-R, NVMe, ... and
# call it malformed.
IB_HEURISTICS = [
    "smcr_infiniband", "smb_direct_infiniband", "rpcrdma_infiniband",
    "nvme_rdma", "lnet_ib", "iser_infiniband", "eth_over_ib",
    "mellanox_eoib", "sdp_infiniband", "fc_infiniband", "drbd_rdma",
]


def cleanup():
    for ns in (NS_A, NS_B):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    shutil.rmtree(tmp, ignore_errors=True)


_heur = None


def heuristic_args(pcap):
    global _heur
    if _heur is not None:
        return _heur
    args = []
    for name in IB_HEURISTICS:
        r = subprocess.run(["tshark", "-r", pcap, "-c", "1", "--disable-heuristic", name],
                           capture_output=True, text=True)
        if r.returncode == 0:
            args += ["--disable-heuristic", name]
    _heur = args
    return args


def capture_and_run(test, app_args, v6, tag):
    pcap = os.path.join(tmp, f"{tag}.pcap")
    ips = ("fd77::1", "fd77::2") if v6 else ("10.77.0.1", "10.77.0.2")
    srv, cli = run_veth_pair_captured(exe, test, app_args, pcap, tag, (NS_A, NS_B),
                                      (IF_A, IF_B), ips)
    return srv, cli, pcap


def joined_order(name, pcap, heur):
    """A side's joined ACK leaves after the SEND it was joined with: the
    kernel hands a burst's frames to the peer one by one, and the SEND is
    the one the peer is waiting for.

    In the ping-pong the server's ACK of the client's k-th SEND is joined to
    the server's k-th SEND (its reply), and the client's ACK of the server's
    k-th SEND to the client's (k+1)-th. Only each side's own frames are
    compared: the capture keeps one side's frames in the order they were
    sent, but a frame from the peer may land between two frames of one
    burst (the kernel hands the first to the peer, which answers before the
    second is out). A resent SEND (its PSN went out before) answers nothing;
    only first copies count."""
    r = subprocess.run(["tshark", "-n", "-r", pcap, *heur, "-Y", "infiniband", "-T", "fields",
                        "-e", "ip.src", "-e", "infiniband.bth.opcode", "-e", "infiniband.bth.psn"],
                       capture_output=True, text=True, timeout=60)
    frames = [ln.split("\t") for ln in r.stdout.splitlines() if ln.strip()]
    sends, acks = {}, {}  # per side: first copies of SEND PSNs in order; ACKed PSN -> position
    for i, (src, op, psn) in enumerate(frames):
        if op == "4" and psn not in sends.setdefault(src, {}):
            sends[src][psn] = i
        elif op == "17":
            acks.setdefault(src, {}).setdefault(psn, i)
    ok, bad = 0, []
    client = next((src for src, op, _ in frames if op == "4"), None)
    for side in sends:
        peer = next((p for p in sends if p != side), None)
        if peer is None:
            continue
        replies = list(sends[side].values())
        skip = 1 if side == client else 0  # the client's first SEND answers nothing
        for k, psn in enumerate(sends[peer]):
            ack = acks.get(side, {}).get(psn)
            if ack is None or k + skip >= len(replies):
                continue
            if replies[k + skip] < ack:
                ok += 1
            else:
                bad.append((side, psn))
    c.ok(ok >= 20 and not bad,
         f"{name}: each side's SEND leaves ahead of the ACK joined to it "
         f"({ok} times; ACK first for {bad[:3]})")


SHARD_RE = re.compile(r"shard (\d) lcore \d+: qps (\d+) tx_queue \S+ rx_delivered (\d+) "
                      r"tx_frames \d+ rx_from_ring (\d+) tx_to_ring \d+ rx_queue (\S+) "
                      r"rx_dispatched (\d+)")


def rss_case():
    """write_bw, 16 QPs, into a server with two RX queues and two shards."""
    name = "write_bw -q 16, server qpairs=2 --shards 2 --shard-rx queues"
    s_eal = ["--lcores", "0@0,1@1,2@0", f"--file-prefix=dpv_s_{pid}_rss",
             f"--vdev=net_af_packet0,iface={IF_A},qdisc_bypass=0,qpairs=2"]
    c_eal = ["-l", "1", f"--file-prefix=dpv_c_{pid}_rss",
             f"--vdev=net_af_packet0,iface={IF_B},qdisc_bypass=0"]
    (src, sout, serr), (crc, cout, cerr) = run_pair(
        exe, "write_bw", s_eal, c_eal, ["-n", "50", "-s", "4096", "-q", "16", "--check"],
        server_args=["--bind", "10.66.0.1", "--ip", "10.77.0.1", "--shards", "2",
                     "--shard-rx", "queues", "--idle-sleep-us", "20", "--counters"],
        client_args=["--ip", "10.77.0.2"],
        server_prefix=["ip", "netns", "exec", NS_A], client_prefix=["ip", "netns", "exec", NS_B],
        connect="10.66.0.1")
    c.ok(crc == 0 and src == 0, f"{name}: both sides exit 0 (client {crc}: "
                                f"{cerr.strip()[-500:]}; server {src}: {serr.strip()[-500:]})")
    c.ok("Data check: PASS" in cout and "Data check: PASS" in sout, f"{name}: data check passed")
    shards = [m.groups() for m in SHARD_RE.finditer(sout)]
    c.ok([(k, q, rxq) for k, q, _, _, rxq, _ in shards] == [("0", "8", "0"), ("1", "8", "1")],
         f"{name}: shards 0/1 poll RX queues 0/1 with 8 QPs each ({shards})")
    if len(shards) == 2:
        delivered, from_ring, handed = ([int(s[i]) for s in shards] for i in (2, 3, 5))
        # What a shard took from its own queue: its own QPs' frames
        # (delivered minus what came by ring) plus what it handed over.
        polled = [delivered[k] - from_ring[k] + handed[k] for k in (0, 1)]
        # 16 flows hashed over two queues: all on one queue has odds 2^-15.
        c.ok(all(n > 0 for n in polled), f"{name}: both RX queues carried frames ({polled})")
        c.ok(sum(handed) > 0 and sum(handed) == sum(from_ring),
             f"{name}: frames handed over ({handed}) = frames taken from rings ({from_ring})")


try:
    veth_between_namespaces(NS_A, NS_B, IF_A, IF_B)

    CASES = [
        ("write_bw", ["-n", "100", "-s", "8192", "--check"], False, BW_HEADER),
        ("send_lat", ["-n", "30", "-s", "700", "--check", "--counters"], False, LAT_HEADER),
        ("read_bw", ["-n", "60", "-s", "5000", "--check"], True, BW_HEADER),
    ]
    for i, (test, args, v6, header) in enumerate(CASES):
        name = f"{test} {'IPv6' if v6 else 'IPv4'} {' '.join(args)}"
        (src, sout, serr), (crc, cout, cerr), pcap = capture_and_run(test, args, v6,
                                                                      f"{test}{i}")
        c.ok(crc == 0 and src == 0,
             f"{name}: both sides exit 0 (client {crc}: {cerr.strip()[-500:]}; "
             f"server {src}: {serr.strip()[-500:]})")
        c.ok("Data check: PASS" in cout and "Data check: PASS" in sout,
             f"{name}: data check passed")
        rows = rows_after(header, cout)
        c.ok(bool(rows), f"{name}: result row printed ({rows})")
        if "--counters" in args:
            # af_packet's TX burst is a system call: each side's ACK waits
            # for its next SEND and leaves in one burst with it.
            joined = [int(m.group(1)) if m else 0 for m in
                      (re.search(r"^\s*port_tx_joined\s+(\d+)", out, re.M) for out in (cout, sout))]
            c.ok(all(j > 0 for j in joined), f"{name}: answers joined the next frames "
                                            f"(port_tx_joined client, server: {joined})")
        if not os.path.exists(pcap):
            c.ok(False, f"{name}: tshark wrote a capture")
            continue
        heur = heuristic_args(pcap)
        fields = subprocess.run(
            ["tshark", "-n", "-r", pcap, *heur, "-T", "fields", "-E", "separator=|",
             "-e", "frame.protocols", "-e", "infiniband.bth.opcode",
             "-e", "_ws.malformed", "-e", "_ws.expert.severity", "-e", "ip.version",
             "-e", "ipv6.version"],
            capture_output=True, text=True, timeout=60)
        lines = [ln for ln in fields.stdout.splitlines() if ln.strip()]
        c.ok(fields.returncode == 0 and len(lines) >= 60,
             f"{name}: tshark read {len(lines)} RoCEv2 frames")
        not_ib = [ln for ln in lines if ":infiniband" not in ln.split("|")[0]]
        c.ok(not not_ib, f"{name}: every UDP 4791 frame dissects as InfiniBand "
                         f"({not_ib[:2]})")
        fam_ok = all(("ipv6" in ln.split("|")[0]) == v6 for ln in lines)
        c.ok(fam_ok, f"{name}: every frame is {'IPv6' if v6 else 'IPv4'}")
        opcodes = {ln.split("|")[1] for ln in lines}
        print(f"     opcodes seen: {sorted(opcodes)}")
        # Both directions are on the capture (qdisc_bypass=0 lets the kernel's
        # taps see what af_packet sends): requests and their answers.
        want = {"write_bw": {"6", "7", "8", "17"}, "send_lat": {"4", "17"},
                "read_bw": {"12", "13", "14", "15"}}[test]
        c.ok(want <= opcodes, f"{name}: requests and responses {sorted(want)} on the wire")
        bad = subprocess.run(
            ["tshark", "-n", "-r", pcap, *heur, "-Y",
             "_ws.malformed || (_ws.expert.severity >= error && "
             "!(ipv6 && udp.checksum == 0))"],
            capture_output=True, text=True, timeout=60)
        c.ok(bad.returncode == 0 and not bad.stdout.strip(),
             f"{name}: no malformed frames, no expert errors "
             f"({bad.stdout.strip()[:300]})")
        if test == "send_lat":
            joined_order(name, pcap, heur)
        if not v6:
            errs = subprocess.run(["tshark", "-n", "-r", pcap, *heur, "-Y",
                                   "_ws.expert.severity >= warning"],
                                  capture_output=True, text=True, timeout=60)
            c.ok(not errs.stdout.strip(),
                 f"{name}: IPv4: not even the UDP-checksum note "
                 f"({errs.stdout.strip()[:300]})")
    rss_case()
finally:
    cleanup()
c.finish()
