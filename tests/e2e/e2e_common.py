"""Helpers for the DPDK end-to-end tests: run droce-endpoint with its own
--file-prefix on --no-huge --no-pci vdevs, and small RoCEv2 builders on top
of scapy.contrib.roce (scapy 2.5 knows BTH and AETH only; the extension
headers are packed here from IBA 9.3, and the ICRC is scapy's)."""

import os
import struct
import subprocess
import sys
import tempfile
import time

from scapy.all import ARP, AsyncSniffer, Ether, IP, UDP, Raw, raw, rdpcap, wrpcap  # noqa: F401
from scapy.contrib.roce import BTH

ROCE_PORT = 4791
EP_MAC, PEER_MAC = "02:00:00:00:00:01", "02:00:00:00:00:02"
EP_IP, PEER_IP = "10.0.0.1", "10.0.0.2"
EP_QPN, PEER_QPN = 0x11, 0x22
DSCP = 26
ECT0, CE = 2, 3

# RC opcodes (IBA 9.2.1 table 38).
SEND_ONLY, WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST, WRITE_ONLY = 0x04, 0x06, 0x07, 0x08, 0x0A
READ_REQ, READ_FIRST, READ_MIDDLE, READ_LAST, READ_ONLY = 0x0C, 0x0D, 0x0E, 0x0F, 0x10
ACK, ATOMIC_ACK, CMP_SWAP, FETCH_ADD, CNP = 0x11, 0x12, 0x13, 0x14, 0x81


def reth(va, rkey, length):
    return struct.pack("!QII", va, rkey, length)


def atomic_eth(va, rkey, swap_add, compare):
    return struct.pack("!QIQQ", va, rkey, swap_add, compare)


def request(opcode, psn, ext=b"", payload=b"", ackreq=False, ecn=ECT0, dqpn=EP_QPN):
    pad = (-len(payload)) % 4
    p = (Ether(src=PEER_MAC, dst=EP_MAC) /
         IP(src=PEER_IP, dst=EP_IP, tos=(DSCP << 2) | ecn, flags="DF") /
         UDP(sport=0xC000 | PEER_QPN, dport=ROCE_PORT, chksum=0) /
         BTH(opcode=opcode, dqpn=dqpn, psn=psn, ackreq=int(ackreq), padcount=pad,
             migreq=1) /
         Raw(ext + payload + b"\0" * pad))
    return Ether(raw(p))


def split(pkt):
    """(BTH fields dict, bytes after the BTH without ICRC, ICRC bytes)."""
    data = raw(pkt[UDP].payload)
    b = pkt[BTH]
    return b, data[12:-4], data[-4:]


def icrc_ok(pkt):
    """Rebuilds the frame with scapy computing the IPv4 checksum and the
    ICRC; both must equal what droce wrote."""
    p = Ether(raw(pkt))
    p[IP].chksum = None
    p[BTH].icrc = None
    return raw(p) == raw(pkt)


def roce_frames(path):
    """The RoCEv2 frames of a pcap droce-endpoint wrote. Its port also
    announces its addresses when it comes up (a gratuitous ARP and an
    unsolicited IPv6 neighbour advertisement, docs/ETHERNET.md), which the
    tests of the RoCE path leave aside."""
    return [p for p in rdpcap(path) if UDP in p]


def find_endpoint():
    if len(sys.argv) < 2:
        sys.exit("usage: test.py <droce-endpoint>")
    return sys.argv[1]


def eal(prefix, vdevs, mem=256):
    args = ["--no-huge", "-m", str(mem), "--no-pci", "--file-prefix", prefix,
            "-l", "0,1", "--log-level", "lib.eal:warning"]
    for v in vdevs:
        args.append("--vdev=" + v)
    return args


def run_endpoint(exe, prefix, vdevs, app_args, timeout=60, mem=256):
    cmd = [exe] + eal(prefix, vdevs, mem) + ["--"] + app_args
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def workdir():
    return tempfile.mkdtemp(prefix="droce-e2e-")


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def wait_for_iface(proc, iface, seconds=20):
    """True once the net_tap interface `iface` is up; False if droce-endpoint
    (`proc`) exited first or `seconds` passed."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            return False
        if os.path.exists(f"/sys/class/net/{iface}"):
            with open(f"/sys/class/net/{iface}/operstate") as f:
                if f.read().strip() in ("up", "unknown"):
                    return True
        time.sleep(0.1)
    return False


class TapAnswers:
    """Sniffs droce's RoCEv2 answers on a net_tap interface, in arrival
    order (the kernel may talk there too)."""

    def __init__(self, iface):
        self.frames = []  # filled as frames arrive (AsyncSniffer.results only at stop)
        self.seen = 0     # next_for() has looked at frames before this index
        self.sniffer = AsyncSniffer(iface=iface, filter=f"udp dst port {ROCE_PORT}",
                                    lfilter=lambda p: p.haslayer(BTH) and p[IP].src == EP_IP,
                                    prn=self.frames.append, store=False)
        self.sniffer.start()
        time.sleep(0.5)

    def stop(self):
        if self.sniffer.running:
            self.sniffer.stop()

    def wait(self, want, seconds):
        """The frames so far, once there are `want` or after `seconds`."""
        deadline = time.time() + seconds
        while time.time() < deadline and len(self.frames) < want:
            time.sleep(0.05)
        return [Ether(raw(p)) for p in self.frames]

    def next_for(self, opcode, psn, seconds):
        """The first answer with this opcode and PSN after those seen."""
        deadline = time.time() + seconds
        while time.time() < deadline:
            while self.seen < len(self.frames):
                p = Ether(raw(self.frames[self.seen]))
                self.seen += 1
                if p[BTH].opcode == opcode and p[BTH].psn == psn:
                    return p
            time.sleep(0.005)
        return None
