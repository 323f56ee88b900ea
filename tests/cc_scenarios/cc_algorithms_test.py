#!/usr/bin/python3
"""The experiment scripts' list of algorithms (scripts/cc_algorithms.py)
is the registry's, name for name and in order: an algorithm added to the
registry is offered by the scripts, and none they offer is missing.

usage: cc_algorithms_test.py SCRIPTS_DIR DROCE_CC_REPLAY
"""
import re
import subprocess
import sys

scripts, replay = sys.argv[1], sys.argv[2]
sys.path.insert(0, scripts)
from cc_algorithms import ALGORITHMS  # noqa: E402

listing = subprocess.run([replay, "--list"], stdout=subprocess.PIPE, text=True, check=True).stdout
# One "NAME: description" line per algorithm, its parameters indented below.
registry = tuple(m.group(1) for m in re.finditer(r"^([a-z0-9_]+): ", listing, re.MULTILINE))
if not registry:
    sys.exit(f"no algorithm in `droce-cc-replay --list`:\n{listing}")
if ALGORITHMS != registry:
    sys.exit(f"scripts/cc_algorithms.py lists {ALGORITHMS}, the registry {registry}")
print(f"{len(registry)} algorithms: {', '.join(registry)}")
