"""Helpers shared by the droce-perf end-to-end tests: run a server/client
pair of droce-perf processes, each with its own EAL --file-prefix, on
--no-huge --no-pci vdevs, bounded in time."""

import os
import re
import subprocess
import sys
import time

EAL_COMMON = ["--no-huge", "-m", "512", "--no-pci", "--log-level=lib.eal:warning"]


class Checks:
    def __init__(self):
        self.failed = 0

    def ok(self, cond, what):
        print(("ok   " if cond else "FAIL ") + what, flush=True)
        if not cond:
            self.failed += 1
        return cond

    def finish(self):
        print(f"{self.failed} failure(s)")
        sys.exit(1 if self.failed else 0)


def free_tcp_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run_client_then_collect(srv, c_cmd, timeout, env=None):
    """Runs the client command to its end, then collects the running server
    `srv`; both bounded by `timeout`, the server killed if it outlives it.
    Returns (server, client) as (rc, stdout, stderr); rc -1 on a timeout."""
    try:
        cli = subprocess.run(c_cmd, env=env, capture_output=True, text=True, timeout=timeout)
        s_out, s_err = srv.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        srv.kill()
        s_out, s_err = srv.communicate()
        return (-1, s_out, s_err), (-1, "", f"timeout after {timeout} s: {c_cmd}")
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()
    return (srv.returncode, s_out, s_err), (cli.returncode, cli.stdout, cli.stderr)


def run_pair(exe, test, server_eal, client_eal, app_args, server_args=(),
             client_args=(), timeout=60, server_prefix=(), client_prefix=(),
             connect="127.0.0.1", wait_for_path=None):
    """Starts the server, then the client; returns (server, client) as
    CompletedProcess-like tuples (rc, stdout, stderr). With wait_for_path
    (a memif socket), the client starts only once the server created it: a
    memif client that finds no socket when its port starts never connects,
    and a loaded machine can delay the server's EAL start that long."""
    port = free_tcp_port()
    common = ["--test", test, "-p", str(port), "--timeout", "30", *app_args]
    s_cmd = [*server_prefix, exe, *server_eal, *EAL_COMMON, "--", *common,
             "--server", *server_args]
    c_cmd = [*client_prefix, exe, *client_eal, *EAL_COMMON, "--", *common,
             "--connect", connect, *client_args]
    srv = subprocess.Popen(s_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    if wait_for_path:
        deadline = time.time() + timeout
        while not os.path.exists(wait_for_path) and srv.poll() is None \
                and time.time() < deadline:
            time.sleep(0.05)
    return run_client_then_collect(srv, c_cmd, timeout)


def run_memif_pair(exe, test, app_args, tmp, tag, server_args=(), client_args=(),
                   timeout=60, vdev_extra=""):
    """run_pair over net_memif, the socket in `tmp`: the server is the memif
    server. One lcore (CPU) per process: the engine runs its worker as a
    thread next to the control thread, so two processes share a 2-core
    machine. `vdev_extra` is added to both ends' vdev arguments (e.g.
    ",bsize=8192")."""
    sock = os.path.join(tmp, f"{tag}.sock")
    pid = os.getpid()
    s_eal = ["-l", "0", f"--file-prefix=dpm_s_{pid}_{tag}",
             f"--vdev=net_memif0,role=server,socket={sock},socket-abstract=no{vdev_extra}"]
    c_eal = ["-l", "1", f"--file-prefix=dpm_c_{pid}_{tag}",
             f"--vdev=net_memif0,role=client,socket={sock},socket-abstract=no{vdev_extra}"]
    return run_pair(exe, test, s_eal, c_eal, app_args, server_args=server_args,
                    client_args=client_args, timeout=timeout, wait_for_path=sock)


BW_HEADER = re.compile(r"#bytes\s+#iterations\s+BW peak\[(MB|Gb)/sec\]\s+"
                       r"BW average\[(MB|Gb)/sec\]\s+MsgRate\[Mpps\]")
LAT_HEADER = re.compile(r"#bytes #iterations\s+t_min\[usec\]\s+t_max\[usec\]\s+"
                        r"t_typical\[usec\]\s+t_avg\[usec\]\s+t_stdev\[usec\]\s+"
                        r"99% percentile\[usec\]\s+99.9% percentile\[usec\]")


def rows_after(header_re, out):
    """The numeric rows under perftest's column header."""
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if header_re.search(line):
            rows = []
            for row in lines[i + 1:]:
                cols = row.split()
                if not cols or not cols[0].isdigit():
                    break
                rows.append([float(c) for c in cols])
            return rows
    return None


def veth_between_namespaces(ns_a, ns_b, if_a, if_b,
                            addrs=("10.66.0.1/24", "10.66.0.2/24")):
    """Two network namespaces of our own joined by a veth pair, `addrs` on
    its ends (the out-of-band channel's), lo up, no IPv6 autoconfiguration
    or DAD chatter on the link. The caller removes the namespaces
    (`ip netns del`), which takes the veth with them."""
    def sh(*cmd, check=True):
        return subprocess.run(list(cmd), capture_output=True, text=True, check=check,
                              timeout=30)
    sh("ip", "netns", "add", ns_a)
    sh("ip", "netns", "add", ns_b)
    sh("ip", "link", "add", if_a, "netns", ns_a, "type", "veth", "peer", "name", if_b,
       "netns", ns_b)
    for ns, ifname, addr in ((ns_a, if_a, addrs[0]), (ns_b, if_b, addrs[1])):
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "-n", ns, "addr", "add", addr, "dev", ifname)
        sh("ip", "-n", ns, "link", "set", ifname, "up")
        sh("ip", "netns", "exec", ns, "sysctl", "-q", "-w",
           f"net.ipv6.conf.{ifname}.disable_ipv6=1", check=False)


