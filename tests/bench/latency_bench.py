"""droce's latency next to a raw DPDK reference, in the same command.

Two processes on one net_memif pair (or, with --link veth, on the two
ends of a veth pair in two network namespaces, net_af_packet; needs root),
the server on lcore 0 and the client on lcore 1 (one CPU each, as on this
2-CPU machine):
  - the reference: droce-bench-dpdk-pingpong, one 64-byte frame echoed
    back and forth with nothing else on the path;
  - droce-perf write_lat, send_lat and read_lat of 2-byte messages (run to
    completion, the default), with --counters.
  - droce-pktgen-dpdk --mode stream: a stream of 64-byte latency probes at
    20 kpps from the client's lcore to a receive-only process on the
    server's, one-way latency from each probe's TX stamp to its arrival.
Each figure is half the round trip (perftest's convention; read_lat's is
the whole READ, as perftest reports it, and is held against the
reference's whole round trip; the probes' is one way), p50 / p99 / p99.9
in us.

Goals, per test: p50 <= 1.5 x the reference's p50 + 1 us, and p99 <= 2 x
the reference's p99. The probes' reference is the same ping-pong paced at
their rate (a round trip every 50 us), timed one way from client to server
like the probes (the client stamps each frame, the server notes its
arrival): a stall of the host delays every probe sent during it, and a
back-to-back ping-pong only the one round trip it falls in, so only paced
samples count stalls alike; and half a round trip averages two trips, so
a stall in one counts half. And what
would show a regression to a scheduler quantum or to losses on a
loss-free link: no retransmission, no timeout, no dropped frame (for the
probes: none lost), and no p99 of a millisecond or more. The bench exits
1 when a check fails.

usage: latency_bench.py BUILD_DIR [--iterations N] [--rounds R] [--link memif|veth]"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e_perf"))
from perf_common import LAT_HEADER, rows_after, run_memif_pair, run_pair  # noqa: E402

EAL = ["--no-huge", "-m", "512", "--no-pci", "--log-level=lib.eal:warning"]


class Memif:
    """The two ends of a net_memif pair; the socket lives in `tmp`."""

    def __init__(self, tmp):
        self.tmp = tmp

    def vdevs(self, tag):
        sock = os.path.join(self.tmp, f"{tag}.sock")
        return (f"--vdev=net_memif0,role=server,socket={sock},socket-abstract=no",
                f"--vdev=net_memif0,role=client,socket={sock},socket-abstract=no", sock)

    prefixes = ([], [])

    def droce(self, exe, test, args, tag):
        return run_memif_pair(exe, test, args, self.tmp, tag, timeout=180)


class Veth:
    """A veth pair between two network namespaces of our own, net_af_packet
    on each end; removed by close()."""

    def __init__(self):
        pid = os.getpid()
        self.ns = (f"dlva{pid}", f"dlvb{pid}")
        self.ifs = (f"dla{pid % 100000}", f"dlb{pid % 100000}")
        for ns in self.ns:
            subprocess.run(["ip", "netns", "add", ns], check=True)
        subprocess.run(["ip", "link", "add", self.ifs[0], "netns", self.ns[0], "type", "veth",
                        "peer", "name", self.ifs[1], "netns", self.ns[1]], check=True)
        for ns, ifname, addr in zip(self.ns, self.ifs, ("10.67.0.1/24", "10.67.0.2/24")):
            subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
            subprocess.run(["ip", "-n", ns, "addr", "add", addr, "dev", ifname], check=True)
            subprocess.run(["ip", "-n", ns, "link", "set", ifname, "up"], check=True)
        self.prefixes = (["ip", "netns", "exec", self.ns[0]], ["ip", "netns", "exec", self.ns[1]])

    def close(self):
        for ns in self.ns:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    def vdevs(self, tag):
        return (f"--vdev=net_af_packet0,iface={self.ifs[0]},qdisc_bypass=1",
                f"--vdev=net_af_packet0,iface={self.ifs[1]},qdisc_bypass=1", None)

    def droce(self, exe, test, args, tag):
        pid = os.getpid()
        s_vdev, c_vdev, _ = self.vdevs(tag)
        return run_pair(exe, test, ["-l", "0", f"--file-prefix=lat_s_{pid}_{tag}", s_vdev],
                        ["-l", "1", f"--file-prefix=lat_c_{pid}_{tag}", c_vdev], args,
                        server_args=["--bind", "10.67.0.1", "--ip", "10.78.0.1"],
                        client_args=["--ip", "10.78.0.2"], server_prefix=self.prefixes[0],
                        client_prefix=self.prefixes[1], connect="10.67.0.1", timeout=180)


def serve_then_run(link, sock, server_cmd, client_cmd):
    """Starts server_cmd in the server's namespace, then client_cmd in the
    client's once the server can take it; returns the client's completed
    process and the server's exit code and stderr."""
    srv = subprocess.Popen([*link.prefixes[0], *server_cmd],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # A memif client that finds no socket never connects: start it once the
    # server has made it.
    deadline = time.time() + 30
    while sock and not os.path.exists(sock) and srv.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    if not sock:
        time.sleep(1)  # af_packet: the server's socket is bound once its port starts
    try:
        cli = subprocess.run([*link.prefixes[1], *client_cmd],
                             capture_output=True, text=True, timeout=120)
        _, srv_err = srv.communicate(timeout=60)
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()
    return cli, srv.returncode, srv_err


def reference(link, exe, tag, iterations, interval_us=0):
    s_vdev, c_vdev, sock = link.vdevs(tag)
    pid = os.getpid()
    cli, _, _ = serve_then_run(
        link, sock,
        [exe, "-l", "0", f"--file-prefix=lat_ref_s_{pid}_{tag}", *EAL, s_vdev,
         "--", "server", str(iterations)],
        [exe, "-l", "1", f"--file-prefix=lat_ref_c_{pid}_{tag}", *EAL, c_vdev,
         "--", "client", str(iterations), "64", str(interval_us)])
    # Half the round trip, or paced the one-way figures from client to server.
    which = "one_way_us" if interval_us else "half_rtt_us"
    m = re.search(which + r" p50 ([\d.]+) p99 ([\d.]+) p999 ([\d.]+)", cli.stdout)
    if cli.returncode != 0 or not m:
        sys.exit(f"latency_bench: the reference failed: {cli.stderr.strip()[-500:]}")
    return tuple(float(x) for x in m.groups())


def counter(text, name):
    """The sum of counter `name` over every block of --counters (ports, QPs)."""
    return sum(int(v) for v in re.findall(rf"^\s*{name}\s+(\d+)\s*$", text, re.M))


def droce(link, exe, tag, test, iterations):
    (src, sout, serr), (crc, cout, cerr) = link.droce(
        exe, test, ["-s", "2", "-n", str(iterations), "--counters"], tag)
    if crc != 0 or src != 0:
        sys.exit(f"latency_bench: droce-perf {test} failed: {(cerr + serr).strip()[-800:]}")
    rows = rows_after(LAT_HEADER, cout)
    if not rows:
        sys.exit(f"latency_bench: droce-perf {test}: no result row")
    # #bytes #iterations t_min t_max t_typical t_avg t_stdev p99 p99.9
    row = rows[0]
    bad = {name: counter(cout, name) + counter(sout, name)
           for name in ("tx_retransmit_packets", "retransmit_timeouts", "port_tx_dropped")}
    return (row[4], row[7], row[8]), bad


PROBE_RATE = 20000  # per second: far below the link, so no probe queues behind another


def probes(link, exe, tag, iterations):
    """One-way latency of a probe stream: the receiver on the server end
    (lcore 0, receive only), the sender on the client end (lcore 1), which
    waits for its link before its clock starts."""
    s_vdev, c_vdev, sock = link.vdevs(tag)
    pid = os.getpid()
    out = os.path.join(tempfile.gettempdir(), f"droce-latency-probes-{pid}-{tag}.json")
    seconds = iterations / PROBE_RATE
    tx, rx_code, rx_err = serve_then_run(
        link, sock,
        [exe, "--mode", "stream", "-l", "0", f"--file-prefix=lat_pr_{pid}_{tag}", *EAL, s_vdev,
         "--", "--rx-port", "0", "--duration", f"{seconds + 2:.1f}", "--drain", "1",
         "--json", out],
        [exe, "--mode", "stream", "-l", "1", f"--file-prefix=lat_pt_{pid}_{tag}", *EAL, c_vdev,
         "--", "--tx-port", "0", "--duration", f"{seconds + 1:.1f}", "--burst", "1", "--stream",
         f"id=1,payload=64,rate={PROBE_RATE}pps,count={iterations}"])
    if tx.returncode != 0 or rx_code != 0 or not os.path.exists(out):
        sys.exit(f"latency_bench: the probe stream failed: {(tx.stderr + rx_err).strip()[-800:]}")
    with open(out) as f:
        row = json.load(f)["streams"][0]
    os.unlink(out)
    figures = tuple(row[k] / 1000 for k in ("lat_p50_ns", "lat_p99_ns", "lat_p999_ns"))
    return figures, {"probes_lost": iterations - (row["rx_packets"] - row["duplicate"])}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--iterations", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--link", choices=["memif", "veth"], default="memif")
    a = ap.parse_args()
    if a.link == "veth" and os.geteuid() != 0:
        sys.exit("latency_bench: --link veth needs root (ip netns)")
    ref_exe = os.path.join(a.build, "tests", "bench", "droce-bench-dpdk-pingpong")
    perf = os.path.join(a.build, "apps", "droce-perf")
    pktgen = os.path.join(a.build, "apps", "droce-pktgen-dpdk")
    link = Veth() if a.link == "veth" else Memif(tempfile.mkdtemp(prefix="droce-latency-"))
    # Rounds alternate the reference and droce, so both see the same load;
    # the median round of each figure is compared.
    refs, paced, runs, bad = [], [], {t: [] for t in ("write_lat", "send_lat", "read_lat",
                                                      "probes")}, {}
    try:
        for r in range(a.rounds):
            refs.append(reference(link, ref_exe, f"ref{r}", a.iterations))
            paced.append(reference(link, ref_exe, f"paced{r}", a.iterations,
                                   1_000_000 // PROBE_RATE))
            for test in runs:
                if test == "probes":
                    figures, b = probes(link, pktgen, f"{test}{r}", a.iterations)
                else:
                    figures, b = droce(link, perf, f"{test}{r}", test, a.iterations)
                runs[test].append(figures)
                for k, v in b.items():
                    bad[(test, k)] = bad.get((test, k), 0) + v
    finally:
        if isinstance(link, Veth):
            link.close()

    def median(rows, i):
        v = sorted(x[i] for x in rows)
        return v[len(v) // 2]

    ref = tuple(median(refs, i) for i in range(3))
    ref_paced = tuple(median(paced, i) for i in range(3))
    failed = 0
    print(f"# half round trip, us, median of {a.rounds} rounds of {a.iterations} iterations; "
          f"{'memif pair' if a.link == 'memif' else 'veth pair, net_af_packet'}, lcores 0 and 1")
    print(f"{'test':<22} {'p50':>8} {'p99':>8} {'p99.9':>8}   goal")
    print(f"{'raw DPDK ping-pong':<22} {ref[0]:>8.2f} {ref[1]:>8.2f} {ref[2]:>8.2f}   (reference)")
    print(f"{f'  paced {1_000_000 // PROBE_RATE} us, one way':<22} {ref_paced[0]:>8.2f} "
          f"{ref_paced[1]:>8.2f} {ref_paced[2]:>8.2f}   (the probes' reference)")
    for test, rows in runs.items():
        p50, p99, p999 = (median(rows, i) for i in range(3))
        # read_lat is the whole READ (perftest's convention): against the
        # reference's whole round trip.
        k = 2 if test == "read_lat" else 1
        base = ref_paced if test == "probes" else ref
        goal50, goal99 = 1.5 * k * base[0] + 1.0, 2 * k * base[1]
        ok50 = p50 <= goal50
        ok99 = p99 <= goal99
        quantum = p99 < 1000
        clean = all(v == 0 for (t, _), v in bad.items() if t == test)
        verdict = "PASS" if ok50 and ok99 and quantum and clean else "FAIL"
        failed += verdict == "FAIL"
        name = "pktgen stream probes" if test == "probes" else "droce-perf " + test
        print(f"{name:<22} {p50:>8.2f} {p99:>8.2f} {p999:>8.2f}   "
              f"p50 <= {goal50:.2f} {'ok' if ok50 else 'MISSED'}, "
              f"p99 <= {goal99:.2f} {'ok' if ok99 else 'MISSED'}, "
              f"{'no' if clean else 'SOME'} {'losses' if test == 'probes' else 'retransmissions/drops'}: "
              f"{verdict}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
