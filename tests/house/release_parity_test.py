"""CI builds with buildtype=release and runs every suite on that build
(scripts/test, docs/DESIGN.md "Testing"), which is sound only while the
code behaves the same with and without NDEBUG: no assert() and no NDEBUG
in the C++ sources of the tree, tests included.

usage: release_parity_test.py SOURCE_ROOT"""

import os
import re
import sys

DIRS = ["src", "apps", "pktgen", "cc", "include", "tests"]
SUFFIXES = (".cc", ".h", ".cpp", ".hpp")
# assert( as a call (static_assert is a compile-time check, kept), NDEBUG
# anywhere.
FORBIDDEN = re.compile(r"(?<![\w])assert\s*\(|\bNDEBUG\b")


def main():
    root = sys.argv[1]
    found = []
    for d in DIRS:
        for dirpath, _, names in os.walk(os.path.join(root, d)):
            for name in names:
                if not name.endswith(SUFFIXES):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8") as f:
                    for no, line in enumerate(f, 1):
                        if FORBIDDEN.search(line):
                            found.append(f"{os.path.relpath(path, root)}:{no}: {line.strip()}")
    for f in found:
        print(f"depends on NDEBUG (release builds behave differently): {f}")
    sys.exit(1 if found else 0)


main()
