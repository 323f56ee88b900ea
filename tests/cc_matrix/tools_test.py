"""Every registered congestion control in every virtual-time tool that takes
--cc: droce-sim on each shipped scenario, and droce-pktgen's sim mode on
each collective pattern, alone on the testbed and with background flows
sharing its links.

What must hold, for every algorithm:
  - droce-sim: every flow of every shipped scenario completes (exit 0),
    with no retransmission timeout where the scenario loses nothing; the
    fixed-duration two-flow scenario moves at least 80 % of the bottleneck
    link's bytes over its run;
  - droce-pktgen: every pattern completes each iteration with no failed
    work request and #wrong 0 (verified data), alone and beside background
    flows, and with no timeout where nothing is lost;
  - alone (an uncongested path), its busbw is within a band of the `none`
    run's: at least 0.85x. A window or rate that the algorithm holds below
    the line rate with nothing to react to shows here (HPCC targets eta =
    0.95 of the line, so 0.85 leaves it room).

usage: tools_test.py DROCE_SIM DROCE_PKTGEN EXAMPLES_DIR"""

import json
import os
import subprocess
import sys

sim_exe, pktgen_exe, examples = sys.argv[1:4]
failed = 0


def check(cond, what):
    global failed
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failed += 1


def run(cmd, timeout=300):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


# The registry's names, as droce-sim's --cc help lists them: "(none, dcqcn, ...)".
help_text = run([sim_exe, "--help"]).stdout
cc_line = next(line for line in help_text.splitlines() if line.strip().startswith("--cc "))
ccs = [n.strip() for n in cc_line[cc_line.index("(") + 1:cc_line.index(")")].split(",")]
check(set(ccs) >= {"none", "dcqcn", "timely", "hpcc", "swift"},
      f"droce-sim --help names the algorithms ({', '.join(ccs)})")

# ---- droce-sim on the shipped scenarios -------------------------------------
scenarios = sorted(os.path.join(root, f) for root in (os.path.join(examples, "sim"),
                                                      os.path.join(examples, "cc"))
                   for f in os.listdir(root) if f.endswith(".toml"))
for path in scenarios:
    name = os.path.basename(path)
    for cc in ccs:
        r = run([sim_exe, path, "--cc", cc, "--json"])
        try:
            j = json.loads(r.stdout)
        except ValueError:
            check(False, f"droce-sim {name} --cc {cc}: JSON summary (exit {r.returncode}, "
                         f"{r.stderr.strip()[-300:]})")
            continue
        lossy = "lossy" in name
        if name == "two-flow.toml":
            # Two long flows for the scenario's fixed duration: none finishes.
            check(j["flows_failed"] == 0 and j["timeouts"] == 0,
                  f"droce-sim {name} --cc {cc}: runs its duration, no failure or timeout")
            continue
        check(r.returncode == 0 and j["all_done"] and j["flows_failed"] == 0,
              f"droce-sim {name} --cc {cc}: {j['flows_completed']}/{len(j['flows'])} flows done "
              f"(exit {r.returncode})")
        if not lossy:
            check(j["timeouts"] == 0, f"droce-sim {name} --cc {cc}: no timeouts ({j['timeouts']})")

# ---- droce-pktgen sim mode on every pattern -----------------------------------
PATTERNS = ["ring", "halving_doubling", "tree", "all_gather", "reduce_scatter",
            "all_to_all", "incast", "permutation"]
BAND = 0.85


def pktgen(pattern, cc, background):
    cmd = [pktgen_exe, "--pattern", pattern, "--ranks", "4", "-b", "1M", "-e", "1M", "-n", "2",
           "-w", "1", "--cc", cc, "--verify", "--json", "-", "-q"]
    if background:
        cmd += ["--background", "0-2", "--background", "3-2"]
    r = run(cmd)
    try:
        return r, json.loads(r.stdout)
    except ValueError:
        return r, None


for pattern in PATTERNS:
    alone = {}
    for cc in ccs:
        for background in (False, True):
            what = f"droce-pktgen --pattern {pattern} --cc {cc}" + \
                   (" with background flows" if background else "")
            r, j = pktgen(pattern, cc, background)
            ran = j is not None and r.returncode == 0
            if not check(ran, f"{what}: exit 0" +
                         ("" if ran else f" (got {r.returncode}: {r.stderr.strip()[-300:]})")):
                continue
            row = j["results"][0]
            check(row["wrong"] == 0 and all(not x["stalled"] and x["failed_wrs"] == 0
                                            for x in j["runs"]),
                  f"{what}: completes, #wrong {row['wrong']}")
            check(j["sim"]["timeouts"] == 0, f"{what}: no timeouts ({j['sim']['timeouts']})")
            if not background:
                alone[cc] = row["busbw_gbps"]
    for cc, bw in alone.items():
        check(bw >= BAND * alone["none"],
              f"droce-pktgen --pattern {pattern} --cc {cc} alone: busbw {bw:.2f} >= "
              f"{BAND} x none's {alone['none']:.2f} GB/s")

# HPCC on droce-pktgen's default testbed (8 ranks, one 100 G switch, no
# congestion) keeps within 10 % of DCQCN's busbw: INT on, an ACK per packet.
busbw = {}
for cc in ("dcqcn", "hpcc"):
    r = run([pktgen_exe, "--pattern", "ring", "--ranks", "8", "-b", "16M", "-e", "16M", "-n", "2",
             "-w", "1", "--cc", cc, "--json", "-", "-q"])
    busbw[cc] = json.loads(r.stdout)["results"][0]["busbw_gbps"] if r.returncode == 0 else 0
check(busbw["hpcc"] >= 0.9 * busbw["dcqcn"],
      f"default testbed, 16 MiB ring: hpcc busbw {busbw['hpcc']:.2f} >= 0.9 x dcqcn's "
      f"{busbw['dcqcn']:.2f} GB/s")

print(f"{failed} failure(s)")
sys.exit(1 if failed else 0)
