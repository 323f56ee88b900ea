"""Receive scaling over lcores (sharding): droce-endpoint with two
QPs receiving UC RDMA WRITE ONLY frames (64 B payload by default) replayed by net_pcap
(infinite_rx=1), next to dpdk-testpmd io forwarding on the same vdevs with
the same number of forwarding cores.

  1 lcore:  one shard, one RX queue (both QPs' frames in one pcap);
  2 lcores, one RX queue: --shards 2 --shard-rx one (shard 0 polls the
            queue and hands the other QP's frames over by ring);
  2 lcores, an RX queue each: --shards 2 --shard-rx queues (net_pcap: one
            rx_pcap file per queue, one QP per file, as RSS would spread
            two flows).

UC, because net_pcap replays the same PSNs forever: a UC responder
resynchronises on each new WRITE ONLY and places every frame (IBA 9.8.3),
where an RC one would see duplicates after the first pass. So this path
parses, checks the ICRC and places, but sends no ACKs.

droce's rate is the frames its endpoints delivered over the run
(--duration, --json); testpmd's its median Rx-pps. On a 2-CPU machine the
2-lcore runs use both CPUs (the main lcore shares one and mostly sleeps).

usage: shard_rx_bench.py BUILD_DIR [--seconds S] [--payload BYTES (64)]
"""

import json
import os
import subprocess
import sys
import tempfile

from testpmd_ref import testpmd_mpps

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
from e2e_common import (EP_IP, EP_MAC, PEER_IP, PEER_MAC, reth, request,  # noqa: E402
                        wrpcap)

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
seconds = float(sys.argv[sys.argv.index("--seconds") + 1]) if "--seconds" in sys.argv else 4
endpoint = os.path.join(build, "apps/droce-endpoint")
tmp = tempfile.mkdtemp(prefix="droce-shard-rx-bench-")
EAL = ["--no-huge", "-m", "512", "--no-pci", "--log-level=lib.eal:warning"]
pid = os.getpid()
QPNS, PEERS = [0x11, 0x12], [0x22, 0x23]
PAYLOAD = int(sys.argv[sys.argv.index("--payload") + 1]) if "--payload" in sys.argv else 64
if not 1 <= PAYLOAD <= 4096:
    raise SystemExit(f"--payload: {PAYLOAD} is out of range 1..4096")
MTU = 256 if PAYLOAD <= 256 else 1024 if PAYLOAD <= 1024 else 4096
# Frames per QP: 1024, or fewer so that a QP's pcap stays near 1 MiB. net_pcap
# copies each frame out of its stored copy; with 8 MiB of them that read
# from cold memory halved the 1-lcore rate at 4 KiB, and the 2-lcore run,
# each reading half, looked super-linear.
RKEY, FRAMES = 0x100, min(1024, max(64, (1 << 20) // PAYLOAD))
UC_WRITE_ONLY = 0x2A  # IBA 9.2.1: UC (0x20) | RDMA WRITE Only


def frames_for(qi):
    out = []
    for psn in range(FRAMES):
        p = request(UC_WRITE_ONLY, psn, reth(qi * FRAMES * PAYLOAD + psn * PAYLOAD, RKEY,
                                              PAYLOAD), bytes([psn & 0xFF]) * PAYLOAD,
                    dqpn=QPNS[qi])
        out.append(p)
    return out


def write_inputs():
    a, b = frames_for(0), frames_for(1)
    paths = {k: os.path.join(tmp, f"{k}.pcap") for k in ("a", "b", "ab")}
    wrpcap(paths["a"], a)
    wrpcap(paths["b"], b)
    wrpcap(paths["ab"], [f for pair in zip(a, b) for f in pair])
    cfg = os.path.join(tmp, "ep.toml")
    with open(cfg, "w") as f:
        f.write(f"[[mr]]\nkey = {RKEY:#x}\nlength = {2 * FRAMES * PAYLOAD}\n")
        for q, peer in zip(QPNS, PEERS):
            f.write(f'[[qp]]\nqpn = {q:#x}\npeer_qpn = {peer:#x}\ntype = "uc"\nmtu = {MTU}\n'
                    f'local_ip = "{EP_IP}"\npeer_ip = "{PEER_IP}"\n'
                    f'local_mac = "{EP_MAC}"\npeer_mac = "{PEER_MAC}"\n')
    return paths, cfg


def droce(lcores, vdev, args, tag):
    stats = os.path.join(tmp, f"{tag}.json")
    cmd = [endpoint, "--lcores", lcores, *EAL, f"--file-prefix=srb_{pid}_{tag}",
           f"--vdev={vdev}", "--", "--config", cfg, "--duration", str(seconds),
           "--json", stats, *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60)
    if r.returncode != 0 or not os.path.exists(stats):
        raise SystemExit(f"droce-endpoint failed ({r.returncode}): {r.stdout[-1500:]}"
                         f"{r.stderr[-1500:]}")
    with open(stats) as f:
        port = json.load(f)["ports"][0]
    ep = port["endpoint"]
    if ep["rx_malformed"] or ep["rx_unknown_qpn"]:
        raise SystemExit(f"{tag}: frames not delivered: {ep}")
    return ep["rx_delivered"] / seconds / 1e6, port


def testpmd(lcores, vdev, cores, tag):
    return testpmd_mpps(["--lcores", lcores, *EAL, f"--file-prefix=srb_tp_{pid}_{tag}"], vdev,
                        ["--forward-mode=io", f"--nb-cores={cores}", f"--rxq={cores}",
                         f"--txq={cores}"], seconds)


paths, cfg = write_inputs()
one_file = f"net_pcap0,rx_pcap={paths['ab']},infinite_rx=1"
two_files = f"net_pcap0,rx_pcap={paths['a']},rx_pcap={paths['b']},infinite_rx=1"
print(f"shard RX scaling, {PAYLOAD} B UC WRITE, {seconds:.0f} s per run "
      f"({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f})", flush=True)
d1, _ = droce("0@0,1@1", one_file, [], "one")
t1 = testpmd("0@0,1@1", one_file, 1, "one")
print(f"1 lcore:                   droce {d1:6.2f} Mpps, testpmd io {t1:6.2f} Mpps, "
      f"ratio {d1 / t1:.2f}", flush=True)
dd, port = droce("0@0,1@1,2@0", one_file, ["--shards", "2", "--shard-rx", "one"], "dispatch")
handed = sum(s["port"]["rx_dispatched"] for s in port["shards"])
print(f"2 lcores, one RX queue:    droce {dd:6.2f} Mpps ({dd / d1:.2f}x 1 lcore; "
      f"{handed / seconds / 1e6:.2f} M/s handed over)", flush=True)
d2, port = droce("0@0,1@1,2@0", two_files, ["--shards", "2", "--shard-rx", "queues"], "queues")
t2 = testpmd("0@0,1@1,2@0", two_files, 2, "queues")
queues = [s["rx_queue"] for s in port["shards"]]
if queues != [0, 1]:
    raise SystemExit(f"shards polled RX queues {queues}, not [0, 1]")
print(f"2 lcores, an RX queue each: droce {d2:6.2f} Mpps ({d2 / d1:.2f}x 1 lcore), "
      f"testpmd io {t2:6.2f} Mpps ({t2 / t1:.2f}x), ratio {d2 / t2:.2f}", flush=True)
print(json.dumps({"payload": PAYLOAD, "one_lcore": {"droce_mpps": d1, "testpmd_io_mpps": t1},
                  "two_lcores_one_queue": {"droce_mpps": dd},
                  "two_lcores_two_queues": {"droce_mpps": d2, "testpmd_io_mpps": t2}}))
