"""Hostile traffic at line rate: a generator process (dpdk-testpmd, io
forwarding from net_pcap with infinite_rx=1 to net_memif) replays a file of
adversarial frames (hostile_frames.py: fuzz seeds, mutations of valid
requests, wrong keys and addresses, PSN storms, READ floods beyond
max_dest_rd_atomic, zero and maximum lengths, IPv4 options and fragments,
PFC storms, other protocols) in a loop, as fast as it can, toward
droce-endpoint, for a bounded time. A legitimate flow (WRITEs of 0 to 4096
bytes, a FETCH_ADD, a COMPARE_SWAP, READs of what it wrote) is woven
through the file in PSN order: its first pass carries it, every later pass resends it as
duplicates the responder must acknowledge without executing them again,
and a frame of it lost in the memif ring comes back on the next pass, as a
go-back-N retransmission would.

After the run:
  - the generator's frames into memif = the frames droce-endpoint's port
    received = the endpoint's rx_frames plus chained mbufs dropped
    (rx_mbufs = rx_frames + rx_multiseg_dropped);
  - every received frame has one named fate (rx_frames_accounted in
    endpoint/counters.h; rx_malformed the sum of the rx_error_*), and every
    packet handed to a QP one too (rx_packets_accounted in
    transport/counters.h);
  - the legitimate QP is in RTS with every PSN taken, its region byte for
    byte what the flow wrote (each atomic executed once), and (runs up to
    120 s, where testpmd keeps the answers) every READ response and
    atomic ACK of it right;
  - the guard regions on both sides, VAs adjacent to the attacked regions,
    and the read-only region are untouched (region dumps at exit);
  - the endpoint's RSS did not grow after the first quarter of the run;
  - every pool is full at exit, and droce-endpoint exits 0.

Figures (frames per second, frames by fate, RSS, mbufs) are printed and
written to --report. Needs dpdk-testpmd (the dpdk package): exits 77
(skip) without it.

    hostile_test.py DROCE_ENDPOINT [--seconds S] [--report FILE] [--keep]

HOSTILE_KINDS=pfc,psn_storm (names of hostile_frames.build's kinds) keeps
only those kinds besides the legitimate flow, to narrow a failure down.
"""

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import threading
import time

from e2e_common import check, workdir

import hostile_frames as hf

EP_FATES = ["rx_delivered", "rx_malformed", "rx_unknown_qpn", "rx_not_roce",
            "rx_mac_control_other", "rx_pfc_frames", "rx_int_bad",
            "arp_requests_in", "arp_replies_in", "arp_other", "arp_bad", "nd_solicits_in",
            "nd_adverts_in", "nd_other", "nd_bad", "icmp_echo_in", "icmp_ping_replies_in",
            "icmp_other", "icmp_bad", "wrong_vlan"]
QP_FATES = ["rx_dropped_bad_state", "rx_dropped_bad_address", "rx_dropped_bad_pkey",
            "rx_dropped_wrong_transport", "cnps_received", "rx_request_packets",
            "rx_response_packets"]


TELEMETRY = "/usr/bin/dpdk-telemetry.py"


class Reader(threading.Thread):
    """Collects a process's output as it comes (a full pipe would stop it),
    prompts without a newline included."""

    def __init__(self, stream):
        super().__init__(daemon=True)
        self.fd, self.chunks = stream.fileno(), []

    def run(self):
        while True:
            b = os.read(self.fd, 65536)
            if not b:
                return
            self.chunks.append(b.decode(errors="replace"))

    def text(self):
        return "".join(self.chunks)

    def lines(self):
        return self.text().splitlines()


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def telemetry(prefix, command):
    """One answer of droce-endpoint's telemetry socket, {} if none."""
    if not os.path.exists(TELEMETRY):
        return {}
    r = subprocess.run(["/usr/bin/python3", TELEMETRY, "-f", prefix], input=command + "\n",
                       capture_output=True, text=True, timeout=20)
    for line in r.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line).get(command.split(",")[0], {})
    return {}


