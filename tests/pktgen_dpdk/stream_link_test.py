"""A stream sender waits for its link before its clock starts: started a
second before its memif peer, it still delivers every probe with no stale
latency (frames refused while the link was down would leave later with
their old stamps, as seconds of latency), and with no peer at all it gives
up naming --tx-port.

usage: stream_link_test.py DROCE_PKTGEN_DPDK"""
import json
import os
import subprocess
import sys
import tempfile
import time

from common import eal

exe = sys.argv[1]
tmp = tempfile.mkdtemp(prefix="pg-link-")
sock = os.path.join(tmp, "link.sock")
out = os.path.join(tmp, "rx.json")
N = 2000

# The sender is the memif server, so it starts (and makes the socket)
# first; the receiver connects a second later.
tx = subprocess.Popen([exe, "--mode", "stream",
                       *eal("pglink-tx", 1, f"net_memif0,role=server,socket={sock},socket-abstract=no"),
                       "--", "--tx-port", "0", "--duration", "3",
                       "--stream", f"id=1,payload=64,rate=10kpps,count={N}"],
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
deadline = time.time() + 20
while not os.path.exists(sock) and tx.poll() is None and time.time() < deadline:
    time.sleep(0.05)
time.sleep(1)
rx = subprocess.run([exe, "--mode", "stream",
                     *eal("pglink-rx", 0, f"net_memif0,role=client,socket={sock},socket-abstract=no"),
                     "--", "--rx-port", "0", "--duration", "2", "--drain", "0.5", "--json", out],
                    capture_output=True, text=True, timeout=60)
tx_out, tx_err = tx.communicate(timeout=60)
print(tx_out, tx_err, rx.stdout, rx.stderr)
assert tx.returncode == 0 and rx.returncode == 0, (tx.returncode, rx.returncode)
row = json.load(open(out))["streams"][0]
assert row["rx_packets"] == N and row["lost"] == 0, row
# A probe's one-way latency over memif is microseconds; one refused while
# the link was down and kept would show the second the receiver took.
assert row["lat_max_ns"] < 100_000_000, row
print(f"all {N} probes, max latency {row['lat_max_ns'] / 1e3:.1f} us")

# No peer: the sender gives up after its link timeout, naming the option.
t0 = time.time()
lonely = subprocess.run([exe, "--mode", "stream",
                         *eal("pglink-alone", 1,
                              f"net_memif0,role=server,socket={sock}.alone,socket-abstract=no"),
                         "--", "--tx-port", "0", "--stream", "id=1,rate=1kpps,count=10"],
                        capture_output=True, text=True, timeout=60)
print(lonely.stderr)
assert lonely.returncode != 0, lonely.returncode
assert "--tx-port" in lonely.stderr and "did not come up" in lonely.stderr, lonely.stderr
print(f"no peer: refused after {time.time() - t0:.1f} s")
print("PASS")