def run_veth_pair_captured(exe, test, app_args, pcap, tag, ns, ifs, ips=("10.77.0.1", "10.77.0.2"),
                           client_args=()):
    """droce-perf's server in ns[0] and client in ns[1] over the veth
    `ifs` (net_af_packet, the kernel's 10.66.0.1 carrying the out-of-band
    channel, droce on `ips`), the RoCEv2 frames on ifs[0] captured by tshark
    into `pcap` meanwhile. Returns (server, client) as run_pair does."""
    cap = subprocess.Popen(["ip", "netns", "exec", ns[0], "tshark", "-i", ifs[0], "-w", pcap,
                            "-f", "udp port 4791"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pid = os.getpid()
    try:
        # tshark says "Capturing on ..." once the capture runs.
        t0 = time.time()
        line = ""
        while time.time() - t0 < 20 and "Capturing on" not in line:
            line = cap.stderr.readline()
        s_eal = ["-l", "0", f"--file-prefix=dpv_s_{pid}_{tag}",
                 f"--vdev=net_af_packet0,iface={ifs[0]},qdisc_bypass=0"]
        c_eal = ["-l", "1", f"--file-prefix=dpv_c_{pid}_{tag}",
                 f"--vdev=net_af_packet0,iface={ifs[1]},qdisc_bypass=0"]
        srv, cli = run_pair(exe, test, s_eal, c_eal, app_args,
                            server_args=["--bind", "10.66.0.1", "--ip", ips[0]],
                            client_args=["--ip", ips[1], *client_args],
                            server_prefix=["ip", "netns", "exec", ns[0]],
                            client_prefix=["ip", "netns", "exec", ns[1]],
                            connect="10.66.0.1")
        time.sleep(0.5)  # let tshark write the last frames
    finally:
        cap.terminate()
        try:
            cap.wait(timeout=10)
        except subprocess.TimeoutExpired:
            cap.kill()
            cap.wait()
    return srv, cli
