"""droce-switch as a real-time congestion point: two droce-perf write_bw
clients (DCQCN) send through droce-switch over net_memif into one egress
port whose configured rate is half the clients' rate. The switch's capture
(decoded with droce-decode --json) must show CE-marked data packets toward
the servers and CNPs (opcode 0x81) back toward both clients, and the
switch's counters must agree with the capture.

droce-perf's server takes one client, so each client has its own server
process; both servers sit behind the same switch port (one port fronting
two memif interfaces: an L2 segment behind one congested link), which is
where the queue builds. Five DPDK processes share the machine's cores: each
has its own --file-prefix and sleeps when idle."""

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
socks = [os.path.join(tmp, f"s{i}.sock") for i in range(4)]
cap = os.path.join(tmp, "switch.pcap")
js = os.path.join(tmp, "switch.json")
tag = str(os.getpid())
procs = []

# Switch port 0: both servers (192.168.77.1 and .3) behind one 500 Mb/s link;
# ports 1 and 2: the clients (.2 and .4) at 1 Gb/s. Small RED thresholds.
sw_cmd = [SWITCH, "-l", "0", *EAL, "--file-prefix", "swe2e_sw" + tag,
          memif("net_memif0", "server", socks[0]), memif("net_memif1", "server", socks[1]),
          memif("net_memif2", "server", socks[2]), memif("net_memif3", "server", socks[3]),
          "--",
          "--port", "net_memif0+net_memif1@500M", "--port", "net_memif2@1G",
          "--port", "net_memif3@1G",
          "--route", "192.168.77.1=0", "--route", "192.168.77.3=0",
          "--route", "192.168.77.2=1", "--route", "192.168.77.4=2",
          "--kmin", "8KiB", "--kmax", "64KiB", "--pmax", "0.5", "--buffer", "16MiB",
          "--capture", cap, "--json", js, "--idle-sleep-us", "20", "--duration", "150"]
sw = subprocess.Popen(sw_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
procs.append(sw)
time.sleep(1.5)

common = ["--test", "write_bw", "-s", "65536", "-n", "400", "-t", "32", "--timeout", "60",
          "--idle-sleep-us", "20"]
pairs = []
for i, (srv_ip, cli_ip) in enumerate([("192.168.77.1", "192.168.77.2"),
                                      ("192.168.77.3", "192.168.77.4")]):
    port = free_tcp_port()
    s_cmd = [PERF, "-l", str(1 - i), *EAL, "--file-prefix", f"swe2e_srv{i}_{tag}",
             memif("net_memif0", "client", socks[i]), "--", *common, "-p", str(port),
             "--server", "--ip", srv_ip]
    c_cmd = [PERF, "-l", str(i), *EAL, "--file-prefix", f"swe2e_cli{i}_{tag}",
             memif("net_memif0", "client", socks[2 + i]), "--", *common, "-p", str(port),
             "--connect", "127.0.0.1", "--ip", cli_ip, "--cc", "dcqcn", "--rate-gbps", "1"]
    srv = subprocess.Popen(s_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    procs.append(srv)
    pairs.append([srv, s_cmd, None, c_cmd])
for p in pairs:
    p[2] = subprocess.Popen(p[3], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    procs.append(p[2])

outs = []
try:
    deadline = time.time() + 150
    for srv, s_cmd, cli, c_cmd in pairs:
        c_out, c_err = cli.communicate(timeout=max(1, deadline - time.time()))
        s_out, s_err = srv.communicate(timeout=max(1, deadline - time.time()))
        outs.append((cli.returncode, c_out, c_err, srv.returncode, s_out, s_err))
except subprocess.TimeoutExpired:
    ok(False, "droce-perf pairs finished within 150 s")
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

for i, (crc, c_out, c_err, src, s_out, s_err) in enumerate(outs):
    ok(crc == 0, f"client {i} exit 0 (got {crc})")
    ok(src == 0, f"server {i} exit 0 (got {src})")
    if crc or src:
        print(c_out[-3000:], c_err[-3000:], s_out[-2000:], s_err[-2000:])
    m = re.search(r"^\s*65536\s+(\d+)\s+([\d.]+)\s+([\d.]+)", c_out, re.M)
    if m:
        print(f"     client {i}: {m.group(2)} MB/s peak, {m.group(3)} MB/s average")
ok(sw.returncode == 0, f"droce-switch exit 0 after SIGINT (got {sw.returncode})")
print(sw_out[-6000:])
if sw.returncode != 0:
    print(sw_err[-3000:])

# The capture: every frame the switch sent.
ce_data = {"192.168.77.1": 0, "192.168.77.3": 0}
data = {"192.168.77.1": 0, "192.168.77.3": 0}
cnps = {"192.168.77.2": 0, "192.168.77.4": 0}
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
        if dst in cnps and op == 0x81:
            cnps[dst] += 1
print(f"     capture: data {data}, CE-marked {ce_data}, CNPs {cnps}, bad ICRC {bad_icrc}")
ok(sum(ce_data.values()) > 0, f"CE-marked data packets toward the servers: {sum(ce_data.values())}")
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
