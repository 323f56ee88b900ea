"""Shared helpers for the interop tests: an independent description of the
RoCEv2 wire format (IBA vol. 1 9.2-9.3, annex A17), random packet specs for
wire_gen, an independent ICRC, and small pcap/process helpers.

Nothing here imports or mirrors droce's C++ tables: the extension-header
layout per opcode and the ICRC masking are written from the spec, so that
agreement with droce means something.
"""

import ipaddress
import json
import struct
import subprocess
import sys
import zlib

ROCE_PORT = 4791

# Extension headers in IBA 9.3 order, with their sizes.
DETH, RETH, ATOMIC_ETH, AETH, ATOMIC_ACK_ETH, IMM, IETH, CNP_RSVD = (
    "DETH", "RETH", "AtomicETH", "AETH", "AtomicAckETH", "ImmDt", "IETH",
    "CNP")
EXT_SIZE = {DETH: 8, RETH: 16, ATOMIC_ETH: 28, AETH: 4, ATOMIC_ACK_ETH: 8,
            IMM: 4, IETH: 4, CNP_RSVD: 16}

# (name suffix, extension headers, carries payload, position) for the RC/UC
# operation codes (IBA 9.2.1 table 38, 9.3 headers per opcode).
_SEND_WRITE = {
    0x00: ("SEND_FIRST", [], True, "first"),
    0x01: ("SEND_MIDDLE", [], True, "middle"),
    0x02: ("SEND_LAST", [], True, "last"),
    0x03: ("SEND_LAST_WITH_IMMEDIATE", [IMM], True, "last"),
    0x04: ("SEND_ONLY", [], True, "only"),
    0x05: ("SEND_ONLY_WITH_IMMEDIATE", [IMM], True, "only"),
    0x06: ("RDMA_WRITE_FIRST", [RETH], True, "first"),
    0x07: ("RDMA_WRITE_MIDDLE", [], True, "middle"),
    0x08: ("RDMA_WRITE_LAST", [], True, "last"),
    0x09: ("RDMA_WRITE_LAST_WITH_IMMEDIATE", [IMM], True, "last"),
    0x0A: ("RDMA_WRITE_ONLY", [RETH], True, "only"),
    0x0B: ("RDMA_WRITE_ONLY_WITH_IMMEDIATE", [RETH, IMM], True, "only"),
}
_RC_ONLY = {
    0x0C: ("RDMA_READ_REQUEST", [RETH], False, "only"),
    0x0D: ("RDMA_READ_RESPONSE_FIRST", [AETH], True, "first"),
    0x0E: ("RDMA_READ_RESPONSE_MIDDLE", [], True, "middle"),
    0x0F: ("RDMA_READ_RESPONSE_LAST", [AETH], True, "last"),
    0x10: ("RDMA_READ_RESPONSE_ONLY", [AETH], True, "only"),
    0x11: ("ACKNOWLEDGE", [AETH], False, "only"),
    0x12: ("ATOMIC_ACKNOWLEDGE", [AETH, ATOMIC_ACK_ETH], False, "only"),
    0x13: ("COMPARE_SWAP", [ATOMIC_ETH], False, "only"),
    0x14: ("FETCH_ADD", [ATOMIC_ETH], False, "only"),
    0x16: ("SEND_LAST_WITH_INVALIDATE", [IETH], True, "last"),
    0x17: ("SEND_ONLY_WITH_INVALIDATE", [IETH], True, "only"),
}


def _opcodes():
    t = {}
    for low, (n, ext, pay, pos) in _SEND_WRITE.items():
        t[0x00 | low] = ("RC_" + n, ext, pay, pos)
        t[0x20 | low] = ("UC_" + n, ext, pay, pos)
    for low, (n, ext, pay, pos) in _RC_ONLY.items():
        t[low] = ("RC_" + n, ext, pay, pos)
    t[0x64] = ("UD_SEND_ONLY", [DETH], True, "only")
    t[0x65] = ("UD_SEND_ONLY_WITH_IMMEDIATE", [DETH, IMM], True, "only")
    t[0x81] = ("CNP", [CNP_RSVD], False, "only")  # annex A17.9.2
    return t


OPCODES = _opcodes()

# Opcode families the tests must each cover with many packets.
FAMILIES = {
    "rc_send": [0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x16, 0x17],
    "rc_write": [0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B],
    "uc_send": [0x20, 0x21, 0x22, 0x23, 0x24, 0x25],
    "uc_write": [0x26, 0x27, 0x28, 0x29, 0x2A, 0x2B],
    "read_request": [0x0C],
    "read_response": [0x0D, 0x0E, 0x0F, 0x10],
    "ack_nak": [0x11],
    "atomic": [0x13, 0x14],
    "atomic_ack": [0x12],
    "ud_send": [0x64, 0x65],
    "cnp": [0x81],
}
assert sorted(sum(FAMILIES.values(), [])) == sorted(OPCODES)


def ext_headers(op):
    return OPCODES[op][1]


def ext_offsets(op):
    """Offsets of each extension header from the end of the BTH."""
    off, res = 0, {}
    for h in ext_headers(op):
        res[h] = off
        off += EXT_SIZE[h]
    return res, off


