#!/usr/bin/python3
"""Regenerates the seed corpus tests/fuzz/corpus/parse/ (committed).

    /usr/bin/python3 tests/fuzz/make_corpus.py BUILD/tests/interop/wire_gen

Seeds are small droce-built packets (wire_gen -> build_packet): every opcode
over IPv4 and IPv6, some 802.1Q-tagged, with short payloads of every pad
count; plus a few hand-made neighbours of valid packets: IPv4 with options,
a trailing Ethernet FCS, a bad ICRC, and non-RoCE frames (ARP, VXLAN-port
UDP). Deterministic: the same wire_gen gives the same files.
"""

import os
import random
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "interop"))
import roce_oracle as ro  # noqa: E402


def ipv4_with_options(frame):
    """Inserts a 4-byte IPv4 option (NOP x4) and fixes lengths/checksums."""
    l3 = ro.l3_offset(frame)
    f = bytearray(frame[:l3 + 20] + b"\x01\x01\x01\x01" + frame[l3 + 20:])
    f[l3] = 0x46
    f[l3 + 2:l3 + 4] = struct.pack(">H", struct.unpack(">H", f[l3 + 2:l3 + 4])[0] + 4)
    f[l3 + 10:l3 + 12] = b"\0\0"
    s = sum(struct.unpack(">12H", bytes(f[l3:l3 + 24])))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    f[l3 + 10:l3 + 12] = struct.pack(">H", ~s & 0xFFFF)
    f[-4:] = ro.icrc_bytes(bytes(f[l3:-4]), False)
    return bytes(f)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    wire_gen = sys.argv[1]
    out_dir = os.path.join(HERE, "corpus", "parse")
    rng = random.Random(0xF022)
    specs = []
    for i, op in enumerate(sorted(ro.OPCODES)):
        for v6 in (False, True):
            n = rng.choice((0, 1, 2, 3, 4, 8, 13, 32))
            s = ro.random_spec(rng, op, v6, vlan=(i + v6) % 4 == 0, payload_len=n)
            s["name"] = f"{ro.OPCODES[op][0].lower()}_{'v6' if v6 else 'v4'}"
            specs.append(s)
    with tempfile.TemporaryDirectory() as d:
        raw_dir = os.path.join(d, "raw")
        os.mkdir(raw_dir)
        specs_path = os.path.join(d, "specs.jsonl")
        import json
        with open(specs_path, "w") as f:
            for s in specs:
                f.write(json.dumps(s) + "\n")
        subprocess.run([wire_gen, "--raw-dir", raw_dir, specs_path,
                        os.path.join(d, "seeds.pcap")], check=True)
        seeds = {n: open(os.path.join(raw_dir, n), "rb").read()
                 for n in sorted(os.listdir(raw_dir))}
    base = seeds["rc_rdma_write_only_v4"]
    seeds["extra_ipv4_options"] = ipv4_with_options(base)
    seeds["extra_trailing_fcs"] = base + b"\x12\x34\x56\x78"
    bad = bytearray(base)
    bad[-1] ^= 0xFF
    seeds["extra_bad_icrc"] = bytes(bad)
    seeds["extra_arp"] = bytes.fromhex("ffffffffffff0200000000010806") + bytes(28)
    vx = bytearray(seeds["rc_send_only_v4"])
    udp = ro.l3_offset(vx) + 20
    vx[udp + 2:udp + 4] = struct.pack(">H", 4789)
    seeds["extra_udp_4789"] = bytes(vx)
    ce = bytearray(seeds["rc_acknowledge_v6"])
    l3 = ro.l3_offset(ce)
    ce[l3 + 1] |= 0x30
    ce[l3 + 40 + 8 + 4] |= 0x80
    seeds["extra_ecn_ce_fecn_v6"] = bytes(ce)  # masked: ICRC still valid

    os.makedirs(out_dir, exist_ok=True)
    for old in os.listdir(out_dir):
        os.remove(os.path.join(out_dir, old))
    for name, data in seeds.items():
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(data)
    print(f"wrote {len(seeds)} seeds to {out_dir}")


if __name__ == "__main__":
    main()
