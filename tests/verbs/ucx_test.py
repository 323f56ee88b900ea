"""UCX (Debian's ucx-utils, unmodified) on libdroce-verbs. UCX lists a
verbs device only when /dev/infiniband/<uverbs device> exists as a
character device it may open; the test makes one inside a private mount
namespace of its own (unshare -m, an overlay on /dev), never on the host's
/dev. Checks: ucx_info -d shows the droce0 memory domain with rc_verbs and
ud_verbs; ucx_perftest over rc_verbs (put_bw short and zero-copy, am_bw),
ud_verbs (am_lat) and UCP's tag_bw between two processes over net_memif
exits 0 on both sides with its final row. Root only (a
mount namespace and mknod), else skipped.

Where Open MPI (mpirun) and MPI_CHECK are there: mpirun -np 2 over UCX
(rc_verbs, ud_verbs), one rank per side of the memif link, runs
MPI_CHECK, which checks every byte it moved: exit 0, zero mismatches; then
mpirun -np 4 on two hosts of two ranks each (a network namespace per
host, each rank's droce on net_af_packet over its own veth into a Linux
bridge), the same.

Usage: ucx_test.py LIBDROCE_VERBS [MPI_CHECK]"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from verbs_common import (SKIP, Checks, MemifPair, SwitchedHosts, env_for,  # noqa: E402
                          free_tcp_port, listening, need_programs, show, write_config)

LIB = sys.argv[1]
MPI_CHECK = sys.argv[2] if len(sys.argv) > 2 else None
need_programs(["ucx_info", "ucx_perftest", "unshare", "mount", "mknod", "ip"])
if os.geteuid() != 0:
    print("skipped: needs root (a private mount namespace with a device node)")
    sys.exit(SKIP)

c = Checks()
tmp = tempfile.mkdtemp(prefix="droce_ucx_")
# Runs its arguments in the private namespace: /dev is an overlay whose
# upper layer (a tmpfs) holds /dev/infiniband/uverbs_droce0.
ns = os.path.join(tmp, "ns.sh")
with open(ns, "w") as f:
    f.write("""#!/bin/bash
