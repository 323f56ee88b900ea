"""Faults under a running droce-perf transfer between two network namespaces
(a veth pair, net_af_packet on each end), as a NIC's users meet them:

  - the link goes down for a second and comes back (a cable pulled and
    plugged, a switch rebooting): RC retransmits after its local ACK
    timeout and the transfer completes byte-exact;
  - the link stays down longer than the retry budget (retry_cnt 7 times a
    16.8 ms timeout): the client's WRs complete with "transport retry
    counter exceeded" (IBV_WC_RETRY_EXC_ERR, IBA 9.7.6.1.3), it says so and
    exits 1 within seconds, and the server does not hang;
  - the peer process is killed mid-transfer: the same, for the client;
    also over net_memif, whose link goes down with its peer: what is sent
    into it is discarded and counted (port_tx_link_down).

No run may hang, and a run that fails must fail with the completion status
a NIC gives. Needs root (ip netns); skipped (77) otherwise.

usage: fault_test.py DROCE_PERF"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from perf_common import EAL_COMMON, Checks, free_tcp_port, veth_between_namespaces

exe = os.path.abspath(sys.argv[1])
c = Checks()
if os.geteuid() != 0 or not shutil.which("ip"):
    print("SKIP: needs root and ip")
    sys.exit(77)

pid = os.getpid()
NS_A, NS_B = f"dpfa{pid}", f"dpfb{pid}"
IF_A, IF_B = f"dfa{pid % 100000}", f"dfb{pid % 100000}"
tmp = tempfile.mkdtemp(prefix="droce-perf-fault-")


def sh(*cmd, check=True):
    return subprocess.run(list(cmd), capture_output=True, text=True, check=check, timeout=30)


def cleanup():
    for ns in (NS_A, NS_B):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    shutil.rmtree(tmp, ignore_errors=True)


def start(tag, app_args):
    """Server in NS_A, then the client in NS_B; returns both Popen objects."""
    port = free_tcp_port()
    common = ["--test", "write_bw", "-p", str(port), "--timeout", "20", "--idle-sleep-us", "20",
              *app_args]
    srv = subprocess.Popen(
        ["ip", "netns", "exec", NS_A, exe, "-l", "0", *EAL_COMMON, f"--file-prefix=dpf_s_{pid}_{tag}",
         f"--vdev=net_af_packet0,iface={IF_A},qdisc_bypass=0", "--", *common, "--server",
         "--bind", "10.66.0.1", "--ip", "10.77.0.1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)  # the server's OOB socket listens once its EAL is up
    cli = subprocess.Popen(
        ["ip", "netns", "exec", NS_B, exe, "-l", "1", *EAL_COMMON, f"--file-prefix=dpf_c_{pid}_{tag}",
         f"--vdev=net_af_packet0,iface={IF_B},qdisc_bypass=0", "--", *common,
         "--connect", "10.66.0.1", "--ip", "10.77.0.2", "--counters"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return srv, cli


def finish(p, timeout):
    """(rc, stdout, stderr, seconds waited); rc None if it had to be killed."""
    t0 = time.time()
    try:
        out, err = p.communicate(timeout=timeout)
        return p.returncode, out, err, time.time() - t0
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        return None, out, err, time.time() - t0


def wait_for_traffic(cli):
    """True once the client has been sending for a while (2.5 s after it
    started: EAL start, the out-of-band exchange and the first messages)."""
    time.sleep(2.5)
    return cli.poll() is None


def link(state):
    sh("ip", "-n", NS_B, "link", "set", IF_B, state)


def counter(out, name):
    for line in out.splitlines():
        parts = line.split()
        for i, word in enumerate(parts[:-1]):
            if word == name:
                try:
                    return int(parts[i + 1])
                except ValueError:
                    pass
    return None


try:
    veth_between_namespaces(NS_A, NS_B, IF_A, IF_B)
    # The out-of-band TCP channel runs over the same veth; with the link
    # down only RoCE matters, TCP retransmits on its own once it is up.

    # 1. A one-second outage inside the retry budget (timeout 2^17 x
    #    4.096 us = 537 ms, 7 retries): the transfer completes.
    name = "link down 1 s, -u 17"
    srv, cli = start("flap", ["-D", "6", "-s", "4096", "-u", "17", "--check"])
    if wait_for_traffic(cli):
        link("down")
        time.sleep(1.0)
        link("up")
    crc, cout, cerr, _ = finish(cli, 60)
    src, sout, serr, _ = finish(srv, 30)
    c.ok(crc == 0 and src == 0, f"{name}: both sides exit 0 (client {crc}: {cerr.strip()[-400:]}; "
                                f"server {src}: {serr.strip()[-400:]})")
    c.ok("Data check: PASS" in cout and "Data check: PASS" in sout,
         f"{name}: the data arrived byte-exact")
    timeouts = counter(cout, "retransmit_timeouts")
    c.ok(timeouts is not None and timeouts > 0,
         f"{name}: the client retransmitted after its ACK timeout (retransmit_timeouts {timeouts})")

    # 2. An outage past the budget (2^12 x 4.096 us = 16.8 ms, 7 retries):
    #    the WRs fail with the status a NIC gives, nothing hangs.
    name = "link down 4 s, -u 12"
    srv, cli = start("dead", ["-D", "8", "-s", "4096", "-u", "12"])
    if wait_for_traffic(cli):
        link("down")
    crc, cout, cerr, waited = finish(cli, 40)
    link("up")
    src, sout, serr, _ = finish(srv, 40)
    c.ok(crc == 1, f"{name}: the client exits 1 (got {crc}; {cerr.strip()[-400:]})")
    c.ok("retry counter exceeded" in cerr.lower() or "retry_exc" in cerr.lower(),
         f"{name}: the client names the completion status ({cerr.strip()[-300:]})")
    c.ok(waited < 30, f"{name}: it fails within seconds of the outage ({waited:.1f} s)")
    c.ok(src is not None, f"{name}: the server exits instead of hanging (rc {src})")

    # 3. The peer killed mid-transfer.
    name = "server killed, -u 12"
    srv, cli = start("kill", ["-D", "8", "-s", "4096", "-u", "12"])
    if wait_for_traffic(cli):
        srv.send_signal(signal.SIGKILL)
        # `ip netns exec` forwards nothing: kill what it runs too.
        subprocess.run(["pkill", "-9", "-f", f"dpf_s_{pid}_kill"], capture_output=True)
    crc, cout, cerr, waited = finish(cli, 40)
    finish(srv, 10)
    c.ok(crc == 1, f"{name}: the client exits 1 (got {crc}; {cerr.strip()[-400:]})")
    c.ok("retry counter exceeded" in cerr.lower(),
         f"{name}: the client names the completion status ({cerr.strip()[-300:]})")
    c.ok(waited < 20, f"{name}: it fails within seconds ({waited:.1f} s)")

    # 4. The same over net_memif: the killed peer's end of the memif link
    #    goes down, and what the client sends into it is discarded.
    name = "memif server killed, -u 12"
    sock = os.path.join(tmp, "kill.sock")
    port = free_tcp_port()
    common = ["--test", "write_bw", "-p", str(port), "--timeout", "20", "--idle-sleep-us", "20",
              "-D", "8", "-s", "4096", "-u", "12"]
    srv = subprocess.Popen(
        [exe, "-l", "0", *EAL_COMMON, f"--file-prefix=dpf_ms_{pid}",
         f"--vdev=net_memif0,role=server,socket={sock},socket-abstract=no", "--", *common,
         "--server"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.time()
    while not os.path.exists(sock) and srv.poll() is None and time.time() - t0 < 30:
        time.sleep(0.05)
    cli = subprocess.Popen(
        [exe, "-l", "1", *EAL_COMMON, f"--file-prefix=dpf_mc_{pid}",
         f"--vdev=net_memif0,role=client,socket={sock},socket-abstract=no", "--", *common,
         "--connect", "127.0.0.1", "--counters"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if wait_for_traffic(cli):
        srv.send_signal(signal.SIGKILL)
    crc, cout, cerr, waited = finish(cli, 40)
    finish(srv, 10)
    c.ok(crc == 1, f"{name}: the client exits 1 (got {crc}; {cerr.strip()[-400:]})")
    c.ok("retry counter exceeded" in cerr.lower(),
         f"{name}: the client names the completion status ({cerr.strip()[-300:]})")
    dropped = counter(cerr + cout, "port_tx_link_down")
    c.ok(dropped is not None and dropped > 0,
         f"{name}: frames sent into the dead link were discarded and counted ({dropped})")
    c.ok(waited < 20, f"{name}: it fails within seconds ({waited:.1f} s)")
finally:
    cleanup()

c.finish()
