"""Helpers of the libdroce-verbs tests: configuration files for two
processes joined by net_memif, or by a veth pair between two network
namespaces with net_af_packet (each its own EAL --file-prefix, one lcore,
an idle-sleeping worker), and a server/client pair of unmodified RDMA
programs run under LD_PRELOAD, bounded in time."""

import os
import re
import shutil
import socket
import subprocess
import sys
import time

# perftest's result rows, read as the droce-perf tests read droce-perf's.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e_perf"))
from perf_common import (rows_after, run_client_then_collect,  # noqa: E402,F401
                         veth_between_namespaces)

SKIP = 77  # meson: the test was skipped

EAL_COMMON = ["--no-huge", "-m", "512", "--no-pci", "--log-level=lib.eal:warning"]


class Checks:
    def __init__(self):
        self.failed = 0

    def ok(self, cond, what, detail=""):
        print(("ok   " if cond else "FAIL ") + what, flush=True)
        if not cond:
            self.failed += 1
            if detail:
                print(detail, flush=True)
        return cond

    def finish(self):
        print(f"{self.failed} failure(s)")
        sys.exit(1 if self.failed else 0)


def need_programs(names):
    missing = [n for n in names if shutil.which(n) is None]
    if missing:
        print("skipped: not installed: " + " ".join(missing))
        sys.exit(SKIP)


def free_tcp_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def tcp_listener_in(lines, port):
    """Whether /proc/net/tcp{,6} lines show a socket listening on `port`."""
    for line in lines:
        cols = line.split()
        if len(cols) > 3 and cols[3] == "0A" and ":" in cols[1] and \
                int(cols[1].split(":")[-1], 16) == port:
            return True
    return False


def listening(port):
    """Whether a TCP socket listens on `port` (from /proc, without
    connecting: a connection would be the server's one peer)."""
    lines = []
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as f:
                lines += f.readlines()[1:]
        except OSError:
            pass
    return tcp_listener_in(lines, port)


def toml_list(items):
    return "[" + ", ".join('"' + i + '"' for i in items) + "]"


def write_config(path, eal, port, addresses=(), neighbours=None, extra="", idle_sleep_us=20):
    with open(path, "w") as f:
        f.write(f"device = \"droce0\"\n")
        f.write(f"eal = {toml_list([*EAL_COMMON, *eal])}\n")
        f.write(f"port = \"{port}\"\n")
        f.write(f"addresses = {toml_list(addresses)}\n")
        f.write(f"idle_sleep_us = {idle_sleep_us}\n")
        f.write(extra)
        if neighbours:
            f.write("[neighbours]\n")
            for ip, mac in neighbours.items():
                f.write(f"\"{ip}\" = \"{mac}\"\n")
    return path


class MemifPair:
    """Two configurations on one net_memif link: `server` (the memif
    server, 10.0.0.1, lcore 0) and `client` (10.0.0.2, lcore 1), each
    naming the other's MAC. `client_extra` and `client_idle_sleep_us`
    set the client apart where given."""

    def __init__(self, tmp, tag, extra="", idle_sleep_us=20, client_extra=None,
                 client_idle_sleep_us=None):
        sock = os.path.join(tmp, f"{tag}.sock")
        self.sock = sock
        pid = os.getpid()
        macs = {"s": "02:00:00:00:01:01", "c": "02:00:00:00:01:02"}
        ips = {"s": "10.0.0.1", "c": "10.0.0.2"}
        self.configs = {}
        for side, role, lcore, peer in (("s", "server", 0, "c"), ("c", "client", 1, "s")):
            # Slots of 8 KiB: a 4096-byte MTU's frames fit one (the port's
            # active MTU is what one slot holds).
            vdev = (f"--vdev=net_memif0,role={role},socket={sock},socket-abstract=no,"
                    f"bsize=8192,mac={macs[side]}")
            # A memif client that finds no socket when its port starts never
            # connects: the client's port waits for the server's.
            wait = f"wait_for = \"{sock}\"\n" if role == "client" else ""
            own_extra, own_sleep = extra, idle_sleep_us
            if role == "client":
                own_extra = extra if client_extra is None else client_extra
                own_sleep = idle_sleep_us if client_idle_sleep_us is None else client_idle_sleep_us
            self.configs[side] = write_config(
                os.path.join(tmp, f"{tag}_{side}.toml"),
                ["-l", str(lcore), f"--file-prefix=dv_{side}_{pid}_{tag}", vdev],
                "net_memif0", [ips[side]], {ips[peer]: macs[peer]}, wait + own_extra,
                own_sleep)

    server_host = "127.0.0.1"

    def command(self, lib, side, cmd):
        """(argv, env) of `cmd` on droce as `side` ("s" or "c")."""
        return cmd, env_for(lib, self.configs[side])

    def listening(self, port):
        return listening(port)

    def reset(self):
        """Before a new pair of programs: the last server's socket file
        would make the client connect before the new server listens."""
        if os.path.exists(self.sock):
            os.unlink(self.sock)


