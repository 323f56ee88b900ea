"""4-rank ring all-reduce over net_memif: four droce-pktgen-dpdk processes
(--mode dpdk), rank r's net_memif0 is the server end of link r (to r+1),
its net_memif1 the client end of link r-1. Two sizes, verified (#wrong 0).

usage: ring_allreduce_test.py DROCE_PKTGEN_DPDK"""
import os
import random
import subprocess
import sys
import tempfile

from common import eal

exe = sys.argv[1]
d = tempfile.mkdtemp(prefix="pg-ring-")
N = 4
port = 20000 + random.randrange(20000)
procs = []
for r in range(N):
    p = (r + N - 1) % N
    cmd = [exe, "--mode", "dpdk",
           *eal(f"pgring{r}", r % 2,
                f"net_memif0,role=server,id=0,socket={d}/link{r}.sock,socket-abstract=no",
                f"net_memif1,role=client,id=0,socket={d}/link{p}.sock,socket-abstract=no"),
           "--", "--pattern", "ring", "--ranks", str(N), "--rank", str(r),
           "-b", "65536", "-e", "262144", "-f", "4", "-n", "3", "-w", "1", "--chunk", "16384",
           "--oob-port", str(port), "--timeout", "60"]
    procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
outs = []
for r, pr in enumerate(procs):
    try:
        o, _ = pr.communicate(timeout=150)
    except subprocess.TimeoutExpired:
        for q in procs:
            q.kill()
        raise
    outs.append(o)
    print(f"== rank {r} rc={pr.returncode}\n{o}")
assert all(pr.returncode == 0 for pr in procs), [pr.returncode for pr in procs]
rows = [l.split() for l in outs[0].splitlines() if l.strip() and not l.startswith("#")]
table = [r for r in rows if len(r) == 9 and r[2] == "float"]
assert [int(r[0]) for r in table] == [65536, 262144], table
assert all(r[8] == "0" for r in table), table
print("PASS")
