"""droce-cc-replay end to end: shipped traces through every algorithm, output
shape, determinism, and exit code 2 with a clear message for bad options.

usage: cc_replay_test.py <droce-cc-replay> <cc/traces dir>
"""
import csv
import io
import os
import subprocess
import sys
import tempfile

EXE, TRACES = sys.argv[1], sys.argv[2]
HEADER = ["time_ns", "event", "rate_bytes_per_sec", "window_bytes"]
LINE = 12_500_000_000  # default --line-rate-gbps 100, in bytes/s
failures = []


def run(*args, stdin=None):
    return subprocess.run([EXE, *args], capture_output=True, text=True,
                          input=stdin, timeout=60)


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def rows_of(stdout):
    rows = list(csv.reader(io.StringIO(stdout)))
    return rows[0], rows[1:]


def input_events(path):
    n = 0
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#") and not line.startswith("time_ns"):
                n += 1
    return n


# Every algorithm on every shipped trace: header, one row per input event
# (plus start and timer rows), non-decreasing time, rate in (0, line].
for trace in ("cnp_burst.csv", "int_rtt.csv"):
    path = os.path.join(TRACES, trace)
    for cc in ("none", "dcqcn", "timely", "hpcc", "swift"):
        r = run("--cc", cc, path)
        check(r.returncode == 0, f"{cc} on {trace}: exit {r.returncode} {r.stderr}")
        if r.returncode != 0:
            continue
        header, rows = rows_of(r.stdout)
        check(header == HEADER, f"{cc} on {trace}: header {header}")
        events = [row for row in rows if row[1] not in ("start", "timer", "end")]
        check(len(events) == input_events(path),
              f"{cc} on {trace}: {len(events)} event rows")
        times = [int(row[0]) for row in rows]
        check(times == sorted(times), f"{cc} on {trace}: time goes backwards")
        rates = [int(row[2]) for row in rows]
        check(all(0 < x <= LINE for x in rates), f"{cc} on {trace}: rate range")
        has_window = cc in ("hpcc", "swift")
        check(all((row[3] != "") == has_window for row in rows),
              f"{cc} on {trace}: window column")
        again = run("--cc", cc, path)
        check(again.stdout == r.stdout, f"{cc} on {trace}: not deterministic")

# DCQCN with the paper's settings (§5: T = K = 55us, B = 10 MB, F = 5,
# R_AI = 40 Mbps, g = 1/256) must react to the CNP burst and, given time,
# recover to line rate through its timers (rows labelled "timer").
r = run("--cc", "dcqcn", os.path.join(TRACES, "cnp_burst.csv"),
        "--param", "rp_time_reset=55", "--param", "rp_dce_tcp_rtt=55",
        "--param", "rp_byte_reset=10000000", "--param", "rp_threshold=5",
        "--param", "rp_ai_rate=40", "--param", "rp_dce_tcp_g=1020",
        "--param", "rp_rate_reduce_monitor_period=50",
        "--until", "500000000")
_, rows = rows_of(r.stdout)
rates = [int(row[2]) for row in rows]
check(min(rates) < LINE // 10, "dcqcn: CNP burst did not cut the rate")
check(any(row[1] == "timer" for row in rows), "dcqcn: no timer rows")
check(rows[-1][1] == "end" and int(rows[-1][2]) == LINE,
      f"dcqcn: did not recover to line rate: {rows[-1]}")

# --param reaches the algorithm: HPCC's initial window is line rate * T.
r = run("--cc", "hpcc", "--param", "base_rtt=4", "--param", "eta=0.9",
        os.path.join(TRACES, "int_rtt.csv"))
_, rows = rows_of(r.stdout)
check(rows[0] == ["0", "start", str(LINE), "50000"], f"hpcc start row {rows[0]}")

# --help and --list succeed.
check(run("--help").returncode == 0, "--help exit code")
r = run("--list")
check(r.returncode == 0 and "rp_time_reset" in r.stdout and "eta" in r.stdout,
      "--list output")

# Bad options: exit 2, message on stderr naming the option/value.
trace = os.path.join(TRACES, "cnp_burst.csv")
bad = [
    (("--cc", "cubic", trace), "accepted: none, dcqcn, timely, hpcc, swift"),
    (("--cc", "dcqcn", "--param", "rp_bogus=1", trace), "rp_time_reset"),
    (("--cc", "dcqcn", "--param", "rp_gd=99", trace), "[0, 15]"),
    (("--cc", "hpcc", "--param", "eta", trace), "name=value"),
    (("--cc", "hpcc", "--param", "eta=0.9", "--param", "eta=0.8", trace),
     "given twice"),
    (("--cc", "none", "--line-rate-gbps", "0", trace), "--line-rate-gbps"),
    (("--cc", "none", "--frobnicate", trace), "--frobnicate"),
    ((trace,), "--cc is required"),
    (("--cc", "none", "/nonexistent/trace.csv"), "cannot open"),
]
for args, needle in bad:
    r = run(*args)
    check(r.returncode == 2, f"{args}: exit {r.returncode}, want 2")
    check(needle in r.stderr, f"{args}: stderr lacks {needle!r}: {r.stderr!r}")

# Bad trace content: exit 2 naming the line.
for content, needle in [("0,ack,1\n5,teleport\n", "line 2: unknown event"),
                        ("10,cnp\n5,cnp\n", "goes backwards"),
                        ("0,ack,1,,1:2:3\n", "INT hop"),
                        ("x,cnp\n", "time_ns 'x'")]:
    r = run("--cc", "dcqcn", "-", stdin=content)
    check(r.returncode == 2, f"trace {content!r}: exit {r.returncode}")
    check(needle in r.stderr, f"trace {content!r}: stderr {r.stderr!r}")

print("cc_replay_test:", "FAILED" if failures else "ok")
sys.exit(1 if failures else 0)
