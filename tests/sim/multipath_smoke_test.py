#!/usr/bin/env python3
"""scripts/multipath-experiment at its smoke size (8 ranks, 2 MiB ring, 1:1,
ecmp/spray/adaptive, PFC off, 0 and 1 % loss): every run finishes, the table,
the CSV and the plots are written, and the hashed ECMP run loads its busiest
uplink more than the spraying and adaptive ones.

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
                        "--smoke", "--sim", sim, "--out", out, "-j", "2"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        print(p.stdout, p.stderr)
        sys.exit(f"multipath-experiment exited {p.returncode}")
    with open(os.path.join(out, "results.csv")) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 6, rows
    for r in rows:
        assert r["done"] == "True", r
        assert 0 < float(r["of_bound"]) <= 1.0, r
    spread = {(r["mode"], r["loss"]): float(r["uplink_max_over_mean"]) for r in rows}
    for loss in ("0.0", "0.01"):
        assert spread[("ecmp", loss)] > spread[("spray", loss)], spread
        assert spread[("ecmp", loss)] > 1.5, spread
    assert open(os.path.join(out, "table.md")).read().count("\n") == 8
    try:
        import matplotlib  # noqa: F401
        for png in ("jct.png", "uplinks.png"):
            assert os.path.getsize(os.path.join(out, png)) > 0, png
    except ImportError:
        pass
    print("multipath smoke: ok")


if __name__ == "__main__":
    main()