def wait_for(pred, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return False


def testpmd_port_stats(text, port):
    """(TX-packets, TX-dropped) of `port` in testpmd's forward statistics."""
    m = re.search(r"Forward statistics for port %d\s.*?\n.*?\n\s*TX-packets:\s*(\d+)\s+"
                  r"TX-dropped:\s*(\d+)" % port, text, re.S)
    return (int(m.group(1)), int(m.group(2))) if m else (None, None)


def pcap_frames(path):
    """The frames of a pcap file (microsecond or nanosecond), one at a time."""
    with open(path, "rb") as f:
        head = f.read(24)
        check(struct.unpack("<I", head[:4])[0] in (0xA1B2C3D4, 0xA1B23C4D), f"{path}: not a pcap")
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                return
            caplen = struct.unpack("<IIII", rec)[2]
            yield f.read(caplen)


def check_answers(path, flow):
    """Every READ response and atomic ACK of the legitimate QP testpmd got
    back carries the flow's bytes (READs: the final image, IBA 9.7.5.1.2
    re-executes duplicates; atomics: original 0, duplicates answered from
    the cache, IBA 9.4.5), and every READ and atomic was answered whole at
    least once. Returns how many answers were checked."""
    expect = {}  # PSN -> payload of the response packet at that PSN
    for first, off, n in flow["reads"]:
        for k in range(max(1, -(-n // hf.MTU))):
            expect[first + k] = flow["image"][off + k * hf.MTU:off + min((k + 1) * hf.MTU, n)]
    seen, checked = set(), 0
    src = hf.LEGIT_EP_IP
    for f in pcap_frames(path):
        # Untagged IPv4 (the QP's path), UDP 4791 from the legitimate QP.
        if len(f) < 14 + 20 + 8 + 12 + 4 or f[12:14] != b"\x08\x00" or f[26:30] != src:
            continue
        b = 14 + (f[14] & 0x0F) * 4 + 8
        opcode, pad = f[b], (f[b + 1] >> 4) & 3
        psn = struct.unpack(">I", f[b + 8:b + 12])[0] & 0xFFFFFF
        if opcode in (0x0D, 0x0F, 0x10):    # READ response FIRST, LAST, ONLY: AETH
            payload = f[b + 16:len(f) - 4 - pad]
        elif opcode == 0x0E:                # MIDDLE
            payload = f[b + 12:len(f) - 4 - pad]
        elif opcode == 0x12:                # atomic ACK: AETH, AtomicAckETH
            check(psn in flow["atomics"], f"atomic ACK at PSN {psn}")
            original = struct.unpack(">Q", f[b + 16:b + 24])[0]
            check(original == 0, f"atomic ACK at PSN {psn}: original {original:#x}, want 0")
            seen.add(psn)
            checked += 1
            continue
        else:
            continue
        check(psn in expect, f"READ response at PSN {psn}, no READ there")
        check(payload == expect[psn], f"READ response at PSN {psn}: {len(payload)} bytes differ "
                                      f"from the {len(expect[psn])} written")
        seen.add(psn)
        checked += 1
    missing = sorted((set(expect) | set(flow["atomics"])) - seen)
    check(not missing, f"no answer at PSNs {missing}")
    return checked


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("endpoint")
    ap.add_argument("--seconds", type=float, default=30.0, help="length of the run")
    ap.add_argument("--report", help="write the figures as JSON here")
    ap.add_argument("--keep", action="store_true", help="keep the working directory")
    args = ap.parse_args()
    if args.seconds < 4:
        sys.exit("error: --seconds: at least 4")
    testpmd = shutil.which("dpdk-testpmd")
    if not testpmd:
        print("dpdk-testpmd not found: skipped")
        sys.exit(77)

    d = workdir()
    pcap = os.path.join(d, "hostile.pcap")
    frames, flow, kinds = hf.build(os.path.join(hf.HERE, "..", "fuzz", "corpus", "parse"))
    legit, image = flow["frames"], flow["image"]
    # The endpoint's answers, as testpmd forwards them back to its pcap
    # port: kept for the legitimate flow's READ responses and atomic ACKs
    # in runs up to two minutes (about 5 MB a second), else discarded.
    answers = os.path.join(d, "answers.pcap") if args.seconds <= 120 else "/dev/null"
    hf.write_pcap(pcap, frames)
    cfg = os.path.join(d, "ep.toml")
    with open(cfg, "w") as f:
        f.write(hf.config(d))
    sock = os.path.join(d, "memif.sock")
    js = os.path.join(d, "stats.json")
    pid_tag = os.getpid()
    # Two cores: droce-endpoint's worker on CPU 1, the generator's
    # forwarding lcore on CPU 0; both main lcores mostly sleep (the
    # endpoint's control loop every 5 ms, testpmd's prompt on its stdin).
    ep_prefix = f"droce_e2e_hostile_ep{pid_tag}"
    ep_cmd = [args.endpoint, "--no-huge", "-m", "512", "--no-pci",
              "--file-prefix", ep_prefix, "--lcores", "0@0,1@1",
              "--log-level", "lib.eal:warning",
              f"--vdev=net_memif0,role=server,socket={sock},socket-abstract=no,"
              "mac=02:00:00:00:00:01,bsize=10240",
              "--", "--config", cfg, "--json", js, "--stats-interval", "1",
              "--idle-sleep-us", "20", "--port-rate", "40"]
    # testpmd writes its statistics through stdio, fully buffered on a pipe.
    unbuffered = ["stdbuf", "-o0"] if shutil.which("stdbuf") else []
    tp_cmd = unbuffered + [testpmd, "--no-huge", "-m", "512", "--no-pci",
              "--file-prefix", f"droce_e2e_hostile_gen{pid_tag}", "--lcores", "0@1,1@0",
              "--log-level", "lib.eal:warning",
              f"--vdev=net_pcap0,rx_pcap={pcap},infinite_rx=1,tx_pcap={answers}",
              f"--vdev=net_memif0,role=client,socket={sock},socket-abstract=no,"
              "mac=02:00:00:00:00:02,bsize=10240",
              "--", "-i", "--forward-mode=io", "--nb-cores=1", "--mbuf-size=9800",
              f"--total-num-mbufs={len(frames) + 8192}",
              "--no-lsc-interrupt"]
    ep = subprocess.Popen(ep_cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ep_out = Reader(ep.stdout)
    ep_out.start()
    tp = None
    try:
        check(wait_for(lambda: os.path.exists(sock) or ep.poll() is not None, 30) and
              ep.poll() is None, f"droce-endpoint did not start: {ep_out.text()[-2000:]}")
        tp = subprocess.Popen(tp_cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
        tp_out = Reader(tp.stdout)
        tp_out.start()
        check(wait_for(lambda: "testpmd>" in tp_out.text() or tp.poll() is not None, 60) and
              tp.poll() is None, f"dpdk-testpmd did not start: {tp_out.text()[-2000:]}")
        # The memif link comes up once the client has connected.
        time.sleep(1.0)
        tp.stdin.write("start\n")
        tp.stdin.flush()
        t0 = time.time()
        lines_at_start = len(ep_out.lines())
        rss = []  # (seconds since start, KiB)
        while time.time() - t0 < args.seconds:
            check(ep.poll() is None, f"droce-endpoint exited: {ep_out.text()[-3000:]}")
            r = rss_kib(ep.pid)
            if r is not None:
                rss.append((time.time() - t0, r))
            time.sleep(0.5)
        lines_at_stop = len(ep_out.lines())
        tp.stdin.write("stop\n")
        tp.stdin.flush()
        check(wait_for(lambda: "Accumulated forward statistics" in tp_out.text(), 30),
              f"dpdk-testpmd did not stop: {tp_out.text()[-2000:]}")
        gen_seconds = time.time() - t0
        # What is still in the memif ring is read by the endpoint now.
        time.sleep(1.5)
        # The port's own statistics, while it is open (the final snapshot
        # is taken after the ports closed).
        live = telemetry(ep_prefix, "/droce/port,0")
        ep.send_signal(signal.SIGINT)
        rc = ep.wait(timeout=60)
        ep_out.join(timeout=10)
        tp.stdin.write("quit\n")
        tp.stdin.flush()
        tp.wait(timeout=60)
        tp_out.join(timeout=10)
    finally:
        for p in (tp, ep):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
    out = ep_out.text()
    for name, r in (("endpoint.out", ep_out), ("testpmd.out", tp_out)):
        with open(os.path.join(d, name), "w") as f:
            f.write(r.text())
    tail = out[-4000:]
    check(rc == 0, f"droce-endpoint exit {rc}: {tail}")
    check("mbufs: all pools full at shutdown" in out, "pools full at exit")
    with open(js) as f:
        stats = json.load(f)
    port = stats["ports"][0]
    check(port["mempool_avail"] == port["mempool_size"],
          f"pool {port['mempool_avail']} of {port['mempool_size']} at exit")
    epc, pc = port["endpoint"], port["port"]

    # 1. Frames in = frames received, and each one has a fate.
    gen_tx, gen_dropped = testpmd_port_stats(tp_out.text(), 1)
    check(gen_tx is not None, f"testpmd statistics: {tp_out.text()[-2000:]}")
    check(pc["rx_mbufs"] == gen_tx,
          f"generator sent {gen_tx} into memif, the port received {pc['rx_mbufs']}")
    check(pc["rx_mbufs"] == epc["rx_frames"] + pc["rx_multiseg_dropped"],
          f"rx_mbufs {pc['rx_mbufs']} = rx_frames {epc['rx_frames']} + "
          f"rx_multiseg_dropped {pc['rx_multiseg_dropped']}")
    fates = {k: epc[k] for k in EP_FATES if epc[k]}
    check(sum(fates.values()) == epc["rx_frames"],
          f"rx_frames {epc['rx_frames']} != sum of fates {sum(fates.values())}: {fates}")
    errors = {k: v for k, v in epc.items() if k.startswith("rx_error_") and v}
    check(sum(errors.values()) == epc["rx_malformed"], f"rx_malformed vs {errors}")
    qps = {q["qpn"]: q for q in stats["qps"]}
    qp_fates = {k: sum(q["counters"][k] for q in qps.values()) for k in QP_FATES}
    check(sum(qp_fates.values()) == epc["rx_delivered"],
          f"rx_delivered {epc['rx_delivered']} != sum over QPs {qp_fates}")

    # 2. The legitimate flow: complete, byte for byte, atomics once.
    lq = qps[hf.LEGIT_QPN]
    check(lq["state"] == "RTS", f"legitimate QP state {lq['state']}")
    check(lq["expected_psn"] == flow["psns"],
          f"legitimate QP expects PSN {lq['expected_psn']}, the flow ends at {flow['psns']}")
    check(lq["counters"]["naks_invalid_request_sent"] == 0 and
          lq["counters"]["naks_remote_access_sent"] == 0, "no fatal NAK on the legitimate QP")
    with open(os.path.join(d, "legit.bin"), "rb") as f:
        got = f.read()
    diff = [i for i in range(len(image)) if got[i] != image[i]]
    check(not diff, f"legitimate region differs at {len(diff)} bytes, first at {diff[:4]}")

    # The PSN storm's QPs take only valid requests: still in RTS, answering
    # duplicates and gaps all run long.
    for qpn in (hf.V_PSN, hf.V_SR):
        c = qps[qpn]["counters"]
        check(qps[qpn]["state"] == "RTS" and c["rx_duplicate_packets"] > 0 and
              c["rx_out_of_sequence"] > 0, f"storm QP {qpn:#x}: {qps[qpn]['state']}")

    answered = None
    if answers != "/dev/null":
        answered = check_answers(answers, flow)

    # 3. Nothing outside the attacked regions changed.
    for r in (hf.GUARD_LO, hf.READ_ONLY, hf.GUARD_HI):
        with open(os.path.join(d, hf.NAMES[r] + ".bin"), "rb") as f:
            data = f.read()
        check(data == bytes([hf.FILL[r]]) * hf.REGION, f"{hf.NAMES[r]} region changed")

    # 4. RSS flat after the first quarter.
    warm = [k for t, k in rss if t >= args.seconds / 4]
    check(len(warm) >= 4, f"RSS samples {rss}")
    growth = max(warm) - warm[0]
    check(growth <= 2048, f"RSS grew by {growth} KiB after warm-up: {warm}")

    # 5. Frames per second held: the live rates, one a second.
    rates = []
    for line in ep_out.lines()[lines_at_start:lines_at_stop]:
        m = re.match(r"port 0 \S+\s+rx\s+(\d+) pps\s+([\d.]+) Gb/s\s+tx\s+(\d+) pps", line)
        if m:
            rates.append((int(m.group(1)), float(m.group(2)), int(m.group(3))))
    full = rates[1:]  # not the second the generator started in
    check(full and min(r[0] for r in full) > 0, f"a second without frames: {rates}")

    malicious = {k: v for k, v in sorted(qp_fates.items()) if v}
    qp_detail = {}
    for q in qps.values():
        c = q["counters"]
        qp_detail[f"{q['qpn']:#x}"] = {
            "state": q["state"],
            **{k: v for k, v in c.items() if v and (k.startswith("rx_") or k.startswith("naks_") or
                                                   k in ("acks_sent", "read_response_packets_sent",
                                                         "atomic_acks_sent", "cnps_received",
                                                         "recv_completions"))}}
    report = {
        "seconds": round(gen_seconds, 1),
        "file_frames": len(frames),
        "file_kinds": kinds,
        "generator_tx": gen_tx,
        "generator_tx_dropped_ring_full": gen_dropped,
        "received": pc["rx_mbufs"],
        "received_per_second": round(pc["rx_mbufs"] / gen_seconds),
        "port_eth_before_exit": {k: v for k, v in live.items() if k.startswith("eth_")},
        "live_rx_pps": {"min": min(r[0] for r in full), "median": int(statistics.median(
            r[0] for r in full)), "max": max(r[0] for r in full)},
        "live_rx_gbps_median": statistics.median(r[1] for r in full),
        "live_tx_pps_median": int(statistics.median(r[2] for r in full)),
        "rx_multiseg_dropped": pc["rx_multiseg_dropped"],
        "endpoint_fates": fates,
        "parse_errors": errors,
        "qp_fates": malicious,
        "tx_frames": pc["tx_frames"], "tx_held": pc["tx_held"],
        "tx_pfc_held": epc["tx_pfc_held"],
        "rss_kib": {"first": rss[0][1], "after_warm_up": warm[0], "max": max(k for _, k in rss),
                    "last": rss[-1][1], "growth_after_warm_up": growth},
        "mempool": {"size": port["mempool_size"], "avail_at_exit": port["mempool_avail"]},
        "legit": {"packets": len(legit), "psns": flow["psns"], "bytes_checked": len(image),
                  "answers_checked": answered},
        "qps": qp_detail,
    }
    text = json.dumps(report, indent=1)
    print(text)
    if args.report:
        with open(args.report, "w") as f:
            f.write(text + "\n")
    if not args.keep:
        shutil.rmtree(d, ignore_errors=True)
    else:
        print("kept", d)
    print("hostile: OK")


if __name__ == "__main__":
    main()
