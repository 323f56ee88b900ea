"""droce-switch follows its ports' links: three net_tap ports, host A on
port 0 and an ECMP group of ports 1 and 2 toward 10.0.0.1. scapy sends 64
RoCEv2 flows (one UDP source port each) into A's interface and sniffs
ports 1 and 2: both carry some. Port 1's interface is taken down: the
switch notices (it polls link state every 10 ms), takes the model port
down, and every flow goes out of port 2. Port 1 comes back: both carry
traffic again. The report counts one link-down on port 1. Needs root
(/dev/net/tun, ip); exits 77 (skip) without it.

usage: link_test.py DROCE_SWITCH"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from scapy.all import AsyncSniffer, Ether, IP, UDP, Raw, raw, sendp
from scapy.contrib.roce import BTH

ROCE_PORT = 4791
FLOWS = 64
TAG = f"dsw{os.getpid() % 10000}"
IFACES = [f"{TAG}a", f"{TAG}b1", f"{TAG}b2"]


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def iface_up(name):
    try:
        with open(f"/sys/class/net/{name}/operstate") as f:
            return f.read().strip() in ("up", "unknown")
    except OSError:
        return False


def wait_up(proc, names, seconds=20):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            return False
        if all(iface_up(n) for n in names):
            return True
        time.sleep(0.1)
    return False


def frames(first_psn):
    """One WRITE ONLY per flow (UDP source port), PSN first_psn + flow."""
    return [Ether(raw(Ether(src="02:00:00:00:00:02", dst="02:00:00:00:00:01") /
                      IP(src="10.0.0.2", dst="10.0.0.1", tos=26 << 2 | 2) /
                      UDP(sport=0xC000 + i, dport=ROCE_PORT, chksum=0) /
                      BTH(opcode=0x0A, dqpn=0x11, psn=first_psn + i) /
                      Raw(bytes(16) + bytes(range(32)))))
            for i in range(FLOWS)]


class Sniff:
    def __init__(self, iface):
        self.psns = []
        self.sniffer = AsyncSniffer(iface=iface, filter=f"udp dst port {ROCE_PORT}",
                                    lfilter=lambda p: p.haslayer(BTH),
                                    prn=lambda p: self.psns.append(p[BTH].psn), store=False)
        self.sniffer.start()

    def stop(self):
        if self.sniffer.running:
            self.sniffer.stop()

    def between(self, lo, hi):
        return [p for p in self.psns if lo <= p < hi]


def send_round(first_psn, sniffs):
    sendp(frames(first_psn), iface=IFACES[0], verbose=False)
    deadline = time.time() + 5
    while time.time() < deadline:
        if sum(len(s.between(first_psn, first_psn + FLOWS)) for s in sniffs) >= FLOWS:
            break
        time.sleep(0.05)
    time.sleep(0.2)  # stragglers
    return [s.between(first_psn, first_psn + FLOWS) for s in sniffs]


def ip_link(name, state):
    subprocess.run(["ip", "link", "set", "dev", name, state], check=True)


def main():
    exe = sys.argv[1]
    if os.geteuid() != 0 or not os.path.exists("/dev/net/tun") or not shutil.which("ip"):
        print("SKIP: needs root, /dev/net/tun and ip")
        sys.exit(77)
    out_json = os.path.join(tempfile.mkdtemp(prefix="droce-switch-link-"), "report.json")
    cmd = [exe, "-l", "0", "--no-huge", "-m", "256", "--no-pci",
           f"--file-prefix=dsw_link_{os.getpid()}", "--log-level", "lib.eal:warning"]
    cmd += [f"--vdev=net_tap{i},iface={n}" for i, n in enumerate(IFACES)]
    cmd += ["--", "--port", "net_tap0", "--port", "net_tap1", "--port", "net_tap2",
            "--route", "10.0.0.1=1,2", "--route", "10.0.0.2=0", "--duration", "60",
            "--idle-sleep-us", "20", "--json", out_json]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        check(wait_up(proc, IFACES), "tap interfaces did not come up")
        time.sleep(0.3)
        b1, b2 = Sniff(IFACES[1]), Sniff(IFACES[2])
        time.sleep(0.5)
        both = send_round(1000, [b1, b2])
        b1.stop()  # a capture does not survive its interface going down
        ip_link(IFACES[1], "down")
        time.sleep(0.3)
        one = send_round(2000, [b2])
        ip_link(IFACES[1], "up")
        check(wait_up(proc, IFACES), "port 1's interface did not come back")
        time.sleep(0.3)
        b1 = Sniff(IFACES[1])
        time.sleep(0.5)
        again = send_round(3000, [b1, b2])
        b1.stop()
        b2.stop()
    finally:
        proc.terminate()
        stdout, stderr = proc.communicate(timeout=30)
    sys.stdout.write(stdout[-3000:])
    check(proc.returncode == 0, f"droce-switch exit {proc.returncode}: {stderr[-1500:]}")
    print(f"both up: port 1 {len(both[0])}, port 2 {len(both[1])}; port 1 down: port 2 "
          f"{len(one[0])}; back up: port 1 {len(again[0])}, port 2 {len(again[1])}")
    check(len(both[0]) > 0 and len(both[1]) > 0 and len(both[0]) + len(both[1]) == FLOWS,
          "ECMP spreads the flows over both ports")
    check(len(one[0]) == FLOWS, "with port 1 down, every flow leaves by port 2")
    check(len(again[0]) > 0 and len(again[1]) > 0 and len(again[0]) + len(again[1]) == FLOWS,
          "port 1 carries traffic again once its link is back")
    check("port 1: link down" in stdout and "port 1: link up" in stdout,
          "the switch reports port 1 going down and up")
    with open(out_json) as f:
        report = json.load(f)
    downs = [p.get("link_downs", 0) for p in report["ports"]]
    check(downs == [0, 1, 0], f"link_downs per port {downs}")
    check(all(p["link_up"] for p in report["ports"]), "every link up at the end")
    print("switch link: OK")


if __name__ == "__main__":
    main()
