"""A leaf-spine of droce-switch processes in real time, for the programs
that run over it (droce-perf, droce-pktgen-dpdk): every link a net_memif
pair at a modelled rate, each leaf's uplinks one ECMP group.

Leaf l has ports 0..H-1 for its hosts (memif servers: a host attaches as
the client of socket host_socket(l, h)) and ports H..H+S-1 for its
uplinks to spines 0..S-1 (at uplink_rate, the host rate unless given);
spine s has port l for leaf l. Hosts are
addressed by the caller; each leaf routes its own hosts' addresses to
their ports and everything else over its uplinks, each spine routes every
host to its leaf. Every process has its own --file-prefix, sleeps when
idle and gets SIGINT at stop(); each writes its --json counters, and the
spines capture what they carry when asked (spine_capture(s)).

run_ring() runs a ring all-reduce of droce-pktgen-dpdk ranks over it, one
rank a host, each rank's one port used for both ring neighbours.

Used by tests/switch_e2e and `scripts/multipath-experiment --real-time`
(docs/MULTIPATH.md "In real time").
"""

import json
import math
import os
import random
import signal
import subprocess
import time

# RC RDMA WRITE FIRST, MIDDLE, LAST, LAST and ONLY with immediate, ONLY (IBA 9.2.1)
WRITE_OPCODES = {6, 7, 8, 9, 10, 11}
EAL = ["--no-huge", "-m", "256", "--no-pci", "--log-level=lib.eal:warning"]


def memif_vdev(name, role, sock):
    return f"--vdev={name},role={role},socket={sock},socket-abstract=no"


class LeafSpine:
    """hosts: {(leaf, host): ip}. load_balance: droce-switch's
    --load-balance of the leaves (the spines have one path to each
    leaf)."""

    def __init__(self, switch_exe, workdir, hosts, spines, rate="50M",
                 load_balance="ecmp", capture=False, buffer="4MiB", duration_s=300,
                 tag=None, switch_args=(), uplink_rate=None):
        self.exe, self.dir, self.hosts, self.spines = switch_exe, workdir, hosts, spines
        self.leaves = 1 + max(leaf for leaf, _ in hosts)
        self.per_leaf = 1 + max(h for _, h in hosts)
        self.rate, self.load_balance, self.capture = rate, load_balance, capture
        self.uplink_rate = uplink_rate or rate  # leaf-spine links (below rate: oversubscribed)
        self.buffer, self.duration_s = buffer, duration_s
        self.switch_args = list(switch_args)  # every switch, e.g. --pfc
        self.tag = tag or str(os.getpid())
        self.procs = []  # (name, Popen)

    def host_socket(self, leaf, host):
        return os.path.join(self.dir, f"h{leaf}_{host}.sock")

    def _uplink_socket(self, leaf, spine):
        return os.path.join(self.dir, f"u{leaf}_{spine}.sock")

    def spine_capture(self, spine):
        return os.path.join(self.dir, f"spine{spine}.pcap")

    def _json(self, name):
        return os.path.join(self.dir, f"{name}.json")

    def _start(self, name, cmd, wait_for=()):
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append((name, p))
        deadline = time.time() + 30
        while not all(os.path.exists(s) for s in wait_for) and p.poll() is None \
                and time.time() < deadline:
            time.sleep(0.05)
        if p.poll() is not None:
            out, err = p.communicate()
            raise RuntimeError(f"{name} exited {p.returncode}: {err.strip()[-400:]}")

    def start(self, lcores=(0, 1)):
        """Leaves first (their memif servers), then the spines."""
        H, S = self.per_leaf, self.spines
        common = ["--buffer", self.buffer, "--idle-sleep-us", "20",
                  "--duration", str(self.duration_s), *self.switch_args]
        for leaf in range(self.leaves):
            socks = [self.host_socket(leaf, h) for h in range(H)] + \
                    [self._uplink_socket(leaf, s) for s in range(S)]
            routes = [a for (l, h), ip in sorted(self.hosts.items()) if l == leaf
                      for a in ("--route", f"{ip}={h}")]
            uplinks = ",".join(str(H + s) for s in range(S))
            cmd = [self.exe, "-l", str(lcores[leaf % len(lcores)]), *EAL,
                   "--file-prefix", f"lsf_l{leaf}_{self.tag}",
                   *(memif_vdev(f"net_memif{i}", "server", s) for i, s in enumerate(socks)),
                   "--", *(a for i in range(H + S) for a in
                           ("--port", f"net_memif{i}@{self.rate if i < H else self.uplink_rate}")),
                   *routes, "--route", f"default={uplinks}",
                   "--load-balance", self.load_balance, "--seed", "7",
                   *common, "--json", self._json(f"leaf{leaf}")]
            self._start(f"leaf {leaf}", cmd, wait_for=socks)
        for s in range(S):
            routes = [a for (l, h), ip in sorted(self.hosts.items())
                      for a in ("--route", f"{ip}={l}")]
            cap = ["--capture", self.spine_capture(s)] if self.capture else []
            cmd = [self.exe, "-l", str(lcores[(self.leaves + s) % len(lcores)]), *EAL,
                   "--file-prefix", f"lsf_s{s}_{self.tag}",
                   *(memif_vdev(f"net_memif{l}", "client", self._uplink_socket(l, s))
                     for l in range(self.leaves)),
                   "--", *(a for l in range(self.leaves)
                           for a in ("--port", f"net_memif{l}@{self.uplink_rate}")),
                   *routes, *cap, *common, "--json", self._json(f"spine{s}")]
            self._start(f"spine {s}", cmd)

    def stop(self):
        """SIGINT to every switch, then wait; returns {name: (rc, stderr)}."""
        for _, p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        out = {}
        for name, p in self.procs:
            try:
                _, err = p.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                _, err = p.communicate()
            out[name] = (p.returncode, err)
        return out

    def counters(self):
        """Each switch's --json counters, by name (leaf0, spine1, ...)."""
        out = {}
        for name in [f"leaf{l}" for l in range(self.leaves)] + \
                    [f"spine{s}" for s in range(self.spines)]:
            path = self._json(name)
            if os.path.exists(path):
                with open(path) as f:
                    out[name] = json.load(f)
        return out

    def lag_ms(self, counters=None):
        """How late the switches sent, at worst (from counters(), read
        again unless given): the scheduler's share of the figures on a
        machine with fewer CPUs than processes."""
        counters = self.counters() if counters is None else counters
        return max([c["tx_lag_ns"]["max"] / 1e6 for c in counters.values()] or [0.0])

    def data_frames_by_sender(self, decode_exe, senders):
        """From each spine's capture (droce-decode --json): how many RDMA
        WRITE request frames each sender address put through it; a list
        by spine of {address: frames}."""
        carried = []
        for s in range(self.spines):
            by_sender = {ip: 0 for ip in senders}
            cap = self.spine_capture(s)
            if os.path.exists(cap):
                dec = subprocess.run([decode_exe, "--json", cap], capture_output=True,
                                     text=True, timeout=300)
                for line in dec.stdout.splitlines():
                    j = json.loads(line)
                    if j.get("roce") and j.get("opcode") in WRITE_OPCODES and \
                            j.get("src_ip") in by_sender:
                        by_sender[j["src_ip"]] += 1
            carried.append(by_sender)
        return carried


