"""droce-pktgen-dpdk's raw stream generator next to dpdk-testpmd txonly, both
on net_null, one data core each, 64 B frames: testpmd's 64-byte txonly
packets, droce's RoCEv2 SEND_ONLY without payload (58-byte frame, 64 B on
the wire with padding and FCS), PSN incrementing, ICRC valid in every
packet. Runs alternate (testpmd, droce, testpmd, droce, ...) so both see
the same machine load; the median of each is compared.
Target: droce >= 0.9x testpmd's packets per second.

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
rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 3
exe = os.path.join(build, "apps/droce-pktgen-dpdk")
EAL = ["--no-huge", "-m", "256", "--no-pci", "--log-level=lib.eal:warning"]
pid = os.getpid()
tmp = tempfile.mkdtemp(prefix="droce-pktgen-bench-")


def testpmd(i):
    # lcore 0 is testpmd's main core, lcore 1 its one forwarding core.
    cmd = ["dpdk-testpmd", "-l", "0,1", *EAL, f"--file-prefix=pgb_tp_{pid}_{i}",
           "--vdev=net_null0", "--", "--port-topology=loop", "--nb-cores=1",
           "--stats-period=1", "--auto-start", "--total-num-mbufs=16384",
           "--forward-mode=txonly", "--txpkts=64"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL)
    time.sleep(seconds + 2)
    p.send_signal(signal.SIGINT)
    try:
        out = p.communicate(timeout=20)[0].decode(errors="replace")
    except subprocess.TimeoutExpired:
        p.kill()
        out = p.communicate()[0].decode(errors="replace")
    samples = [int(x) for x in re.findall(r"Tx-pps:\s+(\d+)", out)]
    samples = [s for s in samples if s > 0][1:]  # the first period is partial
    if not samples:
        raise SystemExit(f"testpmd gave no Tx-pps:\n{out[-2000:]}")
    return statistics.median(samples)


def droce(i):
    out = os.path.join(tmp, f"pg{i}.json")
    # One lcore (the main one) runs the generator loop.
    cmd = [exe, "--mode", "stream", "-l", "1", *EAL, f"--file-prefix=pgb_pg_{pid}_{i}",
           "--vdev=net_null0", "--", "--tx-port", "net_null0", "--duration", str(seconds),
           "--mbufs", "16383", "--json", out,
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
          f"{ours[-1] / 1e6:.2f} Mpps", flush=True)
r, o = statistics.median(ref), statistics.median(ours)
ratio = o / r
print(f"64 B, net_null, one core: testpmd txonly {r / 1e6:.2f} Mpps, droce-pktgen-dpdk "
      f"{o / 1e6:.2f} Mpps, ratio {ratio:.2f}")
print(f"target >= 0.9x testpmd txonly: {ratio:.2f}x -> {'PASS' if ratio >= 0.9 else 'MISS'}")
