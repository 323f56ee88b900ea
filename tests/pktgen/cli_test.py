#!/usr/bin/python3
"""droce-pktgen --mode sim from the outside: bad options exit 2 with a
message naming the option, --json parses and has the fields, busbw in the
table matches the arithmetic, the same command twice gives identical JSON.
Usage: cli_test.py path/to/droce-pktgen"""
import json
import os
import re
import subprocess
import sys
import tempfile

EXE = sys.argv[1]
failures = []


def run(args):
    return subprocess.run([EXE] + args, capture_output=True, text=True, timeout=120)


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)
    else:
        print("ok:", what)


# ---- Bad options: exit 2, the message names the option ---------------------
BAD = [
    (["--pattern", "butterfly"], "--pattern"),
    (["--ranks", "1"], "--ranks"),
    (["--ranks", "0"], "--ranks"),
    (["--ranks", "9000"], "--ranks"),
    (["--ranks", "4", "-b", "1001", "-e", "1001"], "-b/--minbytes"),  # not a multiple of 4 x ranks
    (["--pattern", "tree", "-b", "6", "-e", "6"], "-b/--minbytes"),   # not a multiple of 4
    (["-b", "64K", "-e", "32K"], "-e/--maxbytes"),
    (["-b", "lots"], "-b/--minbytes"),
    (["-n", "0"], "-n/--iters"),
    (["--channels", "0"], "--channels"),
    (["--link-rate", "fast"], "--link-rate"),
    (["--straggler", "1:rate=400G"], "--straggler"),  # above the 100G line rate
    (["--straggler", "9:rate=25G"], "--straggler"),   # no such rank
    (["--straggler", "1:speed=1"], "--straggler"),
    (["--loss", "1.5"], "--loss"),
    (["--loss", "150%"], "--loss"),
    (["--cc", "nosuchcc"], "--cc"),
    (["--cc", "none,nosuchcc"], "--cc"),
    (["--cc", "none,none"], "--cc"),
    (["--cc", "none,dcqcn", "--cc-param", "rp_gd=11"], "--cc-param"),
    (["--int", "sometimes"], "--int"),
    (["--ack-every", "often"], "--ack-every"),
    (["--cc", "dcqcn", "--cc-param", "no_such_param=1"], "--cc"),
    (["--recovery", "magic"], "--recovery"),
    (["--topology", "mesh"], "--topology"),
    (["--topology", "/nonexistent/x.toml"], "--topology"),
    (["--mtu", "1500"], "--mtu"),
    (["--background", "0-0"], "--background"),
    (["--plot"], "--plot"),
    (["--mode", "warp"], "--mode"),
    (["--max-memory", "lots"], "--max-memory"),
    (["--max-memory", "0"], "--max-memory"),
    (["--no-such-option"], "no-such-option"),
    (["--ranks", "1024", "-b", "4M", "-e", "4M", "--verify"], "--verify"),  # 8 GiB of buffers
    (["--ranks", "4", "--window", "1"], "--window"),  # a ring has no window
    (["--pattern", "all_to_all", "--ranks", "4", "--window", "4"], "--window"),  # not below ranks
    (["--pattern", "all_to_all", "--ranks", "4", "--window", "1", "--trigger", "receiver"],
     "--window"),
]
for args, option in BAD:
    # Defaults for a tiny valid run, overridden by the case's own options.
    opts = {"--ranks": "2", "-b": "64K", "-e": "64K", "-n": "1", "-w": "0"}
    cmd, i = [], 0
    while i < len(args):
        if args[i] in opts and i + 1 < len(args):
            opts[args[i]] = args[i + 1]
            i += 2
        else:
            cmd.append(args[i])
            i += 1
    r = run([x for kv in opts.items() for x in kv] + cmd)
    check(r.returncode == 2 and option in r.stderr,
          f"{' '.join(args)} -> exit 2 naming {option} (got {r.returncode}: {r.stderr.strip()[:160]})")