set -e
d=$(mktemp -d)
mount --make-rprivate /
mount -t tmpfs none "$d"
mkdir "$d/u" "$d/w"
mount -t overlay overlay -o lowerdir=/dev,upperdir="$d/u",workdir="$d/w" /dev
mkdir -p /dev/infiniband
mknod /dev/infiniband/uverbs_droce0 c 231 192
chmod 666 /dev/infiniband/uverbs_droce0
exec "$@"
""")
os.chmod(ns, 0o755)
PRIVATE = ["unshare", "-m", ns]

null_cfg = write_config(os.path.join(tmp, "null.toml"),
                        ["-l", "0", f"--file-prefix=dv_ucx_{os.getpid()}", "--vdev=net_null0"],
                        "net_null0", ["10.0.0.1"])
p = subprocess.run([*PRIVATE, "ucx_info", "-d"], env=env_for(LIB, null_cfg),
                   capture_output=True, text=True, timeout=60)
out = p.stdout
c.ok(p.returncode == 0 and re.search(r"Memory domain: droce0", out)
     and re.search(r"Transport: rc_verbs\s*\n#\s+Device: droce0:1", out)
     and re.search(r"Transport: ud_verbs\s*\n#\s+Device: droce0:1", out),
     "ucx_info -d: droce0 with rc_verbs and ud_verbs", show((p.returncode, out, p.stderr)))
c.ok(not os.path.exists("/dev/infiniband/uverbs_droce0"), "the host's /dev is untouched")

# Each process prints its port's counters at exit (the MPI checks read them).
COUNTERS = "counters_at_exit = true\n"
pair = MemifPair(tmp, "ucx", extra=COUNTERS)
# UCX's UD transport drops a datagram whose GRH destination is not among the
# device's GIDs; it finds that address by the network header type the
# completion's sl reports (IPv4: the GRH area's last 4 bytes). ud_verbs runs
# on UCX's default GID (the IPv4 one) and on the link-local one.
CASES = [
    ("rc_verbs", ["-t", "put_bw", "-n", "2000"], {}),
    ("rc_verbs", ["-t", "put_bw", "-D", "zcopy", "-s", "65536", "-n", "1000"], {}),
    ("rc_verbs", ["-t", "am_bw", "-n", "5000"], {}),
    ("rc_verbs", ["-t", "am_lat", "-n", "2000"], {}),
    ("ud_verbs", ["-t", "am_lat", "-n", "2000"], {}),
    ("ud_verbs", ["-t", "am_lat", "-n", "2000"], {"UCX_IB_GID_INDEX": "0"}),
    # UCP (the API MPI uses) over the same transports: tagged messages of
    # 64 KiB, rendezvous with zero-copy RDMA.
    (None, ["-t", "tag_bw", "-s", "65536", "-n", "2000"],
     {"UCX_NET_DEVICES": "droce0:1", "UCX_TLS": "rc_verbs,ud_verbs,self"}),
]
for tl, args, extra_env in CASES:
    port = free_tcp_port()
    transport = ["-d", "droce0:1", "-x", tl] if tl else []
    cmd = ["ucx_perftest", "-p", str(port), *transport, *args]
    name = f"ucx_perftest {tl or 'UCP'} " + " ".join(args)
    if "UCX_IB_GID_INDEX" in extra_env:
        name += f" on GID {extra_env['UCX_IB_GID_INDEX']}"
    pair.reset()
    # ucx_perftest's server opens its device only after its client has
    # connected over TCP, so the client is the memif server here, and the
    # server's port waits for its socket.
    s_env, c_env = env_for(LIB, pair.configs["c"]), env_for(LIB, pair.configs["s"])
    s_env.update(extra_env)
    c_env.update(extra_env)
    srv = subprocess.Popen([*PRIVATE, *cmd], env=s_env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not listening(port) and srv.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    try:
        cli = subprocess.run([*PRIVATE, *cmd[:1], "127.0.0.1", *cmd[1:]],
                             env=c_env, capture_output=True,
                             text=True, timeout=90)
        s_out, s_err = srv.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        srv.kill()
        s_out, s_err = srv.communicate()
        c.ok(False, f"{name}: finished in time", s_out + s_err)
        continue
    c.ok(srv.returncode == 0, f"{name}: server exits 0", show((srv.returncode, s_out, s_err)))
    m = re.search(r"^Final:\s+(\d+)", cli.stdout, re.M)
    c.ok(cli.returncode == 0 and m and int(m.group(1)) > 0,
         f"{name}: client exits 0 with its final row",
         show((cli.returncode, cli.stdout, cli.stderr)))

# ---- Open MPI over UCX: each rank its side of the link, through a wrapper
# that gives it its configuration and the library.
def run_mpi(ranks, configs, prefix=(), mpirun_args=(), timeout=240):
    """mpirun -np `ranks` of MPI_CHECK over UCX, rank i on configs[i]."""
    rank_sh = os.path.join(tmp, f"rank{ranks}.sh")
    with open(rank_sh, "w") as f:
        f.write("#!/bin/bash\n")
        for i, cfg in enumerate(configs):
            f.write(f'[ "$OMPI_COMM_WORLD_RANK" = {i} ] && export DROCE_VERBS_CONFIG={cfg}\n')
        f.write(f"export LD_PRELOAD={LIB}\nexec \"$@\"\n")
    os.chmod(rank_sh, 0o755)
    cmd = [*prefix, *PRIVATE, "mpirun", "--allow-run-as-root", "--oversubscribe", "-np",
           str(ranks), *mpirun_args, "--mca", "pml", "ucx",
           "--mca", "btl", "^vader,tcp,openib,uct,smcuda",
           "-x", "UCX_TLS=rc_verbs,ud_verbs,self",
           "-x", "UCX_NET_DEVICES=droce0:1", rank_sh, MPI_CHECK]
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "DROCE_VERBS_CONFIG")}
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        return (p.returncode, p.stdout, p.stderr)
    except subprocess.TimeoutExpired as e:
        return (-1, str(e.stdout), str(e.stderr))


def clean_counters(err, ranks):
    """Every rank printed its counters at exit, none a malformed frame (the
    rx_error_* reasons: parse, ICRC, ... and their sum rx_malformed)."""
    return (err.count("libdroce-verbs: counters at exit") == ranks
            and not re.search(r"^\s+(rx_malformed|rx_error_\w+)\s+[1-9]", err, re.M))


if MPI_CHECK and shutil.which("mpirun"):
    pair.reset()
    res = run_mpi(2, [pair.configs["s"], pair.configs["c"]], [])
    c.ok(res[0] == 0 and "ranks: 2 mismatches: 0" in res[1],
         "mpirun -np 2 over UCX: ping-pong, Allreduce, Alltoall, every byte checked, "
         "zero mismatches", show(res))
    c.ok(clean_counters(res[2], 2), "mpirun -np 2: no parse or ICRC error in the counters at exit",
         res[2][-4000:])
    # Two hosts on a switch, two ranks each: a network namespace per host,
    # each rank's droce on net_af_packet over a veth of its own into one
    # Linux bridge. mpirun starts in the first host and its daemons through
    # the hosts' remote-shell agent, speaking TCP over their control link.
    # (rtc_hwloc_vmhole none: an orted otherwise crashes writing its hwloc
    # topology to shared memory.)
    hosts = SwitchedHosts(tmp, "mpi", 2, 2, extra=COUNTERS)
    try:
        res = run_mpi(4, hosts.configs, ["ip", "netns", "exec", hosts.host_ns[0]],
                      ["-H", hosts.mpirun_hosts(), "--mca", "plm_rsh_agent", hosts.launcher,
                       "--mca", "oob_tcp_if_include", SwitchedHosts.CONTROL_NET,
                       "--mca", "rtc_hwloc_vmhole", "none"])
    finally:
        hosts.remove()
    c.ok(res[0] == 0 and "ranks: 4 mismatches: 0" in res[1],
         "mpirun -np 4 over UCX, two hosts of two ranks on a bridge (net_af_packet): every "
         "byte checked, zero mismatches", show(res))
    c.ok(clean_counters(res[2], 4), "mpirun -np 4: no parse or ICRC error in the counters at exit",
         res[2][-4000:])
else:
    print("mpirun or the MPI check program missing: MPI not run")

c.finish()
