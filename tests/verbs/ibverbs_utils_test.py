"""rdma-core's own programs (ibverbs-utils) on libdroce-verbs, unmodified,
under LD_PRELOAD: ibv_devices and ibv_devinfo -v see the droce device (an
active Ethernet port with RoCE v2 GIDs); the RC (polling and with
completion events, small and 64 KiB messages), UD and SRQ ping-pongs run
between two processes over net_memif and both sides report their results;
the last answer of a UD ping-pong whose server exits at once reaches a
client whose worker sleeps; unsupported verbs are refused with EOPNOTSUPP
(verbs_misuse); a bad configuration, an unknown device and a missing
configuration fail with a message naming the key.

A program that exits without cleaning up (verbs_abandon) exits 0 with no
complaint, and its peer's next write fails with "transport retry counter
exceeded", the QP in error, as with a NIC whose peer went away.

droce-run runs a program the same way (the library found next to it,
the configuration checked first: exit 2 naming the key).

A datagram sent before the sender's link is up (verbs_early_datagram, its
memif peer stopped until then) waits for the link and arrives.

Usage: ibverbs_utils_test.py LIBDROCE_VERBS VERBS_MISUSE DROCE_RUN VERBS_ABANDON
                             VERBS_EARLY_DATAGRAM"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from verbs_common import (Checks, MemifPair, env_for, free_tcp_port, need_programs,  # noqa: E402
                          run_pair, show, write_config)

LIB, MISUSE, DROCE_RUN, ABANDON, EARLY = sys.argv[1:6]
need_programs(["ibv_devices", "ibv_devinfo", "ibv_rc_pingpong", "ibv_ud_pingpong",
               "ibv_srq_pingpong"])
c = Checks()
tmp = tempfile.mkdtemp(prefix="droce_verbs_")
pid = os.getpid()

# A port whose link is up by itself (net_null), for the single-process checks.
null_cfg = write_config(os.path.join(tmp, "null.toml"),
                        ["-l", "0", f"--file-prefix=dv_null_{pid}", "--vdev=net_null0"],
                        "net_null0", ["10.0.0.1", "fd00::1"], extra="report_link = true\n")


def run(cmd, config, timeout=60, env_extra=None):
    env = env_for(LIB, config)
    if env_extra is not None:
        env.update(env_extra)
        env = {k: v for k, v in env.items() if v is not None}
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


res = run(["ibv_devices"], null_cfg)
c.ok(res[0] == 0 and re.search(r"^\s*droce0\s+[0-9a-f]{16}\s*$", res[1], re.M),
     "ibv_devices lists droce0 with its node GUID", show(res))

res = run(["ibv_devinfo", "-v"], null_cfg)
out = res[1]
c.ok(res[0] == 0, "ibv_devinfo -v exits 0", show(res))
c.ok(re.search(r"hca_id:\s+droce0", out) and re.search(r"transport:\s+InfiniBand", out),
     "ibv_devinfo: droce0, transport InfiniBand", out)
c.ok(re.search(r"state:\s+PORT_ACTIVE", out) and re.search(r"link_layer:\s+Ethernet", out),
     "ibv_devinfo: PORT_ACTIVE, link layer Ethernet", out)
c.ok(re.search(r"vendor_part_id:\s+53454", out), "ibv_devinfo: droce's vendor part id", out)
c.ok(re.search(r"GID\[\s*0\]:\s+fe80::[0-9a-f:]+, RoCE v2", out)
     and re.search(r"GID\[\s*1\]:\s+::ffff:10\.0\.0\.1, RoCE v2", out)
     and re.search(r"GID\[\s*2\]:\s+fd00::1, RoCE v2", out),
     "ibv_devinfo: link-local, IPv4-mapped and IPv6 GIDs, all RoCE v2", out)

# A memif port's active MTU fits one of its descriptor slots (bsize,
# 2048 by default): frames spanning slots meet a defect of the PMD.
for bsize, want in ((None, 1024), (8192, 4096)):
    arg = f",bsize={bsize}" if bsize else ""
    cfg = write_config(os.path.join(tmp, f"memif_mtu_{want}.toml"),
                       ["-l", "0", f"--file-prefix=dv_mm_{want}_{pid}",
                        f"--vdev=net_memif0,role=server,socket={tmp}/mm{want}.sock,"
                        f"socket-abstract=no{arg}"], "net_memif0", ["10.0.0.1"])
    res = run(["ibv_devinfo"], cfg)
    m = re.search(r"active_mtu:\s+(\d+)", res[1])
    c.ok(res[0] == 0 and m and int(m.group(1)) == want,
         f"ibv_devinfo over memif{arg or ' (default bsize)'}: active MTU {want}", show(res))

res = run([MISUSE], null_cfg)
c.ok(res[0] == 0 and "0 failure(s)" in res[1],
     "verbs droce does not implement are refused (EOPNOTSUPP / EINVAL), not crashed on",
     show(res))

# ---- ping-pongs over memif
pair = MemifPair(tmp, "pp")
ITERS = re.compile(r"(\d+) iters in [\d.]+ seconds")
cases = [
    ("ibv_rc_pingpong -g 1", ["ibv_rc_pingpong", "-g", "1"], 1000),
    ("ibv_rc_pingpong -g 1 -e", ["ibv_rc_pingpong", "-g", "1", "-e"], 1000),
    ("ibv_rc_pingpong -g 1 -s 65536 -n 2000",
     ["ibv_rc_pingpong", "-g", "1", "-s", "65536", "-n", "2000"], 2000),
    ("ibv_ud_pingpong -g 1 -s 1024", ["ibv_ud_pingpong", "-g", "1", "-s", "1024"], 1000),
    ("ibv_srq_pingpong -g 1", ["ibv_srq_pingpong", "-g", "1"], 1000),
]
for name, cmd, iters in cases:
    s, cl = run_pair(LIB, pair, cmd, cmd)
    for side, r in (("server", s), ("client", cl)):
        m = ITERS.search(r[1])
        c.ok(r[0] == 0 and m and int(m.group(1)) == iters,
             f"{name}: {side} exits 0 with its results line ({iters} iters)", show(r))

# ---- the program's polls run the data path (callers_step): with workers
# that sleep 50 ms when idle, a round trip of ibv_rc_pingpong (which polls
# its CQ without pause) takes microseconds; with callers_step = false it
# waits for the sleeping workers, tens of milliseconds.
USEC = re.compile(r"iters in [\d.]+ seconds = ([\d.]+) usec/iter")
for step, iters in (("true", 500), ("false", 20)):
    slow = MemifPair(tmp, f"cs{step}", extra=f"callers_step = {step}\n", idle_sleep_us=50000)
    s, cl = run_pair(LIB, slow, ["ibv_rc_pingpong", "-g", "1", "-n", str(iters)],
                     ["ibv_rc_pingpong", "-g", "1", "-n", str(iters)])
    m = USEC.search(cl[1])
    usec = float(m.group(1)) if m else None
    if step == "true":
        c.ok(s[0] == 0 and cl[0] == 0 and usec is not None and usec < 5000,
             f"callers_step: a round trip in {usec} us with workers asleep for 50 ms "
             "(under 5000)", show(cl))
    else:
        c.ok(s[0] == 0 and cl[0] == 0 and usec is not None and usec > 5000,
             f"callers_step = false: a round trip waits for the workers, {usec} us "
             "(over 5000)", show(cl))

# ---- the last datagram of a ping-pong arrives although its sender exits at
# once: the server answers and closes its port while the client's worker
# sleeps (50 ms, not stepped by the program). On memif the frame waits in
# the ring the close unmaps; the closing port lingers for it, as a frame on
# a NIC's wire reaches its peer. UD has no retransmission: a lost answer
# hangs the client.
late = MemifPair(tmp, "late", client_extra="callers_step = false\n",
                 client_idle_sleep_us=50000)
for _ in range(2):
    s, cl = run_pair(LIB, late, ["ibv_ud_pingpong", "-g", "1", "-n", "10"],
                     ["ibv_ud_pingpong", "-g", "1", "-n", "10"], timeout=30)
    c.ok(s[0] == 0 and cl[0] == 0 and re.search(r"\b10 iters", cl[1]),
         "ibv_ud_pingpong with a sleeping client: the server's last answer arrives after "
         "the server has exited", show(cl))

# ---- telemetry of the preloaded engine: dpdk-telemetry.py on the program's
# EAL file prefix while ibv_rc_pingpong's server waits for its client.
if shutil.which("dpdk-telemetry.py"):
    tele = MemifPair(tmp, "tel")
    prefix = re.search(r"--file-prefix=([^\"]+)", open(tele.configs["s"]).read()).group(1)
    srv = subprocess.Popen(["ibv_rc_pingpong", "-g", "1", "-p", str(free_tcp_port())],
                           env=env_for(LIB, tele.configs["s"]), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    stats, deadline = None, time.time() + 30
    try:
        while stats is None and time.time() < deadline and srv.poll() is None:
            time.sleep(0.5)
            q = subprocess.run(["dpdk-telemetry.py", "-f", prefix], input="/droce/stats\n",
                               capture_output=True, text=True, timeout=30)
            m = re.search(r"\{.*\}", q.stdout, re.S)
            if m and '"/droce/stats"' in m.group(0):
                stats = json.loads(m.group(0))["/droce/stats"]
    finally:
        srv.kill()
        srv.communicate()
    c.ok(stats is not None and stats.get("ports") == 1 and stats.get("qps", 0) >= 1,
         "dpdk-telemetry.py on the program's file prefix: /droce/stats with its port and QP",
         str(stats))

# ---- an application that exits without cleaning up
exchange = os.path.join(tmp, "abandon")
os.mkdir(exchange)
pair.reset()
# Under valgrind where there is one: what the library allocated for the
# objects left open is freed or still reachable at exit, never lost.
VALGRIND = (["valgrind", "--leak-check=full", "--errors-for-leak-kinds=definite",
             "--error-exitcode=3", "-q"] if shutil.which("valgrind") else [])
leaver = subprocess.Popen([*VALGRIND, ABANDON, "leaver", exchange],
                          env=env_for(LIB, pair.configs["s"]),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
stayer = subprocess.Popen([ABANDON, "stayer", exchange], env=env_for(LIB, pair.configs["c"]),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
try:
    l_out, l_err = leaver.communicate(timeout=180)
    with open(os.path.join(exchange, "gone"), "w"):
        pass
    s_out, s_err = stayer.communicate(timeout=90)
except subprocess.TimeoutExpired:
    for p in (leaver, stayer):
        p.kill()
    l_out, l_err = leaver.communicate()
    s_out, s_err = stayer.communicate()
c.ok(leaver.returncode == 0 and "ok   the write's bytes arrived" in l_out
     and "FAIL" not in l_out and "libdroce-verbs:" not in l_err,
     "exit without cleanup: exit 0, the peer's write arrived, no complaint at shutdown"
     + (", no leak (valgrind)" if VALGRIND else ""),
     show((leaver.returncode, l_out, l_err)))
c.ok(stayer.returncode == 0 and "IBV_WC_RETRY_EXC_ERR, as from a NIC" in s_out
     and "0 failure(s)" in s_out,
     "the peer of an application gone without cleanup: retry exceeded, QP in error",
     show((stayer.returncode, s_out, s_err)))

# ---- a datagram posted before the link is up: the receiver (the memif
# server) is stopped before the sender starts, so the sender's memif
# handshake cannot finish until it continues. The frame waits for the
# link (tx_held), is not discarded as one sent into a link that went down.
exchange = os.path.join(tmp, "early")
os.mkdir(exchange)
early = MemifPair(tmp, "early", extra="counters_at_exit = true\n")
early.reset()
receiver = subprocess.Popen([EARLY, "receiver", exchange], env=env_for(LIB, early.configs["s"]),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
sender = None
try:
    deadline = time.time() + 60
    while not os.path.exists(os.path.join(exchange, "receiver.ends")) and \
            receiver.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    receiver.send_signal(signal.SIGSTOP)
    sender = subprocess.Popen([EARLY, "sender", exchange], env=env_for(LIB, early.configs["c"]),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not os.path.exists(os.path.join(exchange, "posted")) and \
            sender.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    time.sleep(0.5)  # the sender's link polls (every 10 ms) see it down
    receiver.send_signal(signal.SIGCONT)
    # One after the other: the receiver stays, idle, until the sender has
    # gone (verbs_early_datagram.cc says why).
    s_res = sender.communicate(timeout=90)
    with open(os.path.join(exchange, "sender.gone"), "w"):
        pass
    r_res = receiver.communicate(timeout=90)
except subprocess.TimeoutExpired:
    for p in (receiver, sender):
        if p:
            p.send_signal(signal.SIGCONT)
            p.kill()
    r_res, s_res = receiver.communicate(), sender.communicate() if sender else ("", "")
r_res = (receiver.returncode, *r_res)
s_res = (sender.returncode if sender else None, *s_res)
c.ok(r_res[0] == 0 and "ok   the datagram sent before the sender's link was up arrived"
     in r_res[1], "a datagram posted before the link was up arrives once it is", show(r_res))
c.ok(s_res[0] == 0 and re.search(r"port_tx_held\s+[1-9]", s_res[2])
     and "port_tx_link_down" not in s_res[2],
     "the sender held it for the link (port_tx_held), discarded nothing (port_tx_link_down)",
     show(s_res))

# ---- bad use
res = run(["ibv_rc_pingpong", "-d", "nosuch", "-g", "1"], null_cfg)
c.ok(res[0] != 0 and "nosuch" in res[2] and "not found" in res[2],
     "an unknown device name: not found, non-zero exit", show(res))

bad = os.path.join(tmp, "bad_mtu.toml")
with open(bad, "w") as f:
    f.write("mtu = 1500\n")
res = run(["ibv_devices"], bad)
c.ok(res[0] != 0 and f"libdroce-verbs: {bad}: mtu: one of 256" in res[2],
     "a bad MTU: the message names the file and the key, non-zero exit", show(res))

bad = os.path.join(tmp, "bad_key.toml")
with open(bad, "w") as f:
    f.write("adresses = [\"10.0.0.1\"]\n")
res = run(["ibv_devinfo"], bad)
c.ok(res[0] != 0 and "adresses: unknown key (accepted:" in res[2],
     "an unknown key is named, with the accepted ones", show(res))

bad = os.path.join(tmp, "bad_eal.toml")
with open(bad, "w") as f:
    f.write(f"eal = [\"--no-huge\", \"--no-pci\", \"--file-prefix=dv_bad_{pid}\", "
            "\"--no-such-eal-option\"]\n")
res = run(["ibv_devinfo"], bad)
c.ok(res[0] != 0 and "libdroce-verbs: eal: EAL: rte_eal_init failed" in res[2],
     "EAL refusing its arguments: named, non-zero exit", show(res))

res = run(["ibv_devices"], null_cfg, env_extra={"DROCE_VERBS_CONFIG": None})
c.ok(res[0] != 0 and "DROCE_VERBS_CONFIG: not set" in res[2],
     "no configuration: the variable is named", show(res))

# ---- droce-run
env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "DROCE_VERBS_CONFIG")}
p = subprocess.run([DROCE_RUN, "--config", null_cfg, "--", "ibv_devices"], env=env,
                   capture_output=True, text=True, timeout=60)
c.ok(p.returncode == 0 and re.search(r"^\s*droce0\s+[0-9a-f]{16}", p.stdout, re.M),
     "droce-run --config F -- ibv_devices: the program runs on droce",
     show((p.returncode, p.stdout, p.stderr)))
bad = os.path.join(tmp, "bad_mtu.toml")
p = subprocess.run([DROCE_RUN, "--config", bad, "--", "ibv_devices"], env=env,
                   capture_output=True, text=True, timeout=60)
c.ok(p.returncode == 2 and "droce-run: --config: " in p.stderr and "mtu: one of" in p.stderr
     and "node GUID" not in p.stdout,
     "droce-run with a bad configuration: exit 2 naming the key, the program not run",
     show((p.returncode, p.stdout, p.stderr)))
p = subprocess.run([DROCE_RUN, "--config", null_cfg, "--", "no-such-program"], env=env,
                   capture_output=True, text=True, timeout=60)
c.ok(p.returncode == 127 and "cannot run 'no-such-program'" in p.stderr,
     "droce-run with a program that does not exist: 127", show((p.returncode, p.stdout, p.stderr)))

c.finish()