# ---- A known run: JSON fields, busbw arithmetic, determinism ---------------
with tempfile.TemporaryDirectory() as tmp:
    j1, j2 = os.path.join(tmp, "a.json"), os.path.join(tmp, "b.json")
    csv = os.path.join(tmp, "csv")
    base = ["--pattern", "ring", "--ranks", "4", "-b", "64K", "-e", "256K", "-f", "2",
            "-n", "3", "-w", "1", "--cc", "dcqcn", "--verify", "--loss", "0.5%",
            "--recovery", "sr", "-q"]
    r1 = run(base + ["--json", j1, "--csv", csv])
    check(r1.returncode == 0, f"known run exits 0 (got {r1.returncode}: {r1.stderr[-300:]})")
    r2 = run(base + ["--json", j2])
    with open(j1) as f:
        a = json.load(f)
    with open(j2) as f:
        b = json.load(f)
    check(a == b, "same command twice -> identical JSON")
    for key in ("pattern", "collective", "ranks", "channels", "bus_factor", "iterations",
                "results", "avg_busbw_gbps", "mode", "testbed", "sim", "runs"):
        check(key in a, f"JSON has {key}")
    check(a["pattern"] == "ring" and a["ranks"] == 4, "JSON pattern and ranks")
    check([x["size"] for x in a["results"]] == [65536, 131072, 262144], "JSON sizes from -b/-e/-f")
    check(abs(a["bus_factor"] - 2 * 3 / 4) < 1e-12, "bus factor 2(n-1)/n")
    check(a["sim"]["link_losses"] > 0 and a["sim"]["retransmits"] > 0,
          "loss injected and recovered (link_losses, retransmits > 0)")
    for x in a["results"]:
        for key in ("size", "count", "time_us", "algbw_gbps", "busbw_gbps", "wrong", "jct_ns",
                    "step_p99_ns"):
            check(key in x, f"result {x.get('size')} has {key}")
        check(x["wrong"] == 0, f"size {x['size']}: #wrong 0 with loss")
        check(x["count"] == x["size"] // 4, f"size {x['size']}: count = size/4")
        # algbw = S / t (GB/s = 1e9 B/s), busbw = algbw x 2(n-1)/n.
        algbw = x["size"] / (x["time_us"] * 1e3)
        check(abs(x["algbw_gbps"] - algbw) < 1e-9 * max(1, algbw), f"size {x['size']}: algbw = S/t")
        check(abs(x["busbw_gbps"] - algbw * 1.5) < 1e-9 * max(1, algbw),
              f"size {x['size']}: busbw = algbw x 1.5")
        check(x["jct_ns"]["p50"] <= x["jct_ns"]["p99"] <= x["jct_ns"]["max"], "jct p50 <= p99 <= max")
    # The table prints the same busbw (2 decimals).
    rows = [l.split() for l in r1.stdout.splitlines() if l and not l.startswith("#")]
    table = [r for r in rows if len(r) == 9 and r[0].isdigit()]
    check(len(table) == 3, f"3 table rows (got {len(table)})")
    for row, x in zip(table, a["results"]):
        check(int(row[0]) == x["size"] and row[2] == "float" and row[3] == "sum",
              f"row {row[0]}: size, type, redop")
        check(abs(float(row[7]) - x["busbw_gbps"]) <= 0.005 + 1e-9, f"row {row[0]}: busbw column")
        check(row[8] == "0", f"row {row[0]}: #wrong column 0")
    # An exact case: one 4-rank ring of 64 KiB, no loss, no CC. Every step
    # moves S/N = 16 KiB (4 frames of 4096 B payload) per rank; busbw must
    # follow from the printed time, and stay below the 100G line rate
    # (12.5 GB/s of frames; payload share 4096/4178 of it).
    r = run(["--ranks", "4", "-b", "64K", "-e", "64K", "-n", "2", "-w", "0", "--json", "-", "-q"])
    check(r.returncode == 0, "exact run exits 0")
    e = json.loads(r.stdout)["results"][0]
    check(e["busbw_gbps"] < 12.5 * 4096 / 4178, "busbw below the payload line rate")
    check(abs(e["busbw_gbps"] - 65536 / (e["time_us"] * 1e3) * 1.5) < 1e-9, "busbw from time")
    for name in ("iterations.csv", "transfers.csv", "throughput.csv", "queues.csv"):
        p = os.path.join(csv, name)
        check(os.path.exists(p) and os.path.getsize(p) > 0, f"--csv wrote {name}")

# ---- An all-to-all with a window: a connection per transfer, verified -------
r = run(["--pattern", "all_to_all", "--ranks", "8", "-b", "64K", "-e", "64K", "-n", "2", "-w",
         "1", "--window", "2", "--channels", "2", "--verify", "--cc", "dcqcn", "--json", "-", "-q"])
check(r.returncode == 0, f"windowed all-to-all exits 0 (got {r.returncode}: {r.stderr[-300:]})")
if r.returncode == 0:
    j = json.loads(r.stdout)
    run0 = j["runs"][0]
    # 8 x 7 messages of 2 channels, 3 iterations; at most 8 ranks x 2 messages x 2 channels open.
    check(j["window"] == 2 and j["results"][0]["wrong"] == 0, "window in the JSON, #wrong 0")
    check(run0["connections"] == 3 * 8 * 7 * 2,
          f"a connection per transfer and iteration (got {run0['connections']})")
    check(0 < run0["connections_open_max"] <= 8 * 2 * 2,
          f"at most ranks x window x channels open (got {run0['connections_open_max']})")

# ---- Several congestion controls: one run each, then a table side by side ---
with tempfile.TemporaryDirectory() as d:
    r = run(["--ranks", "4", "-b", "1M", "-e", "1M", "-n", "2", "-w", "0", "--cc", "none,hpcc",
             "--background", "0-2", "--verify", "--json", os.path.join(d, "r.json"),
             "--csv", d, "--plot", "-q"])
    check(r.returncode == 0, f"--cc none,hpcc exits 0 ({r.stderr.strip()[-300:]})")
    testbeds = [l for l in r.stdout.splitlines() if l.startswith("# testbed:")]
    check(len(testbeds) == 2, "one testbed line per algorithm")
    check(len(testbeds) == 2 and "cc none" in testbeds[0] and "int off" in testbeds[0]
          and "acks on AckReq" in testbeds[0], "none: INT off, ACKs on AckReq")
    check(len(testbeds) == 2 and "cc hpcc" in testbeds[1] and "int on" in testbeds[1]
          and "acks every 1 packet(s)" in testbeds[1], "hpcc: INT on, an ACK per packet")
    side = r.stdout[r.stdout.find("side by side"):].splitlines()[2:]
    names = [l.split()[0] for l in side if l.strip() and not l.startswith("#")]
    check(names[:2] == ["none", "hpcc"], f"the comparison table has a row per algorithm ({names})")
    j = json.load(open(os.path.join(d, "r.json")))
    check([x["testbed"]["cc"] for x in j.get("comparison", [])] == ["none", "hpcc"],
          "JSON: one entry per algorithm under 'comparison'")
    check(all(x["results"][0]["wrong"] == 0 for x in j.get("comparison", [])), "JSON: #wrong 0")
    check("acks_without_int" not in r.stderr and "warning" not in r.stderr,
          "no INT warning when INT is on for hpcc")
    for cc in ("none", "hpcc"):
        check(os.path.exists(os.path.join(d, cc, "iterations.csv")), f"--csv wrote {cc}/")
        check(os.path.exists(os.path.join(d, cc, "queue.png")), f"--plot drew {cc}/queue.png")
    for png in ("jct_cdf.png", "queue.png", "throughput.png"):
        check(os.path.getsize(os.path.join(d, png)) > 10000, f"--plot drew the comparison {png}")

# HPCC with INT turned off runs on its initial window and says so once.
r = run(["--ranks", "2", "-b", "1M", "-e", "1M", "-n", "1", "-w", "0", "--cc", "hpcc",
         "--int", "off", "-q"])
check(r.returncode == 0, "hpcc --int off still completes")
check(r.stderr.count("steers by INT") == 1, "hpcc --int off: one warning that INT is missing")

# Outputs cut short (here by a file size limit, as a full disk would) are an
# error naming the file, never truncated files and exit 0.
def limit_file_size(limit):
    def apply():
        import resource
        import signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes fail instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


with tempfile.TemporaryDirectory() as d:
    r = subprocess.run([EXE, "--ranks", "16", "-b", "64K", "-e", "64K", "--csv",
                        os.path.join(d, "csv"), "-q"], capture_output=True, text=True,
                       timeout=120, preexec_fn=limit_file_size(65536))
    check(r.returncode != 0 and "transfers.csv: could not be written whole" in r.stderr,
          f"--csv cut short by a file size limit: exit {r.returncode}, "
          f"stderr {r.stderr.strip()[-200:]!r}")
    r = subprocess.run([EXE, "--ranks", "2", "-b", "4K", "-e", "4K", "--json",
                        os.path.join(d, "r.json"), "-q"], capture_output=True, text=True,
                       timeout=120, preexec_fn=limit_file_size(512))
    check(r.returncode == 1 and "--json: " in r.stderr and "could not be written whole" in r.stderr,
          f"--json cut short by a file size limit: exit {r.returncode}, "
          f"stderr {r.stderr.strip()[-200:]!r}")

# The plotter on a directory that is not there says so, without a traceback.
plotter = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                       "pktgen-plot")
p = subprocess.run([plotter, "/nonexistent/dir"], capture_output=True, text=True)
check(p.returncode == 2 and "no such directory" in p.stderr and "Traceback" not in p.stderr,
      "pktgen-plot on a missing directory: a message and exit 2")

