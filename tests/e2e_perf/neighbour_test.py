"""droce on a real Ethernet, with Linux as its neighbour: two network
namespaces and a veth pair. Linux (iproute2, ping, arping, ndisc6) on one
end; droce-endpoint on the other over net_af_packet, owning 10.78.0.2 and
fd78::2, with the kernel's own ARP and IPv6 off on its end. The kernel
resolves droce's IPv4 and IPv6 addresses, pings them, and droce pings the
kernel back; a flood of ARP requests from random senders leaves droce
answering and its neighbour cache bounded; tshark finds no malformed ARP,
ICMP or ICMPv6 frame. Then two droce-perf processes that know each other
only by IP address (--resolve: no MAC exchanged) finish --check byte-exact
over IPv4 and IPv6. Needs root (ip netns); everything is removed whatever
happens.

usage: neighbour_test.py DROCE_PERF DROCE_ENDPOINT"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from perf_common import EAL_COMMON, Checks, run_pair

perf = os.path.abspath(sys.argv[1])
endpoint = os.path.abspath(sys.argv[2])
c = Checks()
TOOLS = ("ip", "tshark", "ping", "arping", "ndisc6")
if os.geteuid() != 0 or not all(shutil.which(t) for t in TOOLS):
    print(f"SKIP: needs root and {', '.join(TOOLS)}")
    sys.exit(77)

pid = os.getpid()
NS_L, NS_D = f"dnl{pid}", f"dnd{pid}"
IF_L, IF_D = f"nl{pid % 100000}", f"nd{pid % 100000}"
tmp = tempfile.mkdtemp(prefix="droce-neigh-")
DROCE_V4, DROCE_V6 = "10.78.0.2", "fd78::2"
LINUX_V4, LINUX_V6 = "10.78.0.1", "fd78::1"


def sh(*cmd, check=True, timeout=30):
    return subprocess.run(list(cmd), capture_output=True, text=True, check=check,
                          timeout=timeout)


def in_l(*cmd, **kw):
    return sh("ip", "netns", "exec", NS_L, *cmd, **kw)


def cleanup():
    for ns in (NS_L, NS_D):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    shutil.rmtree(tmp, ignore_errors=True)


def counters(text):
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^\s+(\w+)\s+(\d+)$", text, re.M)}


def start_capture(pcap):
    cap = subprocess.Popen(["ip", "netns", "exec", NS_L, "tshark", "-i", IF_L, "-w", pcap,
                            "-f", "arp or icmp or icmp6"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.time()
    line = ""
    while time.time() - t0 < 20 and "Capturing on" not in line:
        line = cap.stderr.readline()
    return cap


def stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def linux_side():
    pcap = os.path.join(tmp, "linux.pcap")
    cap = start_capture(pcap)
    ep = subprocess.Popen(
        ["ip", "netns", "exec", NS_D, endpoint, *EAL_COMMON, "-l", "0",
         f"--file-prefix=dn_{pid}",
         # A deep socket ring: the ARP flood below arrives faster than a
         # loaded machine may schedule the endpoint (the default is 512).
         f"--vdev=net_af_packet0,iface={IF_D},qdisc_bypass=0,framecnt=4096",
         "--", "--address", DROCE_V4, "--address", DROCE_V6, "--idle-sleep-us", "50",
         "--ping", LINUX_V4, "--ping", LINUX_V6, "--duration", "30"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(3)  # EAL up, the port announced
        mac = sh("ip", "-n", NS_D, "-br", "link", "show", IF_D).stdout.split()[2].lower()
        for fam, addr in (("-4", DROCE_V4), ("-6", DROCE_V6)):
            r = in_l("ping", fam, "-c", "3", "-i", "0.3", "-W", "2", addr, check=False)
            c.ok(r.returncode == 0 and " 0% packet loss" in r.stdout,
                 f"Linux pings droce at {addr}: {r.stdout.strip().splitlines()[-2:]}")
            n = sh("ip", "-n", NS_L, "neigh", "show", addr).stdout
            c.ok(f"lladdr {mac}" in n and "FAILED" not in n,
                 f"Linux's neighbour table resolves {addr} to droce's MAC {mac}: {n.strip()}")
        r = in_l("arping", "-c", "2", "-w", "5", "-I", IF_L, DROCE_V4, check=False)
        c.ok(r.returncode == 0 and mac in r.stdout.lower(),
             f"arping gets answers from {mac}: {r.stdout.strip().splitlines()[-2:]}")
        r = in_l("ndisc6", "-r", "3", DROCE_V6, IF_L, check=False)
        c.ok(r.returncode == 0 and mac in r.stdout.lower(),
             f"ndisc6 finds {DROCE_V6} at {mac}: {r.stdout.strip()}")
        # A flood of ARP requests for droce's address from 3000 senders
        # nobody knows, as fast as scapy sends them: droce keeps answering
        # and its cache bounded.
        flood = (
            "from scapy.all import Ether, ARP, sendp, RandMAC\n"
            f"pk=[Ether(dst='ff:ff:ff:ff:ff:ff',src='02:01:00:00:%02x:%02x'%(i>>8,i&255))/"
            f"ARP(op=1,hwsrc='02:01:00:00:%02x:%02x'%(i>>8,i&255),psrc='10.79.%d.%d'%(i>>8,i&255),"
            f"pdst='{DROCE_V4}') for i in range(3000)]\n"
            f"sendp(pk, iface='{IF_L}', verbose=False)\n")
        r = in_l("/usr/bin/python3", "-c", flood, check=False, timeout=120)
        c.ok(r.returncode == 0, f"scapy sent the flood ({r.stderr.strip()[-200:]})")
        # A ping flood, 100 requests in flight: beyond droce's echo rate
        # limit (1000/s, bursts of 50), so some go unanswered.
        r = in_l("ping", "-f", "-l", "100", "-c", "1000", "-w", "10", DROCE_V4, check=False)
        flood_loss = re.search(r"(\d+)% packet loss", r.stdout)
        c.ok(flood_loss is not None and int(flood_loss.group(1)) > 0,
             f"a ping flood meets the rate limit ({r.stdout.strip().splitlines()[-2:]})")
        time.sleep(1)
        r = in_l("ping", "-c", "2", "-i", "0.3", "-W", "2", DROCE_V4, check=False)
        c.ok(r.returncode == 0, "droce still answers ping after the floods")
    finally:
        out, err = "", ""
        ep.send_signal(2)
        try:
            out, err = ep.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            ep.kill()
            out, err = ep.communicate()
        time.sleep(0.5)
        stop(cap)
    k = counters(out)
    c.ok(ep.returncode == 0, f"droce-endpoint exits 0 ({err.strip()[-300:]})")
    c.ok(k.get("icmp_echo_out", 0) >= 8, f"droce answered the echo requests ({k.get('icmp_echo_out')})")
    c.ok(k.get("arp_replies_out", 0) >= 2 and k.get("nd_adverts_out", 0) >= 2,
         f"droce answered ARP and neighbour solicitations ({k.get('arp_replies_out')}, "
         f"{k.get('nd_adverts_out')})")
    c.ok(k.get("answers_rate_limited", 0) > 0,
         f"droce counted the requests over its rate limit ({k.get('answers_rate_limited')})")
    # Read, or counted as missed by the port (the socket ring overflowed):
    # never lost without a count.
    c.ok(k.get("arp_requests_in", 0) + k.get("eth_imissed", 0) >= 3000,
         f"droce read the ARP flood ({k.get('arp_requests_in')} read, "
         f"{k.get('eth_imissed', 0)} missed by the port)")
    c.ok(0 < k.get("neighbours", 0) <= 1024,
         f"its neighbour cache stayed within its bound of 1024 ({k.get('neighbours')} entries "
         f"after 3000 senders)")
    # droce's own pings to Linux, both families.
    replies = re.findall(r"^ping: reply from (\S+) seq=(\d+)", out, re.M)
    for addr in (LINUX_V4, LINUX_V6):
        c.ok(any(a == addr for a, _ in replies), f"droce pings Linux at {addr} ({replies[:4]})")
    tshark_clean(pcap, "ARP / ICMP / ICMPv6 between Linux and droce")


def tshark_clean(pcap, what):
    r = sh("tshark", "-n", "-r", pcap, "-T", "fields", "-e", "frame.protocols", check=False,
           timeout=120)
    protos = r.stdout.splitlines()
    c.ok(any("arp" in p for p in protos) and any("icmpv6" in p for p in protos)
         and any(":icmp" in p for p in protos), f"{what}: tshark read {len(protos)} frames")
    bad = sh("tshark", "-n", "-r", pcap, "-Y", "_ws.malformed || _ws.expert.severity >= error",
             check=False, timeout=120).stdout.strip()
    c.ok(not bad, f"{what}: no malformed frame ({bad[:300]})")


def perf_by_address(v6):
    ip_a, ip_b = ("fd77::1", "fd77::2") if v6 else ("10.77.0.1", "10.77.0.2")
    tag = "v6" if v6 else "v4"
    s_eal = ["-l", "0", f"--file-prefix=dns_{pid}_{tag}",
             f"--vdev=net_af_packet0,iface={IF_L},qdisc_bypass=0"]
    c_eal = ["-l", "1", f"--file-prefix=dnc_{pid}_{tag}",
             f"--vdev=net_af_packet0,iface={IF_D},qdisc_bypass=0"]
    test = "read_bw" if v6 else "write_bw"
    (src, sout, serr), (crc, cout, cerr) = run_pair(
        perf, test, s_eal, c_eal, ["-n", "60", "-s", "5000", "--check", "--resolve",
                                   "--counters", "--idle-sleep-us", "20"],
        server_args=["--bind", "10.66.0.1", "--ip", ip_a], client_args=["--ip", ip_b],
        server_prefix=["ip", "netns", "exec", NS_L], client_prefix=["ip", "netns", "exec", NS_D],
        connect="10.66.0.1")
    name = f"droce-perf {test} by address only ({'IPv6' if v6 else 'IPv4'})"
    c.ok(crc == 0 and src == 0, f"{name}: both exit 0 (client {crc}: {cerr.strip()[-300:]}; "
                                f"server {src}: {serr.strip()[-300:]})")
    c.ok("Data check: PASS" in cout and "Data check: PASS" in sout, f"{name}: data check passed")
    k = counters(cout)
    c.ok(k.get("neigh_resolved", 0) >= 1, f"{name}: the client resolved its peer "
                                          f"({k.get('neigh_resolved')})")


try:
    sh("ip", "netns", "add", NS_L)
    sh("ip", "netns", "add", NS_D)
    sh("ip", "link", "add", IF_L, "netns", NS_L, "type", "veth", "peer", "name", IF_D,
       "netns", NS_D)
    sh("ip", "-n", NS_L, "link", "set", "lo", "up")
    sh("ip", "-n", NS_D, "link", "set", "lo", "up")
    sh("ip", "-n", NS_L, "addr", "add", f"{LINUX_V4}/24", "dev", IF_L)
    sh("ip", "-n", NS_L, "addr", "add", f"{LINUX_V6}/64", "dev", IF_L, "nodad")
    # droce's end: no kernel ARP answers and no kernel IPv6 there, so that
    # every answer on the link is droce's.
    sh("ip", "netns", "exec", NS_D, "sysctl", "-q", "-w", f"net.ipv6.conf.{IF_D}.disable_ipv6=1")
    sh("ip", "-n", NS_D, "link", "set", IF_D, "arp", "off")
    for ns, ifname in ((NS_L, IF_L), (NS_D, IF_D)):
        sh("ip", "-n", ns, "link", "set", ifname, "up")
    time.sleep(1)
    linux_side()
    # droce-perf's out-of-band channel runs over kernel addresses on the
    # same veth; droce's own addresses are 10.77.0.x and fd77::x.
    sh("ip", "-n", NS_D, "link", "set", IF_D, "arp", "on")
    sh("ip", "-n", NS_L, "addr", "add", "10.66.0.1/24", "dev", IF_L)
    sh("ip", "-n", NS_D, "addr", "add", "10.66.0.2/24", "dev", IF_D)
    for v6 in (False, True):
        perf_by_address(v6)
finally:
    cleanup()
c.finish()
