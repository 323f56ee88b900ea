"""droce-endpoint on net_tap: the vdev that makes a kernel network
interface of the port. scapy sends RoCEv2 requests into the interface and
sniffs what droce answers on it: an ACK for a WRITE with AckReq, and a READ
response carrying the bytes that WRITE placed, each with a valid ICRC and
IPv4 checksum. Needs root (/dev/net/tun); exits 77 (skip) without it."""

import os
import subprocess
import sys
import time

from scapy.all import AsyncSniffer, sendp

from e2e_common import *  # noqa: F401,F403

IFACE = f"dtap{os.getpid() % 10000}"
RKEY = 0x1234


def wait_for_iface(proc, seconds=20):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            return False
        if os.path.exists(f"/sys/class/net/{IFACE}"):
            with open(f"/sys/class/net/{IFACE}/operstate") as f:
                if f.read().strip() in ("up", "unknown"):
                    return True
        time.sleep(0.1)
    return False


def main():
    exe = find_endpoint()
    if os.geteuid() != 0 or not os.path.exists("/dev/net/tun"):
        print("SKIP: needs root and /dev/net/tun")
        sys.exit(77)
    cmd = [exe] + eal("droce_e2e_tap", [f"net_tap0,iface={IFACE}"]) + [
        "--", "--qpn", hex(EP_QPN), "--peer-qpn", hex(PEER_QPN), "--rq-psn", "10",
        "--local-mac", EP_MAC, "--peer-mac", PEER_MAC, "--local-ip", EP_IP,
        "--peer-ip", PEER_IP, "--mr-size", "65536", "--mr-key", hex(RKEY),
        "--duration", "30"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        check(wait_for_iface(proc), f"interface {IFACE} did not come up")
        # Only RoCEv2 from droce: the kernel may talk on the interface too.
        sniffer = AsyncSniffer(iface=IFACE, filter=f"udp dst port {ROCE_PORT}",
                               lfilter=lambda p: p.haslayer(BTH) and p[IP].src == EP_IP)
        sniffer.start()
        time.sleep(0.5)
        data = bytes(range(64))
        sendp([request(WRITE_ONLY, 10, reth(0x100, RKEY, len(data)), data, ackreq=True),
               request(READ_REQ, 11, reth(0x100, RKEY, len(data)), ackreq=True)],
              iface=IFACE, verbose=False)
        deadline = time.time() + 10
        while time.time() < deadline and len(sniffer.results or []) < 2:
            time.sleep(0.1)
        out = sniffer.stop()
    finally:
        proc.terminate()
        stdout, stderr = proc.communicate(timeout=30)
    sys.stdout.write(stdout[-2000:])
    check(proc.returncode == 0, f"droce-endpoint exit {proc.returncode}: {stderr[-1500:]}")
    check("all pools full at shutdown" in stdout, "leak check line missing")
    by_op = {}
    for p in out:
        p = Ether(raw(p))
        check(icrc_ok(p), "ICRC or IPv4 checksum wrong: " + p.summary())
        by_op.setdefault(p[BTH].opcode, []).append(p)
    print("answers by opcode:", {hex(k): len(v) for k, v in by_op.items()})
    check(len(by_op.get(ACK, [])) == 1, "one ACK for the WRITE")
    ack = by_op[ACK][0]
    check(ack[BTH].psn == 10 and ack[BTH].dqpn == PEER_QPN, f"ACK PSN/QPN: {ack.summary()}")
    check(len(by_op.get(READ_ONLY, [])) == 1, "one READ response")
    bth, rest, _ = split(by_op[READ_ONLY][0])
    check(bth.psn == 11, f"READ response PSN {bth.psn}")
    check(rest[4:] == data, "the READ returns what the WRITE placed (after the AETH)")
    print("tap: OK")


if __name__ == "__main__":
    main()
