"""droce-decode --json flags corrupted packets.

droce builds packets of every opcode family (wire_gen), then bits are flipped
(seeded) in the IP, UDP, BTH, extension-header, payload/pad and ICRC areas.
Each corrupted frame must be reported not ok, except flips in the fields the
ICRC masks on purpose because routers may change them (IBA annex A17.4.1):
  - IPv4 TOS, TTL, checksum: masked by the ICRC but covered by the IPv4
    header checksum, so still caught (as bad_ip_checksum);
  - IPv6 traffic class, flow label, hop limit: nothing covers them, so the
    packet must still decode ok, showing the changed DSCP/ECN/flow label/hop
    limit (this is how a switch's ECN marking reaches the receiver);
  - UDP checksum: masked, and RoCEv2 does not use it: decodes ok;
  - BTH byte 4 (FECN, BECN, reserved): masked: decodes ok with the new
    FECN/BECN.
On top of single flips, every header bit of a few packets is flipped
exhaustively, and random 2-3 bit errors and bursts up to 32 bits are put in
the ICRC-covered area (CRC-32 catches all of those at these lengths).

usage: corruption_test.py DROCE_DECODE WIRE_GEN
"""

import os
import random
import tempfile

import roce_oracle as ro

PER_FAMILY_PER_IP = 50
SEED = 0xC0FFEE


def layout(frame, spec):
    l3 = ro.l3_offset(frame)
    v6 = ":" in spec["src_ip"]
    l4 = l3 + (40 if v6 else 20)
    bth = l4 + 8
    ext = bth + 12
    _, ext_len = ro.ext_offsets(spec["opcode"])
    pay = ext + ext_len
    icrc = len(frame) - 4
    return {"v6": v6, "ip": (l3, l4), "udp": (l4, bth), "bth": (bth, ext),
            "ext": (ext, pay), "payload": (pay, icrc),
            "icrc": (icrc, len(frame))}


def expectation(lay, byte, bit):
    """What a flip of `bit` (7 = MSB) of frame byte `byte` must do:
    ("error", name or None for any error) or ("ok", {field: new value fn})."""
    l3, l4 = lay["ip"]
    if l3 <= byte < l4:
        off = byte - l3
        if not lay["v6"]:
            if off in (1, 8, 10, 11):  # TOS, TTL, checksum
                return ("error", "bad_ip_checksum")
            return ("error", None)
        nibble_hi = bit >= 4
        if off == 0:
            return ("error", "bad_ip_version") if nibble_hi else ("ok", None)
        if off in (1, 2, 3, 7):  # TC, flow label, hop limit
            return ("ok", None)
        if off in (4, 5):
            return ("error", None)
        if off == 6:
            return ("error", "not_udp")
        return ("error", "bad_icrc")  # addresses
    b0, _ = lay["udp"]
    if b0 <= byte < b0 + 8:
        off = byte - b0
        if off in (6, 7):
            return ("ok", None)
        if off in (2, 3):
            return ("error", "not_rocev2_port")
        if off in (4, 5):
            return ("error", None)
        return ("error", "bad_icrc")
    b0, _ = lay["bth"]
    if byte == b0 + 4:
        return ("ok", None)
    if b0 <= byte < b0 + 12:
        return ("error", None)
    return ("error", "bad_icrc")


def flipped_fields(lay, frame, byte, bit):
    """Fields of droce-decode's JSON that an undetected flip changes."""
    f = bytearray(frame)
    f[byte] ^= 1 << bit
    l3, _ = lay["ip"]
    exp = {}
    if lay["v6"]:
        word = int.from_bytes(f[l3:l3 + 4], "big")
        tc = (word >> 20) & 0xFF
        exp.update(dscp=tc >> 2, ecn=tc & 3, flow_label=word & 0xFFFFF,
                   ttl=f[l3 + 7])
    b0, _ = lay["bth"]
    exp.update(fecn=bool(f[b0 + 4] & 0x80), becn=bool(f[b0 + 4] & 0x40))
    return exp


