"""4-rank ring all-reduce over net_memif: four droce-pktgen-dpdk processes
(--mode dpdk), rank r's net_memif0 is the server end of link r (to r+1),
its net_memif1 the client end of link r-1. Two sizes, verified (#wrong 0):
with the default go-back-N and fixed ports, and with every QP under
--recovery sr --entropy spray --entropy-paths 8 (docs/MULTIPATH.md "In
real time"). Then one rank with another --recovery than the others: every
rank stops, naming --recovery.

usage: ring_allreduce_test.py DROCE_PKTGEN_DPDK"""
import os
import random
import subprocess
import sys
import tempfile

from common import eal

exe = sys.argv[1]
N = 4
SPRAY = ["--recovery", "sr", "--entropy", "spray", "--entropy-paths", "8"]


def ring(tag, args_of_rank):
    """Runs the N ranks; returns their (rc, output)."""
    d = tempfile.mkdtemp(prefix=f"pg-ring-{tag}-")
    port = 20000 + random.randrange(20000)
    procs = []
    for r in range(N):
        p = (r + N - 1) % N
        cmd = [exe, "--mode", "dpdk",
               *eal(f"pgring{tag}{r}", r % 2,
                    f"net_memif0,role=server,id=0,socket={d}/link{r}.sock,socket-abstract=no",
                    f"net_memif1,role=client,id=0,socket={d}/link{p}.sock,socket-abstract=no"),
               "--", "--pattern", "ring", "--ranks", str(N), "--rank", str(r),
               "-b", "65536", "-e", "262144", "-f", "4", "-n", "3", "-w", "1",
               "--chunk", "16384", "--oob-port", str(port), "--timeout", "60",
               *args_of_rank(r)]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))
    outs = []
    for r, pr in enumerate(procs):
        try:
            o, _ = pr.communicate(timeout=150)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        outs.append((pr.returncode, o))
        print(f"== {tag} rank {r} rc={pr.returncode}\n{o}")
    return outs


for tag, extra in [("gbn", []), ("spray", SPRAY)]:
    outs = ring(tag, lambda r: extra)
    assert all(rc == 0 for rc, _ in outs), (tag, [rc for rc, _ in outs])
    rows = [l.split() for l in outs[0][1].splitlines() if l.strip() and not l.startswith("#")]
    table = [r for r in rows if len(r) == 9 and r[2] == "float"]
    assert [int(r[0]) for r in table] == [65536, 262144], (tag, table)
    assert all(r[8] == "0" for r in table), (tag, table)

# Rank 3 recovers by go-back-N, the others by selective repeat.
outs = ring("mixed", lambda r: ["--recovery", "gbn" if r == 3 else "sr"])
assert all(rc != 0 for rc, _ in outs), [rc for rc, _ in outs]
assert all("--recovery" in o for _, o in outs), "every rank names --recovery"
print("PASS")