def ring_frames_per_rank(ranks, nbytes, mtu, iterations):
    """RDMA WRITE request frames each rank sends for a ring all-reduce, no
    frame resent: 2 (N - 1) transfers of S / N bytes an iteration, a frame
    per MTU of payload."""
    return iterations * 2 * (ranks - 1) * math.ceil(nbytes // ranks / mtu)


def run_ring(fabric, pktgen_exe, rank_at, nbytes, rank_args=(), iters=2, warmup=1,
             rate_gbps=0.0, mtu=1024, timeout_s=120):
    """Rank r of a ring all-reduce of nbytes on host rank_at[r] = (leaf,
    host) of the fabric, whose address there must be 10.0.0.1 + r (the
    ranks' own). Returns [(rc, output)] by rank and rank 0's --json."""
    n = len(rank_at)
    oob_port = 20000 + random.randrange(20000)
    json_path = os.path.join(fabric.dir, "ring.json")
    procs = []
    for r, (leaf, host) in enumerate(rank_at):
        cmd = [pktgen_exe, "--mode", "dpdk", "-l", str(r % 2), *EAL,
               "--file-prefix", f"lsf_r{r}_{fabric.tag}",
               memif_vdev("net_memif0", "client", fabric.host_socket(leaf, host)), "--",
               "--pattern", "ring", "--ranks", str(n), "--rank", str(r),
               "-b", str(nbytes), "-e", str(nbytes), "-n", str(iters), "-w", str(warmup),
               "--next-port", "net_memif0", "--prev-port", "net_memif0",
               "--mtu", str(mtu), "--rate-gbps", str(rate_gbps),
               "--oob-port", str(oob_port), "--timeout", str(timeout_s),
               "--idle-sleep-us", "20", *(["--json", json_path] if r == 0 else []),
               *rank_args]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))
    outs = []
    deadline = time.time() + timeout_s + 60
    for p in procs:
        try:
            out, _ = p.communicate(timeout=max(1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            out += "\n(killed: no end in time)"
        outs.append((p.returncode, out))
    result = None
    if os.path.exists(json_path):
        with open(json_path) as f:
            result = json.load(f)
    return outs, result
