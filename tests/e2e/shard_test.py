"""One port's QPs sharded over two worker lcores (--lcores 0@0,1@1,2@0, --shards 2):
droce-endpoint on net_pcap, 4 QPs (round robin: two per lcore), WRITEs of
distinct patterns and READs of the same bytes back, checked byte for byte.

 1. Two tx_pcap files: the port gets a TX queue per shard; each shard's
    frames land in its own file, so the file says which lcore sent them.
 2. One tx_pcap: the second shard transmits through the ring to the RX
    lcore (tx_to_ring). A PFC frame (priority 3, the longest pause) comes
    first: QPs on both shards with DSCP 26 (priority 3) are held; a QP with
    DSCP 0 is not, and its ACK leaves well before theirs.
 3. An RX queue per shard (--shard-rx queues; net_pcap: one per rx_pcap
    file), as RSS gives on a NIC: each file holds whole QPs of both shards,
    so each lcore hands the other's frames over by ring, and a PFC frame
    arrives on queue 1.
 4. Bad values of --shards / --shard-tx / --shard-rx / qp.lcore: exit 2,
    option named.

Both runs also check the per-lcore counters (--json shards[], per-QP
lcore) and that the pools are full at shutdown (rings drained)."""

import json
import os
import struct
import subprocess
import sys

from e2e_common import *  # noqa: F401,F403

QPNS = [0x11, 0x12, 0x13, 0x14]
PEERS = [0x22, 0x23, 0x24, 0x25]
RKEY = 0x100
CHUNK, CHUNKS = 1024, 8            # per QP: 8 WRITEs of 1 KiB
REGION = CHUNK * CHUNKS
# Main lcore 0, workers 1 and 2; this machine may have two CPUs, so the
# lcores are mapped onto CPUs 0 and 1 (the main lcore mostly sleeps).
EAL_LCORES = "0@0,1@1,2@0"


def run(exe, prefix, vdevs, app_args, timeout=60):
    cmd = [exe, "--no-huge", "-m", "256", "--no-pci", "--file-prefix", prefix,
           "--lcores", EAL_LCORES, "--log-level", "lib.eal:warning"]
    cmd += ["--vdev=" + v for v in vdevs] + ["--"] + app_args
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def config(path, dscps):
    with open(path, "w") as f:
        f.write(f"""
[[mr]]
key = {RKEY:#x}
length = {REGION * len(QPNS)}
""")
        for q, p, dscp in zip(QPNS, PEERS, dscps):
            f.write(f"""
[[qp]]
qpn = {q:#x}
peer_qpn = {p:#x}
local_ip = "{EP_IP}"
peer_ip = "{PEER_IP}"
local_mac = "{EP_MAC}"
peer_mac = "{PEER_MAC}"
dscp = {dscp}
""")


def pattern(qi, j):
    # Distinct per QP and chunk: a frame delivered to the wrong QP or place
    # shows up as wrong bytes.
    return bytes(((qi * 37 + j * 11 + k) * 7 + qi) & 0xFF for k in range(CHUNK))


def req(opcode, qi, psn, ext, payload=b""):
    p = request(opcode, psn, ext, payload, ackreq=True, dqpn=QPNS[qi])
    p[UDP].sport = 0xC000 | PEERS[qi]
    p[IP].chksum = None
    p[BTH].icrc = None
    return Ether(raw(p))


def traffic(qis):
    """Per QP: WRITEs of its region, then one READ of all of it. QPs
    interleaved, so that both shards have frames in every burst."""
    pkts = []
    for j in range(CHUNKS):
        for qi in qis:
            va = qi * REGION + j * CHUNK
            pkts.append(req(WRITE_ONLY, qi, j, reth(va, RKEY, CHUNK), pattern(qi, j)))
    for qi in qis:
        pkts.append(req(READ_REQ, qi, CHUNKS, reth(qi * REGION, RKEY, REGION)))
    return pkts


