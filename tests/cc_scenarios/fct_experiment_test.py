#!/usr/bin/python3
"""scripts/fct-experiment in its small configuration (seconds):

- the same options and seed give byte-identical files (report, JSON, PNGs,
  droce-sim's outputs); another seed gives other flows;
- on a nearly empty fabric every flow's FCT is its ideal one (slowdown 1),
  which checks the ideal-FCT calibration the slowdowns divide by;
- every CC finishes every flow, and the report has a row per size bucket
  and a column per CC;
- under load HPCC keeps the switch queues and the short flows' tail below
  DCQCN's (the HPCC paper's Fig. 11 claim, here on FB_Hadoop at 50 % load);
- bad options exit 2 naming the option.

usage: fct_experiment_test.py SCRIPT DROCE_SIM
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile

script, sim = sys.argv[1], sys.argv[2]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL", what)


def run(out, *args):
    cmd = [sys.executable, script, "--small", "--sim", sim, "--out", out, *args]
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def digest(root):
    h = {}
    for d, _, files in os.walk(root):
        for f in sorted(files):
            p = os.path.join(d, f)
            with open(p, "rb") as fh:
                h[os.path.relpath(p, root)] = hashlib.sha256(fh.read()).hexdigest()
    return h


def results(out, name):
    with open(os.path.join(out, name, "results.json")) as f:
        return json.load(f)


with tempfile.TemporaryDirectory() as tmp:
    # Determinism: twice into the same directory, every file identical.
    args = ["--workload", "fb_hadoop", "--load", "0.5", "--cc", "none,dcqcn,hpcc", "--seed", "3"]
    r1 = run(tmp, *args)
    check(r1.returncode == 0, f"small run exit {r1.returncode}: {r1.stderr[-500:]}")
    first = digest(tmp)
    r2 = run(tmp, *args)
    check(r2.returncode == 0, f"second run exit {r2.returncode}")
    check(first == digest(tmp), "same seed: files differ between runs")
    check(r1.stdout == r2.stdout, "same seed: printed report differs")
    for f in ["fb_hadoop-0.5/report.md", "fb_hadoop-0.5/results.json",
              "fb_hadoop-0.5/slowdown.png", "fb_hadoop-0.5/queue_cdf.png",
              "fb_hadoop-0.5/hpcc/fct.csv", "fb_hadoop-0.5/hpcc/queues.csv"]:
        check(f in first, f"missing output {f}")
    check("fb_hadoop-0.5/hpcc/flows.csv" not in first, "flows.csv written (it is skipped)")

    res = results(tmp, "fb_hadoop-0.5")
    by = res["results"]
    check(by["none"]["flows"] >= 100, f"small FB_Hadoop run has {by['none']['flows']} flows")
    for cc, r in by.items():
        check(r["unfinished"] == 0, f"{cc}: {r['unfinished']} flows unfinished")
        check(r["flows"] == by["none"]["flows"], f"{cc}: a different flow count")
        check(len(r["slowdown"]["buckets"]) >= 4, f"{cc}: too few size buckets")
        fr = [f for _, f in r["queue_cdf"]]
        check(fr == sorted(fr) and fr and fr[-1] == 1.0, f"{cc}: queue CDF not a CDF: {fr}")
    report = open(os.path.join(tmp, "fb_hadoop-0.5", "report.md")).read()
    check("| size | flows | none | dcqcn | hpcc |" in report, "report header lacks the CC columns")
    for b in by["none"]["slowdown"]["buckets"]:
        check(f"| {b['bucket']} |" in report, f"report lacks bucket {b['bucket']}")

    # HPCC's claim against DCQCN on the same flows: shorter queues and a
    # shorter tail for the short flows (the first two buckets).
    h, d = by["hpcc"], by["dcqcn"]
    check(h["queue_bytes"]["p99"] < d["queue_bytes"]["p99"],
          f"queue p99 hpcc {h['queue_bytes']['p99']} >= dcqcn {d['queue_bytes']['p99']}")
    for b in range(2):
        hb, db = h["slowdown"]["buckets"][b], d["slowdown"]["buckets"][b]
        check(hb["p99"] < db["p99"], f"bucket {hb['bucket']}: p99 hpcc {hb['p99']} >= dcqcn {db['p99']}")

    # Another seed: other arrivals.
    r3 = run(tmp, "--workload", "fb_hadoop", "--load", "0.5", "--cc", "none", "--seed", "4",
             "--no-plot")
    check(r3.returncode == 0, f"seed 4 exit {r3.returncode}")
    check(results(tmp, "fb_hadoop-0.5")["results"]["none"]["slowdown"] != by["none"]["slowdown"],
          "another seed gave the same slowdowns")

    # Nearly empty fabric: every flow at its ideal FCT.
    r4 = run(tmp, "--workload", "fb_hadoop", "--load", "0.02", "--cc", "none", "--no-plot",
             "--arrivals", "10ms")
    check(r4.returncode == 0, f"low-load exit {r4.returncode}")
    low = results(tmp, "fb_hadoop-0.02")["results"]["none"]
    check(low["flows"] >= 20, f"low-load run has only {low['flows']} flows")
    for b in low["slowdown"]["buckets"]:
        if b["flows"]:
            check(0.97 <= b["p50"] <= 1.05, f"low load {b['bucket']}: p50 slowdown {b['p50']}")
    check(low["slowdown"]["all"]["p99"] <= 1.5, f"low load p99 slowdown {low['slowdown']['all']['p99']}")

    # Bad options: exit 2, the option named.
    for args, want in [(["--cc", "cubic"], "--cc: unknown algorithm \"cubic\""),
                       (["--workload", "nosuch"], "--workload: \"nosuch\""),
                       (["--load", "2"], "--load"),
                       (["--arrivals", "5parsecs"], "--arrivals")]:
        r = run(tmp, *args)
        check(r.returncode == 2 and want in r.stderr, f"{args}: exit {r.returncode}, {r.stderr!r}")

sys.exit(1 if failures else 0)
