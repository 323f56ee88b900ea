"""droce-endpoint keeps each QP's receive queue full: the `count` receive
WQEs of `recv = {...}` are a ring of buffers, each posted again when its
completion is taken. scapy, as the peer on net_tap, sends three times
`count` SENDs one at a time, each with AckReq, and acts as an RC requester
would on an RNR NAK (IBA 9.7.5.2.8): it waits and sends the same PSN again.
Every SEND must be acknowledged; without the reposting the SEND after the
first `count` is RNR NAKed forever. A READ of the ring then returns the last
`count` payloads, SEND j in buffer j mod count (the same buffers, reused in
order), and the endpoint reports one successful completion per SEND. Needs
root (/dev/net/tun, ip); exits 77 (skip) without it."""

import os
import re
import shutil
import subprocess
import sys
import time

from scapy.all import conf

from e2e_common import *  # noqa: F401,F403

IFACE = f"drecv{os.getpid() % 10000}"
RKEY = 0x1234
COUNT, LENGTH, RECV_OFF = 4, 256, 0x1000
SENDS = 3 * COUNT
RNR_RETRIES = 100  # 20 ms apart: the endpoint polls completions every 5 ms

CONFIG = f"""
[[mr]]
key = {RKEY:#x}
length = 65536

[[qp]]
qpn = {EP_QPN:#x}
peer_qpn = {PEER_QPN:#x}
rq_psn = 0
min_rnr_timer = 1
local_mac = "{EP_MAC}"
peer_mac = "{PEER_MAC}"
local_ip = "{EP_IP}"
peer_ip = "{PEER_IP}"
recv = {{ count = {COUNT}, length = {LENGTH}, mr = {RKEY:#x}, offset = {RECV_OFF:#x} }}
"""


def payload(j):
    return bytes((j * 7 + i) & 0xFF for i in range(LENGTH))


def main():
    exe = find_endpoint()
    if os.geteuid() != 0 or not os.path.exists("/dev/net/tun") or not shutil.which("ip"):
        print("SKIP: needs root, /dev/net/tun and ip")
        sys.exit(77)
    cfg = os.path.join(workdir(), "ep.toml")
    with open(cfg, "w") as f:
        f.write(CONFIG)
    cmd = [exe] + eal("droce_e2e_recv", [f"net_tap0,iface={IFACE}"]) + [
        "--", "--config", cfg, "--duration", "60", "--idle-sleep-us", "50"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    rnr_naks = 0
    acked = 0
    ring = b""
    try:
        check(wait_for_iface(proc, IFACE), f"interface {IFACE} did not come up")
        answers = TapAnswers(IFACE)
        sock = conf.L2socket(iface=IFACE)
        for j in range(SENDS):
            send = request(SEND_ONLY, j, b"", payload(j), ackreq=True)
            for _ in range(RNR_RETRIES):
                sock.send(send)
                a = answers.next_for(ACK, j, 2)
                check(a is not None, f"SEND {j}: no answer")
                check(icrc_ok(a), f"SEND {j}: ICRC or IPv4 checksum wrong")
                syndrome = raw(a[UDP].payload)[12]
                if syndrome >> 5 == 0:
                    acked += 1
                    break
                check(syndrome >> 5 == 1, f"SEND {j}: NAK syndrome {syndrome:#x}")
                rnr_naks += 1
                time.sleep(0.02)
            else:
                raise AssertionError(f"SEND {j} of {SENDS} RNR NAKed {RNR_RETRIES} times: "
                                     "its receive queue stays empty")
        sock.send(request(READ_REQ, SENDS, reth(RECV_OFF, RKEY, COUNT * LENGTH), ackreq=True))
        r = answers.next_for(READ_ONLY, SENDS, 2)
        check(r is not None, "no READ response")
        ring = split(r)[1][4:]  # after the AETH
        sock.close()
        answers.stop()
    finally:
        proc.terminate()
        stdout, stderr = proc.communicate(timeout=30)
    sys.stdout.write(stdout[-1500:])
    check(proc.returncode == 0, f"droce-endpoint exit {proc.returncode}: {stderr[-1500:]}")
    print(f"{acked} SENDs acknowledged, {rnr_naks} RNR NAKs on the way")
    check(acked == SENDS, f"{acked} of {SENDS} SENDs acknowledged")
    want = b"".join(payload(j) for j in sorted(range(SENDS - COUNT, SENDS),
                                                key=lambda j: j % COUNT))
    check(ring == want, "the ring holds the last SENDs, SEND j in buffer j mod count")
    check(re.search(rf"completions {SENDS} \(errors 0\)", stdout),
          "one successful completion per SEND")
    check("all pools full at shutdown" in stdout, "leak check line missing")
    print("recv ring: OK")


if __name__ == "__main__":
    main()
