#!/usr/bin/env python3
"""The transport's prefetches are in the compiled code (src/transport/prefetch.h).

No test can see a prefetch at run time, and a compiler may drop one: GCC 12
removed the responder's call of prefetch_next_packet as dead code once it
had analysed the helper as changing nothing, which cost the simulator's
real-payload incast ~10 % (docs/PERFORMANCE.md, "Simulator"). So this reads
the disassembly of the transport library and asserts that the functions
that must prefetch still contain a prefetch instruction.

    prefetch_kept_test.py OBJDUMP LIBRARY
"""
import re
import subprocess
import sys

# Itanium-mangled names (GCC and clang alike): what prefetches, and why.
MUST_PREFETCH = {
    "_ZNK5droce9transport9QueuePair6gatherERKNS0_7SendWqeEmjPhPb":
        "requester gather: the next packet's source bytes",
    "_ZN5droce9transport9QueuePair13execute_writeERKNS_4wire12ParsedPacketE":
        "responder WRITE placement: the next packet's destination bytes",
}


def functions_with_prefetch(objdump, library):
    out = subprocess.run([objdump, "-d", "--no-show-raw-insn", library], check=True,
                         capture_output=True, text=True).stdout
    found, current = set(), None
    for line in out.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.+)>:$", line)
        if m:
            current = m.group(1)
        elif current and re.search(r"\bprefetch(t0|t1|t2|nta|w)?\b", line):
            found.add(current)
    return found


def main():
    objdump, library = sys.argv[1], sys.argv[2]
    found = functions_with_prefetch(objdump, library)
    missing = [f"{name} ({why})" for name, why in MUST_PREFETCH.items() if name not in found]
    if missing:
        print("no prefetch instruction left in:\n  " + "\n  ".join(missing))
        return 1
    print(f"prefetches present in {len(MUST_PREFETCH)} functions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
