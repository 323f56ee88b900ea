"""droce-perf refuses bad options with a message naming the option and exit
code 2, before EAL starts (no DPDK resources are touched).

usage: cli_test.py DROCE_PERF"""

import subprocess
import sys

from perf_common import Checks

exe = sys.argv[1]
c = Checks()
EAL = ["--no-huge", "-m", "64", "--no-pci", "--file-prefix=dpcli", "-l", "0"]

CASES = [
    ("unknown option", ["--test", "write_bw", "--server", "--bogus"], "--bogus"),
    ("bad size", ["--test", "write_bw", "--server", "-s", "0"], "-s/--size"),
    ("size too large", ["--test", "write_bw", "--server", "-s", "9000000"], "-s/--size"),
    ("size not a number", ["--test", "write_bw", "--server", "-s", "big"], "size"),
    ("unknown test", ["--test", "write_lol", "--server"], "--test"),
    ("missing peer", ["--test", "read_bw"], "missing peer"),
    ("both peers", ["--test", "read_bw", "--server", "--connect", "127.0.0.1"],
     "--server/--connect"),
    ("bad mtu", ["--test", "send_lat", "--server", "-m", "1500"], "-m/--mtu"),
    ("lat with qps", ["--test", "write_lat", "--server", "-q", "2"], "-q/--qp"),
    ("UC read", ["--test", "read_bw", "--server", "-c", "UC"], "-c/--connection"),
    ("-a with -s", ["--test", "write_bw", "--server", "-a", "-s", "8"], "-a/--all"),
    # perftest refuses a duration with all sizes too.
    ("-D with -a", ["--test", "write_bw", "--server", "-D", "2", "-a"], "-D/--duration"),
    ("-D with -n", ["--test", "write_bw", "--server", "-D", "2", "-n", "10"],
     "-D/--duration"),
    ("negative -D", ["--test", "write_lat", "--server", "-D", "-1"], "-D/--duration"),
    ("negative rate", ["--test", "write_bw", "--server", "--rate-gbps", "-1"], "--rate-gbps"),
    ("no --test", ["--server"], "--test"),
    ("zero clients", ["--test", "write_bw", "--server", "--clients", "0"], "--clients"),
    ("too many clients", ["--test", "write_bw", "--server", "--clients", "65"], "--clients"),
    ("--clients on a client", ["--test", "write_bw", "--connect", "127.0.0.1", "--clients",
                               "2"], "--clients"),
    ("--clients 1 on a client", ["--test", "read_bw", "--connect", "127.0.0.1",
                                 "--clients", "1"], "--clients"),
    ("--clients with a latency test", ["--test", "send_lat", "--server", "--clients", "2"],
     "--clients"),
    ("--clients not a number", ["--test", "write_bw", "--server", "--clients", "two"],
     "--clients"),
    ("bad --shard-rx", ["--test", "write_bw", "--server", "--shards", "2", "--shard-rx",
                        "rss"], "--shard-rx"),
    ("qp timeout out of range", ["--test", "write_bw", "--server", "-u", "32"],
     "--qp-timeout"),
    ("DSCP out of range", ["--test", "write_bw", "--server", "--dscp", "64"], "--dscp"),
    ("unknown ECN", ["--test", "write_bw", "--server", "--ecn", "ect2"], "--ecn"),
    ("PCP out of range", ["--test", "write_bw", "--server", "--pcp", "8"], "--pcp"),
    ("VLAN out of range", ["--test", "write_bw", "--server", "--vlan", "4096"], "--vlan"),
]
for what, args, needle in CASES:
    r = subprocess.run([exe, *EAL, "--", *args], capture_output=True, text=True,
                       timeout=30)
    c.ok(r.returncode == 2, f"{what}: exit code 2 (got {r.returncode})")
    # One voice (docs/DESIGN.md "Error handling"): "droce-perf: <option>: <problem>".
    c.ok(needle in r.stderr and r.stderr.startswith("droce-perf: "),
         f"{what}: message names '{needle}' ({r.stderr.strip()[:200]!r})")
    c.ok("EAL:" not in r.stderr, f"{what}: refused before EAL starts")

r = subprocess.run([exe, "--", "--help"], capture_output=True, text=True, timeout=30)
c.ok(r.returncode == 0 and "--report_gbits" in r.stdout and "--check" in r.stdout
     and "--clients" in r.stdout, "--help lists perftest's flags and --clients")
c.finish()