def responses(frames):
    """{dest QPN: [(opcode, psn, payload, time)]} of what droce sent."""
    out = {}
    for p in frames:
        b, rest, _ = split(p)
        payload = rest
        if b.opcode in (ACK, READ_FIRST, READ_LAST, READ_ONLY):
            payload = rest[4:]  # AETH
        if b.padcount:
            payload = payload[:-b.padcount]
        out.setdefault(b.dqpn, []).append((b.opcode, b.psn, payload, float(p.time)))
    return out


def check_qp(resp, qi):
    peer = PEERS[qi]
    got = resp.get(peer, [])
    acks = [psn for op, psn, _, _ in got if op == ACK]
    check(acks and acks[-1] == CHUNKS - 1, f"qp {QPNS[qi]:#x}: ACKs {acks}")
    data = b"".join(pl for op, _, pl, _ in got if op in (READ_FIRST, READ_MIDDLE, READ_LAST,
                                                         READ_ONLY))
    want = b"".join(pattern(qi, j) for j in range(CHUNKS))
    check(data == want, f"qp {QPNS[qi]:#x}: READ returned {len(data)} bytes, "
          f"{'equal' if data == want else 'different'} (want {len(want)})")


def check_stats(stats, want_tx_queue1):
    port = stats["ports"][0]
    shards = port["shards"]
    check(len(shards) == 2, f"{len(shards)} shards")
    check([s["lcore"] for s in shards] == [1, 2], f"shard lcores {[s['lcore'] for s in shards]}")
    for s in shards:
        check(s["qps"] == 2, f"shard {s['index']}: {s['qps']} QPs")
        check(s["endpoint"]["rx_delivered"] >= 2 * (CHUNKS + 1),
              f"shard {s['index']}: rx_delivered {s['endpoint']['rx_delivered']}")
        check(s["endpoint"]["tx_frames"] > 0, f"shard {s['index']}: tx_frames 0")
    check(shards[1]["tx_queue"] == want_tx_queue1, f"shard 1 tx_queue {shards[1]['tx_queue']}")
    check(shards[0]["port"]["rx_dispatched"] == shards[1]["port"]["rx_from_ring"] > 0,
          "frames handed to shard 1 = frames it took from its ring")
    check(port["endpoint"]["rx_unknown_qpn"] == 0 and port["endpoint"]["rx_malformed"] == 0,
          "no unknown QPN, nothing malformed")
    lcores = {q["qpn"]: q["lcore"] for q in stats["qps"]}
    check(lcores == {0x11: 1, 0x12: 2, 0x13: 1, 0x14: 2}, f"QP lcores {lcores}")
    check(port["mempool_avail"] == port["mempool_size"], "pool full")