def env_for(lib, config):
    env = dict(os.environ)
    env["LD_PRELOAD"] = lib
    env["DROCE_VERBS_CONFIG"] = config
    return env


class NetnsPair:
    """Two configurations on a veth pair between two network namespaces of
    the test's own, net_af_packet on each end: `server` in `ns_s` (the
    kernel's 10.66.0.1 carries the programs' own TCP exchange, droce is
    10.77.0.1 on the same veth, lcore 0) and `client` in `ns_c` (10.66.0.2,
    droce 10.77.0.2, lcore 1). No neighbour table: droce finds the peer's
    MAC by ARP. The caller removes the namespaces (`remove`)."""

    server_host = "10.66.0.1"

    def __init__(self, tmp, tag, extra=""):
        pid = os.getpid()
        self.ns = {"s": f"dvs{pid}{tag}", "c": f"dvc{pid}{tag}"}
        ifs = {"s": f"dvs{pid % 100000}{tag}"[:15], "c": f"dvc{pid % 100000}{tag}"[:15]}
        veth_between_namespaces(self.ns["s"], self.ns["c"], ifs["s"], ifs["c"])
        ips = {"s": "10.77.0.1", "c": "10.77.0.2"}
        self.configs = {}
        for side, lcore in (("s", 0), ("c", 1)):
            self.configs[side] = write_config(
                os.path.join(tmp, f"{tag}_{side}.toml"),
                ["-l", str(lcore), f"--file-prefix=dv_{side}_{pid}_{tag}",
                 f"--vdev=net_af_packet0,iface={ifs[side]}"],
                "net_af_packet0", [ips[side]], extra=extra)

    def command(self, lib, side, cmd):
        """(argv, env) of `cmd` on droce in the side's namespace."""
        return (["ip", "netns", "exec", self.ns[side], "env", f"LD_PRELOAD={lib}",
                 f"DROCE_VERBS_CONFIG={self.configs[side]}", *cmd], None)

    def listening(self, port):
        out = subprocess.run(["ip", "netns", "exec", self.ns["s"], "cat", "/proc/net/tcp",
                              "/proc/net/tcp6"], capture_output=True, text=True).stdout
        return tcp_listener_in(out.splitlines(), port)

    def reset(self):
        pass

    def remove(self):
        for ns in self.ns.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