# The plotter's memory does not grow with the run: a long run's CSVs (here
# 1.6 M throughput samples, 8 ranks over 2 s at 10 us) are streamed into
# bounded series. Kept whole, as rows of dicts, they took over 1 GB.
with tempfile.TemporaryDirectory() as d:
    with open(os.path.join(d, "iterations.csv"), "w") as f:
        f.write("iteration,bytes,warmup,start_ns,end_ns,jct_ns,wrong\n0,1048576,0,0,2000000000,2000000000,-1\n")
    with open(os.path.join(d, "transfers.csv"), "w") as f:
        f.write("bytes,step,latency_ns\n1048576,0,1000\n")
    with open(os.path.join(d, "throughput.csv"), "w") as f:
        f.write("time_ns,rank,tx_bytes,tx_gbps,utilisation\n")
        f.writelines(f"{t * 10000},{r},125000,100.000,1.0000\n"
                     for t in range(200000) for r in range(8))
    with open(os.path.join(d, "queues.csv"), "w") as f:
        f.write("time_ns,switch,port,peer,tc,bytes\n")
        f.writelines(f"{t * 10000},s0,0,h0,3,{t % 5000}\n" for t in range(200000))
    # A fresh process whose only child is the plotter reports its peak RSS.
    probe = ("import resource, subprocess, sys; "
             "rc = subprocess.run(sys.argv[1:], capture_output=True).returncode; "
             "print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    p = subprocess.run([sys.executable, "-c", probe, plotter, d], capture_output=True,
                       text=True, timeout=300)
    rc, peak_kib = (int(x) for x in p.stdout.split())
    check(rc == 0 and os.path.exists(os.path.join(d, "throughput.png")),
          f"pktgen-plot on 1.6 M samples: exit 0 (got {rc})")
    check(peak_kib < 250 * 1024,
          f"pktgen-plot on 1.6 M samples: peak RSS {peak_kib // 1024} MiB < 250 MiB")

