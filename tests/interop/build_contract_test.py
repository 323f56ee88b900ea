"""What build_packet writes, parse must accept: for every opcode and payload
length 0..8 (all pad counts), wire_gen (build_packet) either refuses the
spec or produces a frame droce-decode reports ok.

IBA 9.2.5 / 9.7.3.1.4: only the last (or only) packet of a message may carry
pad bytes, so FIRST and MIDDLE packets with a payload that is not a multiple
of 4 can not be built; build_packet must refuse them (return 0) rather than
write a pad count its own parser rejects as bad_pad.

usage: build_contract_test.py DROCE_DECODE WIRE_GEN
"""

import json
import os
import subprocess
import tempfile

import roce_oracle as ro


def main():
    decode, wire_gen = ro.tool_paths()
    fails = ro.Failures("build-contract")
    with tempfile.TemporaryDirectory(prefix="droce-interop-") as d:
        for op in sorted(ro.OPCODES):
            name, _, has_payload, pos = ro.OPCODES[op]
            for n in range(9) if has_payload else [0]:
                spec = {"opcode": op, "payload_len": n}
                specs = os.path.join(d, "spec.jsonl")
                with open(specs, "w") as f:
                    f.write(json.dumps(spec) + "\n")
                pcap = os.path.join(d, "out.pcap")
                r = subprocess.run([wire_gen, specs, pcap], capture_output=True,
                                   text=True)
                must_refuse = pos in ("first", "middle") and n % 4 != 0
                if r.returncode != 0:
                    fails.check(must_refuse, f"{name} payload {n}: build refused "
                                f"a valid packet: {r.stderr.strip()}")
                    continue
                fails.check(not must_refuse,
                            f"{name} payload {n}: build_packet accepted a "
                            f"{pos.upper()} packet with pad (IBA 9.2.5)")
                out = ro.decode_json(decode, pcap)
                fails.check(len(out) == 1 and out[0]["ok"],
                            f"{name} payload {n}: parse rejects what build "
                            f"wrote: {out[0]['error'] if out else 'nothing'}")
    fails.finish()


if __name__ == "__main__":
    main()