class SwitchedHosts:
    """Hosts on a switch for MPI: `hosts` network namespaces of the test's
    own, each with `ranks_per_host` veths whose peers are ports of one Linux
    bridge in a switch namespace; rank r (host r // ranks_per_host) runs
    droce on net_af_packet over its own veth as 10.77.0.(r+1), on lcore
    r % 2, the peers' MACs found by ARP. A second bridge joins one more
    veth per host, with a kernel address (10.78.0.(h+1)), for mpirun's own
    TCP. `launcher` is the remote-shell agent mpirun starts its daemons
    with: it runs the command in the named host's namespace. The caller
    removes the namespaces (`remove`)."""

    CONTROL_NET = "10.78.0.0/24"

    def __init__(self, tmp, tag, hosts, ranks_per_host, extra=""):
        pid = os.getpid()
        self.switch = f"dvs{pid}{tag}"
        self.host_ns = [f"dvh{pid}{tag}{h}" for h in range(hosts)]
        self.host_names = [f"h{h}" for h in range(hosts)]
        self.ranks_per_host = ranks_per_host

        def ip(ns, *cmd):
            subprocess.run(["ip", "-n", ns, *cmd], check=True, capture_output=True, timeout=30)

        def host_link(ns, name, peer, bridge, index=None):
            at = ["index", str(index)] if index else []
            subprocess.run(["ip", "link", "add", name, *at, "netns", ns, "type", "veth",
                            "peer", "name", peer, "netns", self.switch],
                           check=True, capture_output=True, timeout=30)
            ip(self.switch, "link", "set", peer, "master", bridge)
            ip(self.switch, "link", "set", peer, "up")
            # No IPv6 on the hosts' links: the kernel's own router and
            # neighbour solicitations would be frames droce never asked for.
            subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-q", "-w",
                            f"net.ipv6.conf.{name}.disable_ipv6=1"], capture_output=True)
            ip(ns, "link", "set", name, "up")

        for ns in (self.switch, *self.host_ns):
            subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True)
            ip(ns, "link", "set", "lo", "up")
        for bridge in ("br0", "br1"):
            ip(self.switch, "link", "add", bridge, "type", "bridge")
            ip(self.switch, "link", "set", bridge, "up")
        self.configs = []
        for h, ns in enumerate(self.host_ns):
            host_link(ns, "ctl", f"c{h}", "br1")
            ip(ns, "addr", "add", f"10.78.0.{h + 1}/24", "dev", "ctl")
            for k in range(ranks_per_host):
                rank = h * ranks_per_host + k
                # net_af_packet (DPDK 22.11) names its PACKET_FANOUT group
                # (pid ^ ifindex) & 0xffff, and the kernel refuses (EINVAL)
                # to join a group of that id bound to another device in the
                # namespace. Two ranks started one after the other with
                # neighbouring ifindexes collided now and then; ifindexes
                # 4096 apart would need pids 4096 apart, bit for bit.
                host_link(ns, f"r{k}", f"p{rank}", "br0", index=1000 + (k << 12))
                self.configs.append(write_config(
                    os.path.join(tmp, f"{tag}_{rank}.toml"),
                    ["-l", str(rank % 2), f"--file-prefix=dv_{tag}{rank}_{pid}",
                     f"--vdev=net_af_packet0,iface=r{k}"],
                    "net_af_packet0", [f"10.77.0.{rank + 1}"], extra=extra))
        self.launcher = os.path.join(tmp, f"{tag}_launch.sh")
        with open(self.launcher, "w") as f:
            f.write("#!/bin/bash\nhost=$1; shift\ncase $host in\n")
            for name, ns in zip(self.host_names, self.host_ns):
                f.write(f'  {name}) ns={ns} ;;\n')
            f.write('  *) echo "unknown host $host" >&2; exit 1 ;;\nesac\n'
                    'exec ip netns exec "$ns" sh -c "$*"\n')
        os.chmod(self.launcher, 0o755)

    def mpirun_hosts(self):
        return ",".join(f"{n}:{self.ranks_per_host}" for n in self.host_names)

    def remove(self):
        for ns in (*self.host_ns, self.switch):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def run_pair(lib, pair, server_cmd, client_cmd, timeout=90):
    """Starts the server program, waits until it listens on its TCP port
    (passed with -p), then the client, which connects to the server's
    host. Returns ((rc, out, err), (rc, out, err))."""
    port = free_tcp_port()
    pair.reset()
    s_argv, s_env = pair.command(lib, "s", [*server_cmd, "-p", str(port)])
    c_argv, c_env = pair.command(lib, "c", [*client_cmd, "-p", str(port), pair.server_host])
    srv = subprocess.Popen(s_argv, env=s_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    deadline = time.time() + timeout
    while not pair.listening(port) and srv.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    return run_client_then_collect(srv, c_argv, timeout, env=c_env)


def show(res):
    rc, out, err = res
    return f"rc={rc}\n--- stdout\n{out}\n--- stderr\n{err}"


BW_HEADER = re.compile(r"#bytes\s+#iterations\s+BW peak\[(MB|Gb)/sec\]\s+"
                       r"BW average\[(MB|Gb)/sec\]\s+MsgRate\[Mpps\]")
LAT_HEADER = re.compile(r"#bytes\s+#iterations\s+t_min\[usec\]\s+t_max\[usec\]\s+"
                        r"t_typical\[usec\]")