def encode_ext(op, s):
    """The extension-header bytes for spec `s`, written from IBA 9.3."""
    out = b""
    for h in ext_headers(op):
        if h == DETH:  # Q_Key, reserved byte, source QP (9.3.2)
            out += struct.pack(">IB", s["deth_qkey"], 0)
            out += s["deth_src_qp"].to_bytes(3, "big")
        elif h == RETH:  # VA, R_Key, DMA length (9.3.3)
            out += struct.pack(">QII", s["reth_va"], s["reth_rkey"],
                               s["reth_dma_length"])
        elif h == ATOMIC_ETH:  # VA, R_Key, swap/add, compare (9.3.4)
            out += struct.pack(">QIQQ", s["atomic_va"], s["atomic_rkey"],
                               s["atomic_swap_add"], s["atomic_compare"])
        elif h == AETH:  # syndrome, MSN (9.3.5)
            out += bytes([s["aeth_syndrome"]]) + s["aeth_msn"].to_bytes(3, "big")
        elif h == ATOMIC_ACK_ETH:  # original remote data (9.3.6)
            out += struct.pack(">Q", s["atomic_ack_original"])
        elif h == IMM:
            out += struct.pack(">I", s["imm_data"])
        elif h == IETH:
            out += struct.pack(">I", s["ieth_rkey"])
        elif h == CNP_RSVD:
            out += bytes(16)
    return out


EXT_FIELDS = {
    DETH: ["deth_qkey", "deth_src_qp"],
    RETH: ["reth_va", "reth_rkey", "reth_dma_length"],
    ATOMIC_ETH: ["atomic_va", "atomic_rkey", "atomic_swap_add",
                 "atomic_compare"],
    AETH: ["aeth_syndrome", "aeth_msn"],
    ATOMIC_ACK_ETH: ["atomic_ack_original"],
    IMM: ["imm_data"],
    IETH: ["ieth_rkey"],
    CNP_RSVD: [],
}
ALL_EXT_FIELDS = sum(EXT_FIELDS.values(), [])


def pad_count(n):
    return (4 - n % 4) % 4


# --------------------------------------------------------------------------
# Random specs (the wire_gen input format; see wire_gen.cc).

_EDGE_SIZES = [0, 1, 2, 3, 4, 5, 7, 8, 255, 256, 1023, 1024, 4093, 4094,
               4095, 4096]


def _random_mac(rng):
    b = bytearray(rng.randbytes(6))
    b[0] = (b[0] & 0xFE) | 0x02  # unicast, locally administered
    return ":".join(f"{x:02x}" for x in b)


def _random_ip(rng, v6):
    if v6:
        return str(ipaddress.IPv6Address(rng.getrandbits(128)))
    return str(ipaddress.IPv4Address(rng.getrandbits(32)))


def random_spec(rng, op, v6, vlan=None, payload_len=None):
    s = {
        "opcode": op,
        "src_mac": _random_mac(rng), "dst_mac": _random_mac(rng),
        "src_ip": _random_ip(rng, v6), "dst_ip": _random_ip(rng, v6),
        "dscp": rng.randrange(64), "ecn": rng.randrange(4),
        "ttl": rng.randrange(1, 256),
        "udp_src_port": 0xC000 | rng.getrandbits(14),
        "solicited": rng.random() < 0.5, "mig_req": rng.random() < 0.5,
        "pkey": rng.getrandbits(16), "fecn": rng.random() < 0.2,
        "becn": rng.random() < 0.2 or op == 0x81,
        "dest_qp": rng.getrandbits(24), "ack_req": rng.random() < 0.5,
        "psn": rng.getrandbits(24),
    }
    if vlan is None:
        vlan = rng.random() < 0.3
    if vlan:
        s.update(vlan=True, vlan_id=rng.randrange(4096), pcp=rng.randrange(8))
    if v6:
        s["flow_label"] = rng.getrandbits(20)
    for h in ext_headers(op):
        for f in EXT_FIELDS[h]:
            bits = {"deth_src_qp": 24, "aeth_msn": 24, "aeth_syndrome": 8}.get(
                f, 64 if f.endswith(("_va", "swap_add", "compare", "original"))
                else 32)
            s[f] = rng.getrandbits(bits)
    if AETH in ext_headers(op) and rng.random() < 0.7:
        # Mostly meaningful syndromes (IBA 9.7.5.1.1): ACK with credits,
        # RNR NAK with a timer code, NAK codes 0..4.
        kind = rng.randrange(3)
        s["aeth_syndrome"] = [rng.randrange(32), 0x20 | rng.randrange(32),
                              0x60 | rng.randrange(5)][kind]
    name, _, has_payload, pos = OPCODES[op]
    if has_payload:
        if payload_len is None:
            payload_len = (rng.choice(_EDGE_SIZES) if rng.random() < 0.3
                           else rng.randrange(4097))
        if pos in ("first", "middle"):
            # Only the last/only packet of a message carries pad (IBA 9.2.5).
            payload_len -= payload_len % 4
        s["payload_hex"] = rng.randbytes(payload_len).hex()
    return s


