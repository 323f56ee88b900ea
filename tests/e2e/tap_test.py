"""droce-endpoint on net_tap: the vdev that makes a kernel network
interface of the port. scapy sends RoCEv2 requests into the interface and
sniffs what droce answers on it: an ACK for a WRITE with AckReq, and a READ
response carrying the bytes that WRITE placed, each with a valid ICRC and
IPv4 checksum.

Then the link: a PFC XOFF for the QP's priority (3) pauses it for 33 s (the
port is capped at 1 Mb/s, so 65535 quanta of 512 bit times), and the ACK
of the next WRITE is held. Taking the interface down and up ends the pause
(PFC state lives on the link; the engine polls link state every 10 ms): a
retransmission of that WRITE is acknowledged at once, and droce counts one
link-down event (port_link_downs). All of it twice: a QP from flags on an
unsharded port, and a QP on shard 1 of two (PFC and the link-down event
reach it through the port's shared state). Needs root (/dev/net/tun, ip);
exits 77 (skip) without it."""

import os
import re
import shutil
import struct
import subprocess
import sys
import time

from scapy.all import sendp

from e2e_common import *  # noqa: F401,F403

IFACE = f"dtap{os.getpid() % 10000}"
RKEY = 0x1234


def ip_link(state):
    subprocess.run(["ip", "link", "set", "dev", IFACE, state], check=True)


# Two shards (the sharded path: PFC and link-down shared through the port),
# the QP under test on shard 1; lcores mapped onto CPUs 0 and 1.
SHARDED_CONFIG = f"""
[[mr]]
key = {RKEY:#x}
length = 65536

[[qp]]
qpn = 0x11
peer_qpn = 0x22
lcore = 1
rq_psn = 10
local_mac = "{EP_MAC}"
peer_mac = "{PEER_MAC}"
local_ip = "{EP_IP}"
peer_ip = "{PEER_IP}"

[[qp]]
qpn = 0x12
peer_qpn = 0x23
lcore = 2
rq_psn = 10
local_mac = "{EP_MAC}"
peer_mac = "{PEER_MAC}"
local_ip = "{EP_IP}"
peer_ip = "{PEER_IP}"
"""


def run_case(exe, name, eal_args, app_args, qpn, peer_qpn):
    cmd = [exe] + eal_args + ["--"] + app_args + ["--port-rate", "0.001", "--duration", "40"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    data = bytes(range(64))

    def req(opcode, psn, ext, payload=b""):
        return request(opcode, psn, ext, payload, ackreq=True, dqpn=qpn)

    try:
        check(wait_for_iface(proc, IFACE), f"{name}: interface {IFACE} did not come up")
        answers = TapAnswers(IFACE)
        sendp([req(WRITE_ONLY, 10, reth(0x100, RKEY, len(data)), data),
               req(READ_REQ, 11, reth(0x100, RKEY, len(data)))], iface=IFACE, verbose=False)
        first = answers.wait(2, 10)
        # XOFF for priority 3, then a WRITE: its ACK is held by the pause.
        sendp(Ether(src=PEER_MAC, dst="01:80:c2:00:00:01", type=0x8808) /
              Raw(struct.pack("!HH8H", 0x0101, 1 << 3, 0, 0, 0, 0xFFFF, 0, 0, 0, 0)),
              iface=IFACE, verbose=False)
        time.sleep(0.2)
        write12 = req(WRITE_ONLY, 12, reth(0x200, RKEY, len(data)), data)
        sendp(write12, iface=IFACE, verbose=False)
        held = answers.wait(3, 1.5)
        answers.stop()  # a capture does not survive its interface going down
        # The cable out and back in; then the peer's retransmission.
        ip_link("down")
        time.sleep(0.3)
        ip_link("up")
        check(wait_for_iface(proc, IFACE), f"{name}: interface {IFACE} did not come back up")
        time.sleep(0.3)
        answers = TapAnswers(IFACE)
        t0 = time.time()
        sendp(write12, iface=IFACE, verbose=False)
        after = answers.wait(1, 5)
        waited = time.time() - t0
        answers.stop()
    finally:
        proc.terminate()
        stdout, stderr = proc.communicate(timeout=30)
    sys.stdout.write(stdout[-2500:])
    check(proc.returncode == 0, f"{name}: droce-endpoint exit {proc.returncode}: "
                                f"{stderr[-1500:]}")
    check("all pools full at shutdown" in stdout, f"{name}: leak check line missing")

    by_op = {}
    for p in first:
        check(icrc_ok(p), f"{name}: ICRC or IPv4 checksum wrong: " + p.summary())
        by_op.setdefault(p[BTH].opcode, []).append(p)
    print(f"{name}: answers by opcode:", {hex(k): len(v) for k, v in by_op.items()})
    check(len(by_op.get(ACK, [])) == 1, f"{name}: one ACK for the WRITE")
    ack = by_op[ACK][0]
    check(ack[BTH].psn == 10 and ack[BTH].dqpn == peer_qpn, f"ACK PSN/QPN: {ack.summary()}")
    check(len(by_op.get(READ_ONLY, [])) == 1, f"{name}: one READ response")
    bth, rest, _ = split(by_op[READ_ONLY][0])
    check(bth.psn == 11, f"{name}: READ response PSN {bth.psn}")
    check(rest[4:] == data, f"{name}: the READ returns what the WRITE placed (after the AETH)")

    check(len(held) == 2, f"{name}: the XOFF holds the next ACK ({len(held)} answers)")
    acks12 = [p for p in after if p[BTH].opcode == ACK and p[BTH].psn == 12]
    check(acks12, f"{name}: after the link went down and up, PSN 12 is acknowledged "
                  f"({[p.summary() for p in after]})")
    check(all(icrc_ok(p) for p in acks12), f"{name}: ICRC of the late ACK")
    print(f"{name}: ACK of PSN 12 within {waited:.2f} s of the retransmission")
    check(re.search(r"port_link_downs\s+1\n", stdout), f"{name}: one link-down event counted")


def main():
    exe = find_endpoint()
    if os.geteuid() != 0 or not os.path.exists("/dev/net/tun") or not shutil.which("ip"):
        print("SKIP: needs root, /dev/net/tun and ip")
        sys.exit(77)
    vdev = f"net_tap0,iface={IFACE}"
    run_case(exe, "one shard", eal("droce_e2e_tap1", [vdev]),
             ["--qpn", hex(EP_QPN), "--peer-qpn", hex(PEER_QPN), "--rq-psn", "10",
              "--local-mac", EP_MAC, "--peer-mac", PEER_MAC, "--local-ip", EP_IP,
              "--peer-ip", PEER_IP, "--mr-size", "65536", "--mr-key", hex(RKEY)],
             EP_QPN, PEER_QPN)
    cfg = os.path.join(workdir(), "sharded.toml")
    with open(cfg, "w") as f:
        f.write(SHARDED_CONFIG)
    sharded_eal = [a if a != "0,1" else "0@0,1@1,2@0"
                   for a in eal("droce_e2e_tap2", [vdev])]
    sharded_eal[sharded_eal.index("-l")] = "--lcores"
    run_case(exe, "two shards, QP on shard 1", sharded_eal,
             ["--config", cfg, "--shards", "2"], 0x12, 0x23)
    print("tap: OK")


if __name__ == "__main__":
    main()