# ---- The tree against the bound --------------------------------------------
# Pipelined in 8 KiB chunks by default, the double binary tree keeps at
# least 0.8 of the link-rate bound (100 Gb/s x 4096/4178 payload share) at
# 64 MiB on the default testbed; moving whole steps it reached 0.35. The
# header names the default chunk, and --chunk still overrides it.
BOUND = 100e9 / 8 * 4096 / 4178 / 1e9
r = run(["--pattern", "tree", "--ranks", "8", "-b", "64M", "-e", "64M", "-n", "1", "-w", "1",
         "--json", "-", "-q"])
check(r.returncode == 0, f"tree 64 MiB exits 0 ({r.stderr[-300:]})")
if r.returncode == 0:
    j = json.loads(r.stdout)
    x = j["results"][0]
    check(x["busbw_gbps"] >= 0.8 * BOUND,
          f"tree at 64 MiB: busbw {x['busbw_gbps']:.2f} >= 0.8 x {BOUND:.2f}")
    check(x["chunk_bytes"] == 8192 and j["chunk_bytes"] == 0, "tree: 8 KiB chunks by default")
    check(j["sim"]["switch_drops"] == 0, "tree: no switch drops")
    check("chunk 8192 (tree default" in r.stderr, "tree: the header names the default chunk")
