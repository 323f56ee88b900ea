"""One droce-perf server (--clients 2) serving two clients at once on its one
DPDK port. memif is point to point, so the clients reach the server's port
through droce-switch (switch port 0: the server; ports 1 and 2: one client
each; routes by destination IP), as several hosts reach one NIC through a
fabric. WRITE, SEND and READ bandwidth with --check: byte-exact data for
both clients, each client's row, and the server's per-client and aggregate
rows. Two clients with the same --ip are refused (the fabric could not tell
them apart).

usage: multi_client_test.py DROCE_PERF DROCE_SWITCH"""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from perf_common import BW_HEADER, EAL_COMMON, Checks, free_tcp_port, rows_after

perf, switch = sys.argv[1:3]
c = Checks()
tmp = tempfile.mkdtemp(prefix="droce-perf-multi-")
pid = os.getpid()
SERVER_IP = "192.168.77.1"
CLIENT_IPS = ["192.168.77.2", "192.168.77.3"]


def memif(name, role, sock):
    return f"--vdev={name},role={role},socket={sock},socket-abstract=no"


def kill(p):
    if p.poll() is None:
        p.kill()
    return p.communicate()


def run(test, args, tag, timeout=90):
    """The switch, then the server, then both clients; returns
    (server, [client0, client1], switch) as (rc, stdout, stderr)."""
    socks = [os.path.join(tmp, f"{tag}{i}.sock") for i in range(3)]
    sw_cmd = [switch, "-l", "0", *EAL_COMMON, f"--file-prefix=dpmc_sw_{pid}_{tag}",
              *(memif(f"net_memif{i}", "server", s) for i, s in enumerate(socks)), "--",
              "--port", "net_memif0", "--port", "net_memif1", "--port", "net_memif2",
              "--route", f"{SERVER_IP}=0", "--route", f"{CLIENT_IPS[0]}=1",
              "--route", f"{CLIENT_IPS[1]}=2", "--stats-interval", "0",
              "--idle-sleep-us", "20", "--duration", str(timeout + 30)]
    sw = subprocess.Popen(sw_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # The memif clients must find the switch's sockets when their ports start.
    deadline = time.time() + 30
    while not all(os.path.exists(s) for s in socks) and sw.poll() is None \
            and time.time() < deadline:
        time.sleep(0.05)
    port = free_tcp_port()
    common = ["--test", test, "-p", str(port), "--timeout", "60", "--idle-sleep-us", "20",
              *args]
    srv = subprocess.Popen(
        [perf, "-l", "1", *EAL_COMMON, f"--file-prefix=dpmc_s_{pid}_{tag}",
         memif("net_memif0", "client", socks[0]), "--", *common, "--server",
         "--clients", "2", "--ip", SERVER_IP],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    clis = [subprocess.Popen(
        [perf, "-l", str(i), *EAL_COMMON, f"--file-prefix=dpmc_c{i}_{pid}_{tag}",
         memif("net_memif0", "client", socks[1 + i]), "--", *common,
         "--connect", "127.0.0.1", "--ip", CLIENT_IPS[i]],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    outs = []
    try:
        end = time.time() + timeout
        for p in [srv, *clis]:
            o, e = p.communicate(timeout=max(1, end - time.time()))
            outs.append((p.returncode, o, e))
    except subprocess.TimeoutExpired:
        outs = [(-1, *kill(p)) for p in [srv, *clis]]
    finally:
        for p in [srv, *clis]:
            if p.poll() is None:
                kill(p)
        if sw.poll() is None:
            sw.send_signal(signal.SIGINT)
        try:
            sw_o, sw_e = sw.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            sw_o, sw_e = kill(sw)
    return outs[0], outs[1:], (sw.returncode, sw_o, sw_e)


def server_rows(out):
    """The server's rows: {client index or 'all': [size, iterations, peak, avg, rate]}."""
    rows = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+"
                     r"(?:client (\d) (\S+)|all (\d+) clients)\s*$", line)
        if m:
            key = int(m.group(6)) if m.group(6) is not None else "all"
            rows[key] = [float(x) for x in m.group(1, 2, 3, 4, 5)]
            if key != "all":
                rows[key].append(m.group(7))
    return rows


CASES = [
    ("write_bw", ["-n", "300", "-s", "65536", "--check"]),
    ("send_bw", ["-n", "300", "-s", "4096", "--check"]),
    ("read_bw", ["-n", "200", "-s", "10000", "-q", "2", "--check"]),
]

t_all = time.time()
for i, (test, args) in enumerate(CASES):
    t0 = time.time()
    name = f"{test} {' '.join(args)}"
    (src, sout, serr), clients, (swrc, swout, swerr) = run(test, args, f"{test[:4]}{i}")
    size = int(args[args.index("-s") + 1])
    n = int(args[args.index("-n") + 1]) * (int(args[args.index("-q") + 1]) if "-q" in args else 1)
    c.ok(src == 0, f"{name}: server exit 0 (got {src}; stderr: {serr.strip()[-600:]})")
    c.ok("Data check: PASS" in sout, f"{name}: server's data check passed")
    for k, (crc, cout, cerr) in enumerate(clients):
        c.ok(crc == 0, f"{name}: client {k} exit 0 (got {crc}; stderr: {cerr.strip()[-600:]})")
        c.ok("Data check: PASS" in cout, f"{name}: client {k}'s data check passed")
        rows = rows_after(BW_HEADER, cout)
        c.ok(rows is not None and len(rows) == 1 and int(rows[0][0]) == size
             and int(rows[0][1]) == n and rows[0][3] > 0,
             f"{name}: client {k} row: {size} B, {n} messages, average > 0 ({rows})")
    rows = server_rows(sout)
    c.ok(all(k in rows for k in (0, 1, "all")),
         f"{name}: the server prints a row per client and the aggregate ({rows})")
    if all(k in rows for k in (0, 1, "all")):
        c.ok({rows[0][5], rows[1][5]} == set(CLIENT_IPS),
             f"{name}: the server's rows name both clients' IPs")
        c.ok(all(int(rows[k][0]) == size and int(rows[k][1]) == n and rows[k][3] > 0
                 for k in (0, 1)),
             f"{name}: each client row: {n} messages of {size} B, average > 0")
        c.ok(int(rows["all"][1]) == 2 * n and rows["all"][3] > 0,
             f"{name}: aggregate row: {2 * n} messages, average {rows['all'][3]} > 0")
    c.ok(swrc == 0, f"{name}: droce-switch exit 0 (got {swrc}; {swerr.strip()[-300:]})")
    if src or any(r[0] for r in clients):
        print(sout[-2000:], "\n".join(o[-1500:] for _, o, _ in clients), swout[-2000:])
    print(f"     ({time.time() - t0:.1f} s)", flush=True)

# Both clients with the same --ip: the switch routes by address and could
# not tell them apart. The server refuses at set-up (exit 1, both clients
# see it go). net_null ports: nothing is sent before the refusal.
port = free_tcp_port()
common = ["--test", "write_bw", "-p", str(port), "--timeout", "20", "-n", "10"]
srv = subprocess.Popen([perf, "-l", "0", *EAL_COMMON, f"--file-prefix=dpmc_dup_s{pid}",
                        "--vdev=net_null0", "--", *common, "--server", "--clients", "2"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
clis = [subprocess.Popen([perf, "-l", str(i), *EAL_COMMON, f"--file-prefix=dpmc_dup_c{i}{pid}",
                          "--vdev=net_null0", "--", *common, "--connect", "127.0.0.1"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i in range(2)]
try:
    s_out, s_err = srv.communicate(timeout=60)
    for p in clis:
        p.communicate(timeout=60)
except subprocess.TimeoutExpired:
    s_out, s_err = kill(srv)
    for p in clis:
        kill(p)
c.ok(srv.returncode == 1 and "both use IP 192.168.77.2" in s_err and "--ip" in s_err,
     f"same --ip twice: server exit 1 naming the IP and --ip "
     f"(got {srv.returncode}: {s_err.strip()[-300:]!r})")
c.ok(all(p.returncode == 1 for p in clis),
     f"same --ip twice: both clients exit 1 ({[p.returncode for p in clis]})")

print(f"total {time.time() - t_all:.1f} s")
if c.failed == 0:
    shutil.rmtree(tmp, ignore_errors=True)
c.finish()
