"""Probe counters under sender-made impairments match exactly: one stream
drops every 10th sequence number, one duplicates every 10th, one swaps
every 10th pair; received on the same net_ring port (a loopback ring).

usage: stream_impair_test.py DROCE_PKTGEN_DPDK"""
import json
import sys
import tempfile

from common import eal, run

exe = sys.argv[1]
out = tempfile.mktemp(suffix=".json", prefix="pg-impair-")
N = 2000
streams = [f"id=1,count={N},payload=64,rate=200kpps,drop-every=10",
           f"id=2,count={N},payload=64,rate=200kpps,dup-every=10",
           f"id=3,count={N},payload=64,rate=200kpps,reorder-every=10,ipv6=1,vlan=7,pcp=3",
           f"id=4,count={N},payload=128,rate=200kpps,drop-every=7,dup-every=5,opcode=RC_RDMA_WRITE_ONLY,qpn-mode=inc,qpn-count=16,ip-mode=random,ip-count=100"]
cmd = [exe, "--mode", "stream", *eal("pgimp", 0, "net_ring0"), "--",
       "--tx-port", "net_ring0", "--rx-port", "net_ring0", "--duration", "10",
       "--bucket-us", "20000", "--json", out]
for s in streams:
    cmd += ["--stream", s]
rc, so, se = run(cmd, 60)
print(so, se)
assert rc == 0, rc
res = {s["stream"]: s for s in json.load(open(out))["streams"]}

# Expected values: the same rules as the sender (docs/PKTGEN.md "DPDK modes").
def expect(drop, dup, reorder):
    seq = []
    n = 0
    def emit(x):
        if drop and (x + 1) % drop == 0:
            return
        seq.append(x)
        if dup and (x + 1) % dup == 0:
            seq.append(x)
    while n < N:
        if reorder and n % reorder == 0 and n + 1 < N:
            emit(n + 1); emit(n); n += 2
        else:
            emit(n); n += 1
    seen, hi, d, o = set(), -1, 0, 0
    for x in seq:
        if x in seen:
            d += 1
            continue
        if x < hi:
            o += 1
        seen.add(x)
        hi = max(hi, x)
    return len(seq), N - len(seen), d, o

for sid, args in [(1, (10, 0, 0)), (2, (0, 10, 0)), (3, (0, 0, 10)), (4, (7, 5, 0))]:
    tx, lost, dup, ooo = expect(*args)
    s = res[sid]
    got = (s["tx_packets"], s["rx_packets"], s["lost"], s["duplicate"], s["out_of_order"])
    want = (tx, tx, lost, dup, ooo)
    assert got == want, f"stream {sid}: got {got} want {want}"
    assert 0 < s["lat_p50_ns"] <= s["lat_p99_ns"] <= s["lat_p999_ns"] <= s["lat_max_ns"], s
    print(f"stream {sid}: tx/rx/lost/dup/ooo {got} as expected")
print("PASS")
