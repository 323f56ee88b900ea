"""A leaf-spine of droce-switch processes in real time: two leaves, two
spines, every link a net_memif pair modelled at 50 Mb/s. Two droce-perf
write_bw flows, each sender capped at the link rate, cross it, 10.1.0.1 ->
10.1.1.1 and 10.1.0.2 -> 10.1.1.2 (at half the link rate when hashed:
both may then share one spine); each leaf's uplinks are one ECMP group.
Each spine's capture (decoded with droce-decode --json) says which flows it
carried. Three ways to use the two paths (docs/MULTIPATH.md):

- ecmp: the leaves hash the 5-tuple and each QP keeps its UDP source
  port, so each flow crosses exactly one spine (both may pick the same
  one and share its uplinks);
- adaptive: the leaves send each packet to the least queued uplink, so
  both flows cross both spines and arrive out of order, which selective
  repeat (--recovery sr) places;
- spray: the leaves hash, and the senders vary the source port over 8
  values per packet (--entropy spray), so both flows cross both spines.

Checked: every flow's data arrives byte-exact (--check), and each flow
crossed one spine (ecmp) or both (adaptive, spray). Printed, not checked
(eight DPDK processes share the machine's CPUs, and the switches run up to
milliseconds late): each flow's goodput, the data frames each spine
carried, the frames resent, and how late the switches sent at worst. Each
process has its own --file-prefix and sleeps when idle.

usage: leaf_spine_test.py DROCE_SWITCH DROCE_PERF DROCE_DECODE"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e_perf"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
from perf_common import Checks, free_tcp_port  # noqa: E402
from leaf_spine_fabric import EAL, LeafSpine, memif_vdev  # noqa: E402

SWITCH, PERF, DECODE = sys.argv[1:4]
RATE = "50M"
N, SIZE = 100, 65536
HOSTS = {(0, 0): "10.1.0.1", (0, 1): "10.1.0.2", (1, 0): "10.1.1.1", (1, 1): "10.1.1.2"}
FLOWS = [((0, 0), (1, 0)), ((0, 1), (1, 1))]  # client host, server host
c = Checks()
tag = str(os.getpid())


def start(cmd, name):
    return name, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run_mode(mode, tmp):
    """Starts the fabric and the two flows; returns the flows' outputs and
    the data frames each spine carried, by sender."""
    fabric = LeafSpine(SWITCH, tmp, HOSTS, spines=2, rate=RATE, capture=True,
                       load_balance="adaptive" if mode == "adaptive" else "ecmp", tag=tag)
    hosts = []
    fabric.start()
    # Hashed, both flows took the same spine in every run here, and two
    # senders at the link rate would overload its uplinks
    # two to one: without a congestion control, go-back-N then resends into
    # the drops until a QP runs out of retries, whenever the machine lets
    # the senders reach their cap. Each is capped at half the rate there.
    rate = "0.025" if mode == "ecmp" else "0.05"
    common = ["--test", "write_bw", "-s", str(SIZE), "-n", str(N), "-t", "32", "--timeout", "90",
              "--idle-sleep-us", "20", "--check", "--counters", "--rate-gbps", rate]
    if mode != "ecmp":
        common += ["--recovery", "sr", "--reorder-tolerance", "64"]
    entropy = ["--entropy", "spray", "--entropy-paths", "8"] if mode == "spray" else []
    for k, (cli, srv) in enumerate(FLOWS):
        port = free_tcp_port()
        hosts.append(start([PERF, "-l", str(k), *EAL, "--file-prefix", f"ls_srv{k}_{tag}",
                            memif_vdev("net_memif0", "client", fabric.host_socket(*srv)),
                            "--", *common,
                            "-p", str(port), "--server", "--ip", HOSTS[srv]], f"server {k}"))
        time.sleep(0.5)
        hosts.append(start([PERF, "-l", str(1 - k), *EAL, "--file-prefix", f"ls_cli{k}_{tag}",
                            memif_vdev("net_memif0", "client", fabric.host_socket(*cli)),
                            "--", *common,
                            *entropy, "-p", str(port), "--connect", "127.0.0.1",
                            "--ip", HOSTS[cli]], f"client {k}"))
    outs = {}
    try:
        deadline = time.time() + 180
        for name, p in hosts:
            out, err = p.communicate(timeout=max(1, deadline - time.time()))
            outs[name] = (p.returncode, out, err)
    except subprocess.TimeoutExpired:
        c.ok(False, f"{mode}: the flows finished within 180 s")
    finally:
        fabric.stop()
        for name, p in hosts:
            if p.poll() is None:
                p.kill()
                p.wait()
    carried = fabric.data_frames_by_sender(DECODE, [HOSTS[cli] for cli, _ in FLOWS])
    lag_ms = fabric.lag_ms()
    return outs, carried, lag_ms


table = []
for mode in ("ecmp", "adaptive", "spray"):
    tmp = tempfile.mkdtemp(prefix=f"droce_leaf_spine_{mode}_")
    outs, carried, lag_ms = run_mode(mode, tmp)
    goodput, resent = [], 0
    for name in sorted(outs):
        rc, out, err = outs[name]
        c.ok(rc == 0 and "Data check: PASS" in out,
             f"{mode}: {name} exit 0, byte-exact ({rc}; {err.strip()[-400:]})")
        m = re.search(rf"^\s*{SIZE}\s+(\d+)\s+[\d.]+\s+([\d.]+)", out, re.M)
        if name.startswith("client") and m:
            goodput.append(float(m.group(2)) * 8 / 1000)  # MB/s -> Gb/s
        resent += sum(int(v) for v in re.findall(r"^\s*tx_retransmit_packets\s+(\d+)\s*$",
                                                 out, re.M))
    c.ok(len(goodput) == 2, f"{mode}: both clients printed their row ({goodput})")
    for cli, _ in FLOWS:
        ip = HOSTS[cli]
        spines = [carried[s][ip] for s in (0, 1)]
        want_both = mode != "ecmp"
        c.ok(sum(spines) >= N * SIZE // 1024 and
             (min(spines) > 0 if want_both else min(spines) == 0),
             f"{mode}: the flow from {ip} crossed {'both spines' if want_both else 'one spine'} "
             f"(data frames through spine 0, 1: {spines})")
    total = [sum(carried[s].values()) for s in (0, 1)]
    share = max(total) / max(1, sum(total))
    table.append((mode, goodput, total, share, resent, lag_ms))
    if c.failed == 0:
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        print(f"     kept {tmp}")

print(f"     {'mode':<9} {'goodput Gb/s':<14} {'data frames via spine 0, 1':<27} "
      f"{'busiest share':<14} {'resent':<7} switch lag max")
for mode, goodput, total, share, resent, lag_ms in table:
    print(f"     {mode:<9} {', '.join(f'{g:.3f}' for g in goodput):<14} "
          f"{', '.join(map(str, total)):<27} {share:<14.2f} {resent:<7} {lag_ms:.1f} ms")
c.finish()
