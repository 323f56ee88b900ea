"""Rate control: a stream at 200 kpps on net_null for 1 s sends 200 kpps
within 10 %, another at 50 Mbit/s (layer 1) too, from one lcore. And a
stream starts at its rate, not with a burst: 1000 pps for 20 ms sends
about 20 frames, where a bucket that started full would send its burst of
32 first.

usage: rate_test.py DROCE_PKTGEN_DPDK"""
import json
import sys
import tempfile

from common import eal, run

exe = sys.argv[1]
out = tempfile.mktemp(suffix=".json", prefix="pg-rate-")
cmd = [exe, "--mode", "stream", *eal("pgrate", 0, "net_null0"), "--",
       "--tx-port", "net_null0", "--duration", "1", "--bucket-us", "50000", "--json", out,
       "--stream", "id=1,payload=64,rate=200kpps,probe=0",
       "--stream", "id=2,payload=1024,rate=50Mbps"]
rc, so, se = run(cmd, 60)
print(so, se)
assert rc == 0, rc
res = {s["stream"]: s for s in json.load(open(out))["streams"]}
for sid, s in res.items():
    got = s["mpps"] * 1e6
    want = s["configured_pps"]
    ratio = got / want
    print(f"stream {sid}: configured {want:.0f} pps, sent {got:.0f} pps ({ratio:.3f})")
    assert 0.9 <= ratio <= 1.1, (sid, got, want)

start = tempfile.mktemp(suffix=".json", prefix="pg-rate-start-")
rc, so, se = run([exe, "--mode", "stream", *eal("pgrates", 0, "net_null0"), "--",
                  "--tx-port", "net_null0", "--duration", "0.02", "--json", start,
                  "--stream", "id=1,payload=64,rate=1000pps"], 60)
assert rc == 0, (rc, se)
sent = json.load(open(start))["streams"][0]["tx_packets"]
print(f"1000 pps for 20 ms: {sent} frames sent")
assert 19 <= sent <= 23, sent
print("PASS")