def main():
    decode, wire_gen = ro.tool_paths()
    rng = random.Random(SEED)
    specs = ro.generate_specs(rng, PER_FAMILY_PER_IP)
    fails = ro.Failures("corruption")
    with tempfile.TemporaryDirectory(prefix="droce-interop-") as d:
        frames = ro.wire_gen(wire_gen, specs, os.path.join(d, "clean.pcap"))
        cases = []  # (description, frame, expectation, expected fields)
        for i, (s, fr) in enumerate(zip(specs, frames)):
            lay = layout(fr, s)
            name = f"pkt {i + 1} {ro.OPCODES[s['opcode']][0]} " \
                   f"{'v6' if lay['v6'] else 'v4'}"
            cases.append((f"{name} clean", fr, ("ok", None), {}))
            # One single-bit flip in each area present.
            for area in ("ip", "udp", "bth", "ext", "payload", "icrc"):
                lo, hi = lay[area]
                if lo == hi:
                    continue
                byte, bit = rng.randrange(lo, hi), rng.randrange(8)
                c = bytearray(fr)
                c[byte] ^= 1 << bit
                exp = expectation(lay, byte, bit)
                fields = flipped_fields(lay, fr, byte, bit) if exp[0] == "ok" else {}
                cases.append((f"{name} {area} byte {byte} bit {bit}", bytes(c),
                              exp, fields))
            # A 2-3 bit error, or a burst up to 32 bits, in the ICRC-covered
            # area from the BTH's byte 5 on (byte 4 is masked).
            lo, hi = lay["bth"][0] + 5, len(fr)
            c = bytearray(fr)
            if rng.random() < 0.5:
                for pos in rng.sample(range(lo * 8, hi * 8), rng.choice((2, 3))):
                    c[pos // 8] ^= 1 << (pos % 8)
                what = "multi-bit"
            else:
                n = rng.randrange(2, 33)
                start = rng.randrange(lo * 8, hi * 8 - n + 1)
                for pos in (start, start + n - 1):  # burst ends are set
                    c[pos // 8] ^= 1 << (pos % 8)
                for pos in range(start + 1, start + n - 1):
                    if rng.random() < 0.5:
                        c[pos // 8] ^= 1 << (pos % 8)
                what = f"burst {n}"
            cases.append((f"{name} {what}", bytes(c), ("error", None), {}))
        # Exhaustive: every bit from the IP header to the end of the
        # extension headers, for a few packets of both families.
        picks = [i for i, s in enumerate(specs) if s["opcode"] in (0x0B, 0x12, 0x65)]
        for i in picks[::max(1, len(picks) // 12)]:
            s, fr = specs[i], frames[i]
            lay = layout(fr, s)
            for byte in range(lay["ip"][0], lay["ext"][1]):
                for bit in range(8):
                    c = bytearray(fr)
                    c[byte] ^= 1 << bit
                    exp = expectation(lay, byte, bit)
                    fields = flipped_fields(lay, fr, byte, bit) if exp[0] == "ok" else {}
                    cases.append((f"pkt {i + 1} exhaustive byte {byte} bit {bit}",
                                  bytes(c), exp, fields))
        pcap = os.path.join(d, "corrupt.pcap")
        ro.write_pcap(pcap, [c[1] for c in cases])
        out = ro.decode_json(decode, pcap)
    fails.eq(len(out), len(cases), "number of decoded packets")
    stats = {"detected": 0, "masked_ok": 0}
    for (what, _, (kind, err), fields), j in zip(cases, out):
        if kind == "ok":
            fails.check(j["ok"] and j["icrc_ok"] is True,
                        f"{what}: must decode ok (masked field), got {j['error']}")
            for k, v in fields.items():
                fails.eq(j.get(k), v, f"{what}: {k}")
            stats["masked_ok"] += "clean" not in what
        else:
            fails.check(not j["ok"], f"{what}: corruption not detected")
            if err is not None:
                fails.eq(j["error"], err, f"{what}: error")
            if j["error"] == "bad_icrc":
                # An ICRC mismatch still shows the decoded packet.
                fails.check(j["icrc_ok"] is False and "opcode" in j and
                            "payload_length" in j,
                            f"{what}: bad_icrc without decoded fields")
            stats["detected"] += 1
    print(f"{len(cases)} frames: {stats['detected']} corruptions detected, "
          f"{stats['masked_ok']} flips in masked fields decoded ok")
    fails.check(stats["detected"] > 5000 and stats["masked_ok"] > 100,
                f"too few cases exercised: {stats}")
    fails.finish()


if __name__ == "__main__":
    main()
