"""droce-pktgen-dpdk's raw stream generator next to dpdk-testpmd txonly, both
on net_null, one data core each, 64 B frames: testpmd's 64-byte txonly
packets, droce's RoCEv2 SEND_ONLY without payload (58-byte frame, 64 B on
the wire with padding and FCS), PSN incrementing, ICRC valid in every
packet. Runs alternate (testpmd, droce, testpmd, droce, ...) so both see
the same machine load; the median over rounds of each is compared.
Target: droce >= 0.9x testpmd's packets per second.

Like for like: both send bursts of BURST (32, testpmd's default) from a
pool of MBUFS mbufs with a per-lcore cache of CACHE (256, what droce's pool
uses; testpmd's default would be 250), on the same net_null vdev (no-rx=1)
with the same EAL memory. Each run's rate is a mean over its steady state:
droce's packets over its first-to-last send, testpmd's mean of `seconds`
full one-second Tx-pps periods (its first, partial period dropped), so a
preempted second counts against both alike. What differs is the work per
packet: testpmd copies 42 bytes of identical headers into each 64-byte
frame and leaves the payload as it was; droce writes all 58 bytes, a new
PSN and its ICRC.

usage: /usr/bin/python3 tests/bench/pktgen_bench.py BUILD_DIR [--seconds S] [--rounds N]"""
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
seconds = float(sys.argv[sys.argv.index("--seconds") + 1]) if "--seconds" in sys.argv else 3
rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 5
exe = os.path.join(build, "apps/droce-pktgen-dpdk")
EAL = ["--no-huge", "-m", "256", "--no-pci", "--log-level=lib.eal:warning"]
BURST, MBUFS, CACHE = 32, 16383, 256
pid = os.getpid()
tmp = tempfile.mkdtemp(prefix="droce-pktgen-bench-")


def testpmd(i):
    # lcore 0 is testpmd's main core, lcore 1 its one forwarding core.
    # no-rx=1 (both tools): testpmd drains every RX queue before it starts
    # forwarding, for up to a second on net_null's bottomless RX.
    cmd = ["dpdk-testpmd", "-l", "0,1", *EAL, f"--file-prefix=pgb_tp_{pid}_{i}",
           "--vdev=net_null0,no-rx=1", "--", "--port-topology=loop", "--nb-cores=1",
           "--stats-period=1", "--auto-start", f"--total-num-mbufs={MBUFS}",
           f"--burst={BURST}", f"--mbcache={CACHE}", "--txd=1024",
           "--forward-mode=txonly", "--txpkts=64"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL, text=True, errors="replace")
    # As many full one-second periods as droce sends for, after the first
    # non-zero (partial) one; a slow start on a loaded box only delays them.
    want = max(1, round(seconds))
    samples, seen, out = [], 0, []
    deadline = time.monotonic() + seconds + 60
    for line in p.stdout:
        out.append(line)
        m = re.search(r"Tx-pps:\s+(\d+)", line)
        if m and int(m.group(1)) > 0:
            seen += 1
            if seen > 1:
                samples.append(int(m.group(1)))
        if len(samples) >= want or time.monotonic() > deadline:
            break
    p.send_signal(signal.SIGINT)
    try:
        p.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
    if not samples:
        raise SystemExit("testpmd gave no Tx-pps:\n" + "".join(out)[-2000:])
    return statistics.mean(samples)


def droce(i):
    out = os.path.join(tmp, f"pg{i}.json")
    # One lcore (the main one) runs the generator loop.
    cmd = [exe, "--mode", "stream", "-l", "1", *EAL, f"--file-prefix=pgb_pg_{pid}_{i}",
           "--vdev=net_null0,no-rx=1", "--", "--tx-port", "net_null0", "--duration", str(seconds),
           "--mbufs", str(MBUFS), "--burst", str(BURST), "--json", out,
           "--stream", "opcode=RC_SEND_ONLY,payload=0,probe=0,unlimited=1"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60)
    if p.returncode != 0:
        raise SystemExit(f"droce-pktgen-dpdk failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    s = json.load(open(out))["streams"][0]
    return s["mpps"] * 1e6


ref, ours = [], []
for i in range(rounds):
    ref.append(testpmd(i))
    ours.append(droce(i))
    print(f"round {i}: testpmd txonly {ref[-1] / 1e6:.2f} Mpps, droce-pktgen-dpdk "
          f"{ours[-1] / 1e6:.2f} Mpps (this round {ours[-1] / ref[-1]:.2f}x)", flush=True)
r, o = statistics.median(ref), statistics.median(ours)
ratio = o / r
print(f"64 B, net_null, one core: testpmd txonly {r / 1e6:.2f} Mpps, droce-pktgen-dpdk "
      f"{o / 1e6:.2f} Mpps, ratio {ratio:.2f}")
print(f"target >= 0.9x testpmd txonly: {ratio:.2f}x -> {'PASS' if ratio >= 0.9 else 'MISS'}")