def main():
    exe = find_endpoint()
    d = workdir()
    cfg = os.path.join(d, "ep.toml")

    # 1. A TX queue per shard (net_pcap: one per tx_pcap file).
    config(cfg, [DSCP] * 4)
    in_pcap = os.path.join(d, "in1.pcap")
    out0, out1 = os.path.join(d, "out0.pcap"), os.path.join(d, "out1.pcap")
    wrpcap(in_pcap, traffic(range(4)))
    stats = os.path.join(d, "s1.json")
    r = run(exe, "droce_e2e_shard1",
            [f"net_pcap0,rx_pcap={in_pcap},tx_pcap={out0},tx_pcap={out1}"],
            ["--config", cfg, "--shards", "2", "--exit-when-idle", "500", "--json", stats])
    sys.stdout.write(r.stdout[-2500:])
    check(r.returncode == 0, f"exit {r.returncode}: {r.stderr[-1500:]}")
    check("all pools full at shutdown" in r.stdout, "leak check (TX queue per shard)")
    f0, f1 = roce_frames(out0), roce_frames(out1)
    check(all(icrc_ok(p) for p in list(f0) + list(f1)), "ICRC of every frame")
    r0, r1 = responses(f0), responses(f1)
    # Round robin: 0x11, 0x13 on shard 0 (lcore 1), 0x12, 0x14 on shard 1.
    check(set(r0) == {0x22, 0x24} and set(r1) == {0x23, 0x25},
          f"queue 0 sent to {sorted(map(hex, r0))}, queue 1 to {sorted(map(hex, r1))}")
    resp = {**r0, **r1}
    for qi in range(4):
        check_qp(resp, qi)
    with open(stats) as f:
        s = json.load(f)
    check_stats(s, 1)
    print("shard: TX queue per shard OK")

    # 2. One TX queue: shard 1 sends through the RX lcore. PFC first.
    config(cfg, [DSCP, DSCP, DSCP, 0])   # 0x14 (shard 1): priority 0, not paused
    pfc = Ether(src=PEER_MAC, dst="01:80:c2:00:00:01", type=0x8808) / Raw(
        struct.pack("!HH8H", 0x0101, 1 << 3, 0, 0, 0, 0xFFFF, 0, 0, 0, 0) + b"\0" * 26)
    in_pcap = os.path.join(d, "in2.pcap")
    out = os.path.join(d, "out.pcap")
    wrpcap(in_pcap, [Ether(raw(pfc))] + traffic(range(4)))
    stats = os.path.join(d, "s2.json")
    # 1 Gb/s: 65535 quanta pause 33.5 ms (each shard paces at 0.5 Gb/s and
    # is paused for the same 33.5 ms).
    r = run(exe, "droce_e2e_shard2", [f"net_pcap0,rx_pcap={in_pcap},tx_pcap={out}"],
            ["--config", cfg, "--shards", "2", "--port-rate", "1", "--exit-when-idle", "500",
             "--json", stats])
    sys.stdout.write(r.stdout[-2500:])
    check(r.returncode == 0, f"exit {r.returncode}: {r.stderr[-1500:]}")
    check("all pools full at shutdown" in r.stdout, "leak check (TX through the ring)")
    frames = roce_frames(out)
    check(all(icrc_ok(p) for p in frames), "ICRC of every frame")
    resp = responses(frames)
    for qi in range(4):
        check_qp(resp, qi)
    with open(stats) as f:
        s = json.load(f)
    check_stats(s, -1)
    sh = s["ports"][0]["shards"]
    check(sh[1]["port"]["tx_to_ring"] > 0, "shard 1 sent through the ring")
    check(sh[0]["port"]["pfc_shared"] == 1, f"pfc_shared {sh[0]['port']['pfc_shared']}")
    for x in sh:
        check(x["port"]["pfc_applied"] >= 1 and x["endpoint"]["rx_pfc_frames"] >= 1,
              f"shard {x['index']}: PFC applied")
        check(x["endpoint"]["tx_pfc_held"] > 0, f"shard {x['index']}: nothing held by PFC")
    first = {peer: min(t for _, _, _, t in resp[peer]) for peer in PEERS}
    free = first[0x25]
    for peer in (0x22, 0x23, 0x24):
        check(first[peer] - free >= 0.025,
              f"peer {peer:#x}: first frame {1000 * (first[peer] - free):.1f} ms after the "
              f"unpaused QP's (want >= 25 ms of the 33.5 ms pause)")
    print("shard: TX through the ring, PFC on every shard OK")

    # 3. An RX queue per shard. A hash sends whole flows to a queue without
    # regard to the shard a QP was put on: file A has QPs 0x11 (shard 0) and
    # 0x12 (shard 1), file B 0x13 (shard 0) and 0x14 (shard 1), and B starts
    # with the PFC frame. TX: a queue per shard.
    config(cfg, [DSCP] * 4)
    in_a, in_b = os.path.join(d, "in3a.pcap"), os.path.join(d, "in3b.pcap")
    wrpcap(in_a, traffic([0, 1]))
    wrpcap(in_b, [Ether(raw(pfc))] + traffic([2, 3]))
    out0, out1 = os.path.join(d, "out3_0.pcap"), os.path.join(d, "out3_1.pcap")
    stats = os.path.join(d, "s3.json")
    r = run(exe, "droce_e2e_shard3",
            [f"net_pcap0,rx_pcap={in_a},rx_pcap={in_b},tx_pcap={out0},tx_pcap={out1}"],
            ["--config", cfg, "--shards", "2", "--shard-rx", "queues", "--port-rate", "1",
             "--exit-when-idle", "500", "--json", stats])
    sys.stdout.write(r.stdout[-2500:])
    check(r.returncode == 0, f"exit {r.returncode}: {r.stderr[-1500:]}")
    check("all pools full at shutdown" in r.stdout, "leak check (RX queue per shard)")
    f0, f1 = roce_frames(out0), roce_frames(out1)
    check(all(icrc_ok(p) for p in list(f0) + list(f1)), "ICRC of every frame")
    resp = {**responses(f0), **responses(f1)}
    for qi in range(4):
        check_qp(resp, qi)
    with open(stats) as f:
        s = json.load(f)
    port = s["ports"][0]
    sh = port["shards"]
    check([x["rx_queue"] for x in sh] == [0, 1], f"RX queues {[x['rx_queue'] for x in sh]}")
    for k, x in enumerate(sh):
        other = sh[1 - k]
        check(x["port"]["rx_mbufs"] > 0, f"shard {k}: polled its queue ({x['port']['rx_mbufs']})")
        # Each file has CHUNKS WRITEs and a READ for the other shard's QP.
        check(x["port"]["rx_dispatched"] == CHUNKS + 1,
              f"shard {k}: handed over {x['port']['rx_dispatched']} frames (want {CHUNKS + 1})")
        check(x["port"]["rx_from_ring"] == other["port"]["rx_dispatched"],
              f"shard {k}: took {x['port']['rx_from_ring']} from its ring, the other shard "
              f"handed over {other['port']['rx_dispatched']}")
        check(x["port"]["pfc_applied"] >= 1 and x["endpoint"]["rx_pfc_frames"] >= 1,
              f"shard {k}: PFC from queue 1 applied")
    check(sh[1]["port"]["pfc_shared"] == 1 and sh[0]["port"]["pfc_shared"] == 0,
          f"PFC shared by the lcore of queue 1 ({[x['port']['pfc_shared'] for x in sh]})")
    check(port["endpoint"]["rx_unknown_qpn"] == 0 and port["endpoint"]["rx_malformed"] == 0,
          "no unknown QPN, nothing malformed")
    check(port["mempool_avail"] == port["mempool_size"], "pool full")
    check("rx_queue 1 rx_dispatched" in r.stdout, "--counters shows the shards' RX queues")
    print("shard: RX queue per shard OK")

    # 4. Bad values.
    null = ["net_null0"]
    for args, option in [
            (["--shards", "0"], "--shards"),
            (["--shards", "3"], "--shards"),      # two worker lcores
            (["--shard-tx", "sometimes"], "--shard-tx"),
            (["--shard-rx", "sometimes"], "--shard-rx")]:
        r = run(exe, "droce_e2e_shard_bad", null, args)
        check(r.returncode == 2 and option in r.stderr,
              f"{args}: exit {r.returncode}, stderr {r.stderr.strip()[-300:]}")
    one_tx = [f"net_pcap0,rx_pcap={in_pcap},tx_pcap={os.path.join(d, 'x.pcap')}"]
    r = run(exe, "droce_e2e_shard_bad", one_tx, ["--shards", "2", "--shard-tx", "queues"])
    check(r.returncode == 2 and "--shard-tx" in r.stderr and "TX queue" in r.stderr,
          f"--shard-tx queues on one TX queue: exit {r.returncode}, {r.stderr.strip()[-300:]}")
    r = run(exe, "droce_e2e_shard_bad", one_tx, ["--shards", "2", "--shard-rx", "queues"])
    check(r.returncode == 2 and "--shard-rx" in r.stderr and "RX queue" in r.stderr,
          f"--shard-rx queues on one RX queue: exit {r.returncode}, {r.stderr.strip()[-300:]}")
    with open(cfg, "a") as f:
        f.write("lcore = 0\n")  # the last [[qp]]: lcore 0 is the main lcore
    r = run(exe, "droce_e2e_shard_bad", null, ["--config", cfg, "--shards", "2"])
    check(r.returncode == 2 and "qp[3]" in r.stderr and "lcore" in r.stderr,
          f"qp lcore 0: exit {r.returncode}, {r.stderr.strip()[-300:]}")
    print("shard: bad values OK")
    print("shard: OK")


if __name__ == "__main__":
    main()