r = run(["--pattern", "tree", "--ranks", "8", "-b", "1M", "-e", "1M", "-n", "1", "-w", "0",
         "--chunk", "256K", "--verify", "--json", "-", "-q"])
check(r.returncode == 0 and json.loads(r.stdout)["results"][0]["chunk_bytes"] == 262144
      and json.loads(r.stdout)["results"][0]["wrong"] == 0, "tree: --chunk overrides, verified")

# ---- Runs that cannot fit in memory are refused before they start ----------
# The estimate is a floor: a run given exactly its own peak resident set
# as --max-memory runs, and one given a quarter of it is refused (the
# floor is within 4x of the truth), on the two shapes that fill memory:
# all-to-all (a QP pair per rank pair) and the ring (millions of transfers).


def peak_kib(args):
    """Runs droce-pktgen; its exit status and peak resident set (KiB)."""
    p = subprocess.Popen([EXE] + args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    return os.waitstatus_to_exitcode(status), usage.ru_maxrss


FABRIC = ["--topology", "leaf_spine", "--hosts-per-leaf", "16", "--spines", "4", "--cc", "dcqcn",
          "-n", "1", "-w", "0", "-q"]
for shape in (["--pattern", "all_to_all", "--ranks", "128", "-b", "64K", "-e", "64K"],
              ["--pattern", "all_to_all", "--ranks", "512", "-b", "64K", "-e", "64K",
               "--window", "8"],
              ["--pattern", "ring", "--ranks", "256", "-b", "1M", "-e", "1M"]):
    rc, peak = peak_kib(shape + FABRIC)
    check(rc == 0, f"{shape[1]}: runs (exit {rc}), peak {peak} KiB")
    rc, _ = peak_kib(shape + FABRIC + ["--max-memory", f"{peak}K"])
    check(rc == 0, f"{shape[1]}: --max-memory at its peak still runs (exit {rc})")
    r = run(shape + FABRIC + ["--max-memory", f"{peak // 4}K"])
    check(r.returncode == 2 and "--ranks" in r.stderr and "(--max-memory)" in r.stderr,
          f"{shape[1]}: --max-memory at a quarter of its peak is refused: {r.stderr.strip()}")
# Refused without building anything: 134 M transfers of the 8192-rank ring
# take more than 16 GiB, and the message says what runs such a ring
# instead.
r = run(["--pattern", "ring", "--ranks", "8192", "-b", "1M", "-e", "1M"] + FABRIC
        + ["--max-memory", "8G"])
check(r.returncode == 2 and "134201344 transfers" in r.stderr and "droce-sim" in r.stderr,
      f"ring at 8192 ranks refused up front: {r.stderr.strip()}")
# An all-to-all refused for its rank pairs' connections says a window
# would hold fewer; with one, the estimate counts the window's.
a2a = ["--pattern", "all_to_all", "--ranks", "4096", "-b", "1M", "-e", "1M"] + FABRIC
r = run(a2a + ["--max-memory", "8G"])
check(r.returncode == 2 and "--window" in r.stderr,
      f"all-to-all at 4096 ranks refused, naming --window: {r.stderr.strip()}")
r = run(a2a + ["--window", "16", "--max-memory", "1M"])
need = re.search(r"at least ([0-9.]+) GiB", r.stderr)
check(r.returncode == 2 and need and 1 < float(need.group(1)) < 8 and "--window" not in r.stderr,
      f"with --window 16 its estimate is the window's connections: {r.stderr.strip()}")

# ---- --mode dpdk hands over or says it is not built -------------------------
r = run(["--mode", "dpdk", "--help"])
dpdk = os.path.join(os.path.dirname(EXE), "droce-pktgen-dpdk")
if not os.path.exists(dpdk):
    check(r.returncode == 2 and "--mode" in r.stderr, "--mode dpdk without droce-pktgen-dpdk: exit 2")

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
