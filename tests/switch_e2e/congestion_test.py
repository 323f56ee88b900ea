"""droce-switch as a real-time congestion point: two droce-perf write_bw
clients (DCQCN) send through droce-switch over net_memif to one droce-perf
server (--clients 2) whose switch port's configured rate is half the
clients' rate. Both clients' traffic converges on the server's port, where
the queue builds. The switch's capture (decoded with droce-decode --json)
must show CE-marked data packets toward the server and CNPs (opcode 0x81)
back toward both clients, the switch's counters must agree with the
capture, and both clients' data must arrive byte-exact (--check).

Four DPDK processes share the machine's cores: each has its own
--file-prefix and sleeps when idle."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SWITCH, PERF, DECODE = sys.argv[1:4]
EAL = ["--no-huge", "-m", "256", "--no-pci", "--log-level=lib.eal:warning"]
failed = 0


def ok(cond, what):
    global failed
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failed += 1
    return cond


def free_tcp_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def memif(name, role, sock):
    return f"--vdev={name},role={role},socket={sock},socket-abstract=no"


tmp = tempfile.mkdtemp(prefix="droce_switch_e2e_")
socks = [os.path.join(tmp, f"s{i}.sock") for i in range(3)]
cap = os.path.join(tmp, "switch.pcap")
js = os.path.join(tmp, "switch.json")
tag = str(os.getpid())
SERVER_IP = "192.168.77.1"
CLIENT_IPS = ["192.168.77.2", "192.168.77.3"]
N = 400

# Switch port 0: the server (192.168.77.1) behind a 500 Mb/s link; ports 1
# and 2: the clients (.2 and .3) at 1 Gb/s. Small RED thresholds.
sw_cmd = [SWITCH, "-l", "0", *EAL, "--file-prefix", "swe2e_sw" + tag,
          *(memif(f"net_memif{i}", "server", s) for i, s in enumerate(socks)),
          "--",
          "--port", "net_memif0@500M", "--port", "net_memif1@1G", "--port", "net_memif2@1G",
          "--route", f"{SERVER_IP}=0", "--route", f"{CLIENT_IPS[0]}=1",
          "--route", f"{CLIENT_IPS[1]}=2",
          "--kmin", "8KiB", "--kmax", "64KiB", "--pmax", "0.5", "--buffer", "16MiB",
          "--capture", cap, "--json", js, "--idle-sleep-us", "20", "--duration", "150"]
sw = subprocess.Popen(sw_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
procs = [sw]
deadline = time.time() + 30
while not all(os.path.exists(s) for s in socks) and sw.poll() is None \
        and time.time() < deadline:
    time.sleep(0.05)

port = free_tcp_port()
common = ["--test", "write_bw", "-s", "65536", "-n", str(N), "-t", "32", "--timeout", "60",
          "--idle-sleep-us", "20", "--check", "-p", str(port)]
s_cmd = [PERF, "-l", "1", *EAL, "--file-prefix", f"swe2e_srv_{tag}",
         memif("net_memif0", "client", socks[0]), "--", *common,
         "--server", "--clients", "2", "--ip", SERVER_IP]
srv = subprocess.Popen(s_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
procs.append(srv)
clis = []
for i, cli_ip in enumerate(CLIENT_IPS):
    c_cmd = [PERF, "-l", str(i), *EAL, "--file-prefix", f"swe2e_cli{i}_{tag}",
             memif("net_memif0", "client", socks[1 + i]), "--", *common,
             "--connect", "127.0.0.1", "--ip", cli_ip, "--cc", "dcqcn", "--rate-gbps", "1",
             # 1.07 s before a retransmission, not 67 ms: four processes share
             # two CPUs here, the switch with client 0. While the scheduler
             # holds the switch off its CPU, the clients' memif rings fill and
             # their frames are dropped at TX; with 67 ms, eight timeouts in a
             # row (a retransmission storm into a full ring) once ended a run
             # in "retry counter exceeded" (about 1 run in 20).
             "-u", "18"]
    clis.append(subprocess.Popen(c_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True))
procs += clis

outs = []  # (name, rc, stdout, stderr): the clients, then the server
try:
    deadline = time.time() + 150
    for name, p in [("client 0", clis[0]), ("client 1", clis[1]), ("server", srv)]:
        out, err = p.communicate(timeout=max(1, deadline - time.time()))
        outs.append((name, p.returncode, out, err))
except subprocess.TimeoutExpired:
    ok(False, "droce-perf server and clients finished within 150 s")
finally:
    if sw.poll() is None:
        sw.send_signal(signal.SIGINT)
    try:
        sw_out, sw_err = sw.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        sw.kill()
        sw_out, sw_err = sw.communicate()
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()

for name, rc, out, err in outs:
    ok(rc == 0, f"{name} exit 0 (got {rc})")
    ok("Data check: PASS" in out, f"{name}: byte-exact data check passed")
    if rc:
        print(out[-3000:], err[-3000:])
    if name.startswith("client"):
        m = re.search(r"^\s*65536\s+(\d+)\s+([\d.]+)\s+([\d.]+)", out, re.M)
        if ok(m is not None and int(m.group(1)) == N, f"{name}: {N} messages completed"):
            print(f"     {name}: {m.group(2)} MB/s peak, {m.group(3)} MB/s average")
    else:
        # One row per client (its own measurement) and the aggregate.
        per = re.findall(r"^\s*65536\s+(\d+)\s+[\d.]+\s+([\d.]+)\s+[\d.]+\s+client \d (\S+)",
                         out, re.M)
        agg = re.search(r"^\s*65536\s+(\d+)\s+[\d.]+\s+([\d.]+)\s+[\d.]+\s+all 2 clients",
                        out, re.M)
        ok(sorted(ip for _, _, ip in per) == CLIENT_IPS and all(int(n) == N for n, _, _ in per),
           f"server: a row per client, {N} messages each ({per})")
        if ok(agg is not None and int(agg.group(1)) == 2 * N,
              f"server: aggregate row of {2 * N} messages"):
            print(f"     server: {agg.group(2)} MB/s aggregate average")
ok(sw.returncode == 0, f"droce-switch exit 0 after SIGINT (got {sw.returncode})")
print(sw_out[-6000:])
if sw.returncode != 0:
    print(sw_err[-3000:])

# The capture: every frame the switch sent.
ce_data = {SERVER_IP: 0}
data = {SERVER_IP: 0}
cnps = {ip: 0 for ip in CLIENT_IPS}
ce_from = {ip: 0 for ip in CLIENT_IPS}  # CE-marked data toward the server, by sender
bad_icrc = 0
if ok(os.path.exists(cap), "capture written"):
    dec = subprocess.run([DECODE, "--json", cap], capture_output=True, text=True, timeout=120)
    ok(dec.returncode == 0, f"droce-decode exit 0 (got {dec.returncode})")
    for line in dec.stdout.splitlines():
        j = json.loads(line)
        if not j.get("roce"):
            continue
        if j.get("icrc_ok") is False:
            bad_icrc += 1
        op = j.get("opcode")
        dst = j.get("dst_ip")
        if dst in data and op in (6, 7, 8, 10, 11):  # RC RDMA WRITE first/middle/last/only(+imm)
            data[dst] += 1
            if j.get("ecn") == 3:
                ce_data[dst] += 1
                if j.get("src_ip") in ce_from:
                    ce_from[j["src_ip"]] += 1
        if dst in cnps and op == 0x81:
            cnps[dst] += 1
print(f"     capture: data {data}, CE-marked {ce_data} (by sender {ce_from}), CNPs {cnps}, "
      f"bad ICRC {bad_icrc}")
ok(sum(ce_data.values()) > 0, f"CE-marked data packets toward the server: {sum(ce_data.values())}")
ok(all(v > 0 for v in ce_from.values()),
   f"both clients' data CE-marked at the shared port: {ce_from}")
ok(all(v > 0 for v in cnps.values()), f"CNPs toward both clients: {cnps}")
ok(bad_icrc == 0, "every RoCEv2 frame forwarded (marked ones included) has a good ICRC")

if ok(os.path.exists(js), "--json counters written"):
    with open(js) as f:
        counters = json.load(f)
    p0 = counters["ports"][0]
    ok(p0["ecn_marked"] == sum(ce_data.values()),
       f"switch port 0 ecn_marked ({p0['ecn_marked']}) == CE data packets in the capture "
       f"({sum(ce_data.values())})")
    ok(p0["queue_max_bytes"] > 8 * 1024,
       f"port 0 queue high-water {p0['queue_max_bytes']} B above Kmin (congestion was real)")
    ok(p0["drops"] == 0, f"no tail drops at port 0 ({p0['drops']})")
    ok(counters["captured"] > 0, f"captured {counters['captured']} frames")

if failed == 0:
    shutil.rmtree(tmp, ignore_errors=True)
else:
    print(f"     kept {tmp}")
print(f"{failed} failure(s)")
sys.exit(1 if failed else 0)