def spec_payload(s):
    return bytes.fromhex(s.get("payload_hex", ""))


def generate_specs(rng, per_family_per_ip):
    """Every family, IPv4 and IPv6, `per_family_per_ip` packets each; the
    opcodes of a family round-robin so each one appears."""
    specs = []
    for fam, ops in FAMILIES.items():
        for v6 in (False, True):
            for i in range(per_family_per_ip):
                specs.append(random_spec(rng, ops[i % len(ops)], v6))
    return specs


# --------------------------------------------------------------------------
# Independent ICRC, IBA annex A17.4.1 (and 7.8.1): CRC-32 (zlib's) over
# 8 bytes of 0xFF standing in for the LRH, then the IP header, UDP header,
# BTH and the rest up to the ICRC, with the variant fields set to ones:
#   IPv4: TOS, TTL, header checksum;  IPv6: traffic class, flow label,
#   hop limit;  UDP checksum;  BTH byte 4 (FECN, BECN, reserved).
# Stored least significant byte first. scapy 2.5 only does IPv4, hence this.

def icrc(l3_to_icrc: bytes, v6: bool) -> int:
    m = bytearray(l3_to_icrc)
    if v6:
        ip_len = 40
        m[0] |= 0x0F                    # low nibble: traffic class high bits
        m[1] = m[2] = m[3] = 0xFF       # rest of TC + flow label
        m[7] = 0xFF                     # hop limit
    else:
        ip_len = (m[0] & 0x0F) * 4
        m[1] = 0xFF                     # TOS
        m[8] = 0xFF                     # TTL
        m[10] = m[11] = 0xFF            # header checksum
    m[ip_len + 6] = m[ip_len + 7] = 0xFF  # UDP checksum
    m[ip_len + 8 + 4] = 0xFF              # BTH FECN/BECN/reserved byte
    return zlib.crc32(b"\xff" * 8 + bytes(m)) & 0xFFFFFFFF


def icrc_bytes(l3_to_icrc: bytes, v6: bool) -> bytes:
    return struct.pack("<I", icrc(l3_to_icrc, v6))


def ipv4_header_ok(hdr: bytes) -> bool:
    """RFC 1071: the one's-complement sum over the header is 0xFFFF."""
    s = sum(struct.unpack(f">{len(hdr) // 2}H", hdr))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s == 0xFFFF


def l3_offset(frame: bytes) -> int:
    return 18 if frame[12:14] == b"\x81\x00" else 14


# --------------------------------------------------------------------------
# pcap (classic, microsecond) read/write without scapy.

def write_pcap(path, frames):
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, fr in enumerate(frames):
            f.write(struct.pack("<IIII", i // 1000, i % 1000 * 1000, len(fr),
                                len(fr)))
            f.write(fr)


def read_pcap(path):
    data = open(path, "rb").read()
    magic = struct.unpack("<I", data[:4])[0]
    assert magic == 0xA1B2C3D4, f"{path}: not a little-endian classic pcap"
    off, frames = 24, []
    while off < len(data):
        _, _, caplen, _ = struct.unpack("<IIII", data[off:off + 16])
        frames.append(data[off + 16:off + 16 + caplen])
        off += 16 + caplen
    return frames


# --------------------------------------------------------------------------
# Tools under test.

def tool_paths():
    """droce-decode and wire_gen paths from argv (meson passes them)."""
    if len(sys.argv) < 3:
        sys.exit(f"usage: {sys.argv[0]} DROCE_DECODE WIRE_GEN")
    return sys.argv[1], sys.argv[2]


def wire_gen(wire_gen_path, specs, out_pcap):
    specs_path = out_pcap + ".jsonl"
    with open(specs_path, "w") as f:
        for s in specs:
            f.write(json.dumps(s) + "\n")
    r = subprocess.run([wire_gen_path, specs_path, out_pcap],
                       capture_output=True, text=True)
    assert r.returncode == 0, f"wire_gen failed: {r.stderr}"
    frames = read_pcap(out_pcap)
    assert len(frames) == len(specs), (
        f"wire_gen wrote {len(frames)} frames for {len(specs)} specs")
    return frames


def decode_json(decode_path, pcap, *extra):
    r = subprocess.run([decode_path, "--json", *extra, pcap],
                       capture_output=True, text=True)
    assert r.returncode == 0, (
        f"droce-decode exited {r.returncode}: {r.stderr}")
    return [json.loads(line) for line in r.stdout.splitlines()]


class Failures:
    """Collects mismatches so one run reports all of them (up to a cap)."""

    def __init__(self, name):
        self.name, self.items, self.checks = name, [], 0

    def check(self, cond, msg):
        self.checks += 1
        if not cond:
            self.items.append(msg)

    def eq(self, got, want, what):
        self.check(got == want, f"{what}: got {got!r}, want {want!r}")

    def finish(self):
        if self.items:
            for m in self.items[:40]:
                print(f"FAIL {m}", file=sys.stderr)
            print(f"{self.name}: {len(self.items)} of {self.checks} checks "
                  f"failed", file=sys.stderr)
            sys.exit(1)
        print(f"{self.name}: all {self.checks} checks passed")

