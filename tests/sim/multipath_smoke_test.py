#!/usr/bin/env python3
"""scripts/multipath-experiment at its smoke size (8 ranks, 2 MiB ring, 1:1,
ecmp/spray/path_aware/adaptive, PFC off, 0 and 1 % loss) over two seeds:
every run finishes, the table, the CSVs and the plots are written, a point's
JCT p50 and p99 are taken over both seeds' runs, and the hashed ECMP run
loads its busiest uplink more than the spraying and adaptive ones. Then
the smoke modes at 1 % loss with a congestion control and the ring in two
slices: the scenarios carry both and the runs finish; and --cc is refused
by name where it cannot apply.

  multipath_smoke_test.py SOURCE_ROOT DROCE_SIM OUT_DIR
"""
import csv
import os
import shutil
import subprocess
import sys


def main():
    root, sim, out = sys.argv[1:4]
    shutil.rmtree(out, ignore_errors=True)
    p = subprocess.run([os.path.join(root, "scripts", "multipath-experiment"),
                        "--smoke", "--seeds", "2", "--sim", sim, "--out", out, "-j", "2"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        print(p.stdout, p.stderr)
        sys.exit(f"multipath-experiment exited {p.returncode}")
    with open(os.path.join(out, "results.csv")) as f:
        rows = list(csv.DictReader(f))
    with open(os.path.join(out, "runs.csv")) as f:
        runs = list(csv.DictReader(f))
    assert len(rows) == 8 and len(runs) == 16, (rows, runs)
    for r in rows:
        assert r["done"] == "True" and r["seeds"] == "2", r
        assert 0 < float(r["of_bound_p99"]) <= float(r["of_bound"]) <= 1.0, r
        # p50 and p99 of the two seeds' JCTs (one iteration each).
        jcts = sorted(int(x["jct_ns"]) for x in runs
                      if (x["mode"], x["loss"]) == (r["mode"], r["loss"]))
        assert len(jcts) == 2, jcts
        assert (round(jcts[0] / 1e3, 1), round(jcts[1] / 1e3, 1)) == \
            (float(r["jct_p50_us"]), float(r["jct_p99_us"])), (r, jcts)
    spread = {(r["mode"], r["loss"]): float(r["uplink_max_over_mean"]) for r in rows}
    for loss in ("0.0", "0.01"):
        assert spread[("ecmp", loss)] > spread[("spray", loss)], spread
        assert spread[("ecmp", loss)] > 1.5, spread
    assert open(os.path.join(out, "table.md")).read().count("\n") == 10
    try:
        import matplotlib  # noqa: F401
        for png in ("jct.png", "uplinks.png"):
            assert os.path.getsize(os.path.join(out, png)) > 0, png
    except ImportError:
        pass
    cc_out = out + "-cc"
    shutil.rmtree(cc_out, ignore_errors=True)
    p = subprocess.run([os.path.join(root, "scripts", "multipath-experiment"), "--smoke",
                        "--loss", "0.01", "--cc", "swift", "--slices", "2", "-j", "2",
                        "--no-plot", "--sim", sim, "--out", cc_out],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.returncode == 0, (p.stdout, p.stderr)
    with open(os.path.join(cc_out, "results.csv")) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4 and all(r["done"] == "True" for r in rows), rows
    runs_dir = os.path.join(cc_out, "runs")
    assert len(os.listdir(runs_dir)) == 4, os.listdir(runs_dir)
    for run in os.listdir(runs_dir):
        scenario = open(os.path.join(runs_dir, run, "scenario.toml")).read()
        assert 'cc = "swift"' in scenario and "slices = 2" in scenario, scenario
    for bad in (["--cc", "reno"], ["--real-time", "--cc", "swift"]):
        p = subprocess.run([os.path.join(root, "scripts", "multipath-experiment"), *bad,
                            "--sim", sim, "--out", cc_out],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert p.returncode == 2 and "--cc" in p.stderr, (bad, p.returncode, p.stderr)
    print("multipath smoke: ok")


if __name__ == "__main__":
    main()
