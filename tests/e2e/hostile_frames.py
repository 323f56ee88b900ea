"""The frames of the hostile traffic run (hostile_test.py): one file of
adversarial frames with a legitimate flow woven through it, replayed in a
loop toward droce-endpoint.

Frames are packed here from IBA vol. 1 9.2-9.3 (BTH, extension headers),
RoCEv2 annex A17 (UDP 4791, the ICRC over IPv4/IPv6), IEEE 802.1Qbb (PFC)
and RFC 791 (IPv4 options, fragments); the ICRC is the interop tests'
independent one (tests/interop/roce_oracle.py). Deterministic: one seed
gives the same file.

The layout the endpoint is configured with (config() below):

  registered memory, VAs adjacent so that one region's end is the next
  one's start:
    [0x00000, 0x10000)  GUARD_LO   local access only (no remote access)
    [0x10000, 0x20000)  VICTIM     remote read/write/atomic: attacks land here
    [0x20000, 0x30000)  READ_ONLY  remote read only
    [0x30000, 0x40000)  LEGIT      the legitimate flow's region
    [0x40000, 0x50000)  GUARD_HI   local access only

  QPs: LEGIT_QPN (RC, its own addresses), and victims of the attacks: RC
  QPs for PSN storms, READ floods, keys and mutations, one with selective
  repeat, a UC and a UD QP.

Only LEGIT_QPN's own flow may write LEGIT: no hostile frame that could
pass the checks before execution carries LEGIT's key, LEGIT_QPN or the
legitimate flow's addresses (random and mutated frames containing any of
those bytes are discarded), and the frames aimed at LEGIT_QPN each fail
one check before the PSN is looked at (source or destination address,
P_Key, ICRC, IPv4 checksum, fragment). Every victim region's bytes may
change; the guard and read-only regions' must not.
"""

import os
import random
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "interop"))
import roce_oracle as ro  # noqa: E402

EP_MAC = bytes.fromhex("020000000001")
PEER_MAC = bytes.fromhex("020000000002")
EP_IP, PEER_IP = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
LEGIT_EP_IP, LEGIT_PEER_IP = bytes([10, 77, 91, 1]), bytes([10, 77, 91, 2])

REGION = 0x10000
GUARD_LO, VICTIM, READ_ONLY, LEGIT, GUARD_HI = range(5)
KEYS = {GUARD_LO: 0x1111, VICTIM: 0x2222, READ_ONLY: 0x3333, LEGIT: 0xC3D2E1,
        GUARD_HI: 0x5555}
NAMES = {GUARD_LO: "guard_lo", VICTIM: "victim", READ_ONLY: "read_only", LEGIT: "legit",
         GUARD_HI: "guard_hi"}
FILL = {GUARD_LO: 0xEE, VICTIM: 0x00, READ_ONLY: 0x5A, LEGIT: 0x00, GUARD_HI: 0xEE}


def iova(r):
    return r * REGION


LEGIT_QPN, LEGIT_PEER_QPN = 0xA5C3E1, 0xB4D2F0
V_PSN, V_READ, V_KEYS, V_MUT, V_SR, V_UC, V_UD = 0x101, 0x102, 0x103, 0x104, 0x105, 0x106, 0x107
VICTIMS = [V_PSN, V_READ, V_KEYS, V_MUT, V_SR, V_UC, V_UD]
# Random, mutated and broken frames go to these; V_PSN and V_SR get only
# the PSN storm's valid requests, so that they stay in RTS (a fatal NAK
# puts a QP in ERR for good, IBA 9.9.3) and keep executing all run long.
TARGETS = [V_READ, V_KEYS, V_MUT, V_UC, V_UD]
STORM_DEPTH = 64  # max_dest_rd_atomic of V_PSN and V_SR: the storm's READs never exceed it
PEER_QPN = 0x22
UD_QKEY = 0x11111111
V_RQ_PSN = 0x1000
READ_DEPTH = 2  # max_dest_rd_atomic of V_READ
MTU = 1024
PKEY = 0xFFFF

# Opcodes (IBA 9.2.1 table 38); UC = RC | 0x20, UD = 0x60 | SEND ONLY (0x64).
SEND_ONLY, SEND_ONLY_IMM, SEND_ONLY_INV = 0x04, 0x05, 0x17
WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST, WRITE_ONLY = 0x06, 0x07, 0x08, 0x0A
READ_REQ, ACK, CMP_SWAP, FETCH_ADD = 0x0C, 0x11, 0x13, 0x14
UD_SEND_ONLY = 0x64
ETH_IPV4, ETH_IPV6, ETH_VLAN, ETH_MAC_CONTROL = 0x0800, 0x86DD, 0x8100, 0x8808


def config(dump_dir):
    """droce-endpoint's TOML for the layout above; region i dumps to
    dump_dir/<name>.bin."""
    out = []
    for r in (GUARD_LO, VICTIM, READ_ONLY, LEGIT, GUARD_HI):
        access = {GUARD_LO: ["local_write"], GUARD_HI: ["local_write"],
                  READ_ONLY: ["remote_read"],
                  VICTIM: ["local_write", "remote_write", "remote_read", "remote_atomic"],
                  LEGIT: ["local_write", "remote_write", "remote_read", "remote_atomic"]}[r]
        out.append(f"""[[mr]]
key = {KEYS[r]:#x}
length = {REGION:#x}
iova = {iova(r):#x}
fill = "byte:{FILL[r]:#04x}"
dump = "{os.path.join(dump_dir, NAMES[r] + '.bin')}"
access = {access!r}
""".replace("'", '"'))

    def qp(qpn, typ="rc", local=EP_IP, peer=PEER_IP, peer_qpn=PEER_QPN, extra=""):
        return f"""[[qp]]
qpn = {qpn:#x}
peer_qpn = {peer_qpn:#x}
type = "{typ}"
rq_psn = {0 if qpn == LEGIT_QPN else V_RQ_PSN:#x}
mtu = {MTU}
local_ip = "{'.'.join(map(str, local))}"
peer_ip = "{'.'.join(map(str, peer))}"
local_mac = "02:00:00:00:00:01"
peer_mac = "02:00:00:00:00:02"
max_send_wr = 1024
{extra}
"""
    out.append(qp(LEGIT_QPN, local=LEGIT_EP_IP, peer=LEGIT_PEER_IP, peer_qpn=LEGIT_PEER_QPN))
    out.append(qp(V_PSN, extra=f"max_dest_rd_atomic = {STORM_DEPTH}"))
    out.append(qp(V_READ, extra=f"max_dest_rd_atomic = {READ_DEPTH}"))
    out.append(qp(V_KEYS))
    out.append(qp(V_MUT))
    out.append(qp(V_SR, extra=f"selective_repeat = true\nmax_dest_rd_atomic = {STORM_DEPTH}"))
    out.append(qp(V_UC, typ="uc"))
    out.append(qp(V_UD, typ="ud", extra=f"qkey = {UD_QKEY:#x}\n"
                  f"recv = {{ count = 8, length = 1024, mr = {KEYS[VICTIM]:#x}, "
                  f"offset = 0xc000 }}"))
    return "\n".join(out)


# --------------------------------------------------------------------------
# Frame building

def ipv4_checksum(hdr):
    s = sum(struct.unpack(f">{len(hdr) // 2}H", hdr))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def eth(ethertype, vlan=None, src=PEER_MAC, dst=EP_MAC):
    h = dst + src
    if vlan is not None:
        h += struct.pack(">HH", ETH_VLAN, vlan)
    return h + struct.pack(">H", ethertype)


def bth(opcode, dqpn, psn, ackreq=False, pad=0, pkey=PKEY, tver=0, se=False):
    b0 = opcode
    b1 = (int(se) << 7) | (1 << 6) | ((pad & 3) << 4) | (tver & 0xF)  # M set (RoCEv2)
    return struct.pack(">BBHII", b0, b1, pkey, dqpn & 0xFFFFFF,
                       (int(ackreq) << 31) | (psn & 0xFFFFFF))


def reth(va, rkey, length):
    return struct.pack(">QII", va, rkey, length)


def atomic_eth(va, rkey, swap_add, compare=0):
    return struct.pack(">QIQQ", va, rkey, swap_add, compare)


def deth(qkey, src_qp=PEER_QPN):
    return struct.pack(">II", qkey, src_qp & 0xFFFFFF)


def roce(bth_and_rest, src=PEER_IP, dst=EP_IP, sport=0xC022, flags=0x4000, options=b"",
         vlan=None, fix_icrc=True, dscp=26, ecn=2, v6=False):
    """Ethernet + IPv4 (or IPv6) + UDP 4791 + the BTH and what follows,
    then the ICRC (annex A17.4.1; wrong on purpose with fix_icrc=False)."""
    udp_len = 8 + len(bth_and_rest) + 4
    udp = struct.pack(">HHHH", sport, ro.ROCE_PORT, udp_len, 0)
    if v6:
        ip = struct.pack(">IHBB", (6 << 28) | ((dscp << 2 | ecn) << 20), udp_len, 17, 64)
        ip += b"\xfe\x80" + b"\0" * 10 + src + b"\xfe\x80" + b"\0" * 10 + dst
        l2 = eth(ETH_IPV6, vlan)
    else:
        ihl = 5 + len(options) // 4
        ip = bytearray(struct.pack(">BBHHHBBH4s4s", 0x40 | ihl, dscp << 2 | ecn,
                                   ihl * 4 + udp_len, 0x1234, flags, 64, 17, 0, src, dst))
        ip += options
        ip[10:12] = struct.pack(">H", ipv4_checksum(bytes(ip)))
        ip = bytes(ip)
        l2 = eth(ETH_IPV4, vlan)
    body = ip + udp + bth_and_rest
    crc = ro.icrc_bytes(body, v6)
    if not fix_icrc:
        crc = bytes(b ^ 0xA5 for b in crc)
    return l2 + body + crc


def fix_checksums(frame):
    """Recomputes the IPv4 header checksum (if the header is readable) and
    the ICRC of a frame someone changed, leaving every other byte as it is,
    so the change reaches the checks behind them."""
    f = bytearray(frame)
    l3 = ro.l3_offset(f)
    if len(f) < l3 + 20 + 8 + 12 + 4:
        return bytes(f)
    et = struct.unpack(">H", f[l3 - 2:l3])[0]
    if et == ETH_IPV4:
        ihl = (f[l3] & 0x0F) * 4
        if ihl < 20 or len(f) < l3 + ihl + 8 + 12 + 4:
            return bytes(f)
        f[l3 + 10:l3 + 12] = b"\0\0"
        f[l3 + 10:l3 + 12] = struct.pack(">H", ipv4_checksum(bytes(f[l3:l3 + ihl])))
        f[-4:] = ro.icrc_bytes(bytes(f[l3:-4]), False)
    elif et == ETH_IPV6 and len(f) >= l3 + 40 + 8 + 12 + 4:
        f[-4:] = ro.icrc_bytes(bytes(f[l3:-4]), True)
    return bytes(f)


def pfc(enable, quanta, opcode=0x0101, length=None):
    """IEEE 802.1Qbb PFC frame (MAC control, opcode 0x0101, class-enable
    vector, eight pause times), padded to 60 bytes."""
    f = (bytes.fromhex("0180c2000001") + PEER_MAC + struct.pack(">HHH", ETH_MAC_CONTROL, opcode,
                                                                enable) +
         struct.pack(">8H", *quanta))
    f = f.ljust(60, b"\0")
    return f if length is None else f[:length]


# --------------------------------------------------------------------------
# The legitimate flow

def legit_flow(rng):
    """The legitimate flow: WRITE messages of 1 to 4096 bytes
    (FIRST/MIDDLE/LAST at MTU 1024, ONLY), a zero-length WRITE, one
    FETCH_ADD and one COMPARE_SWAP (both on zeros, so each answers with
    original 0), then READs of written ranges. Returns its frames in PSN
    order, `image` (the region once every request executed exactly once),
    `reads` ((first PSN, offset, length) each), `atomics` (their PSNs) and
    `psns` (the PSN after the flow)."""
    image = bytearray([FILL[LEGIT]] * REGION)
    frames = []
    psn = 0
    off = 0
    sizes = [1, 4, 7, 64, 100, 1000, 1023, 1024, 1025, 2048, 3000, 4096] * 4
    rng.shuffle(sizes)
    base = iova(LEGIT)

    def send(op, ext, payload=b"", ackreq=False):
        nonlocal psn
        pad = (-len(payload)) % 4
        frames.append(roce(bth(op, LEGIT_QPN, psn, ackreq, pad) + ext + payload + b"\0" * pad,
                           src=LEGIT_PEER_IP, dst=LEGIT_EP_IP))
        psn += 1

    for n in sizes:
        data = bytes(rng.getrandbits(8) for _ in range(n))
        image[off:off + n] = data
        va = base + off
        if n <= MTU:
            send(WRITE_ONLY, reth(va, KEYS[LEGIT], n), data)
        else:
            chunks = [data[i:i + MTU] for i in range(0, n, MTU)]
            send(WRITE_FIRST, reth(va, KEYS[LEGIT], n), chunks[0])
            for c in chunks[1:-1]:
                send(WRITE_MIDDLE, b"", c)
            send(WRITE_LAST, b"", chunks[-1])
        off += (n + 63) & ~63
    assert off <= REGION - 64
    send(WRITE_ONLY, reth(base + off, KEYS[LEGIT], 0), b"")  # zero length: legal, no bytes
    fa_off, cs_off = REGION - 16, REGION - 8
    add, swap = 0x0102030405060708, 0x1122334455667788
    # Atomics act on 8 bytes in the responder's memory order (host order
    # here, little-endian), IBA 9.4.5.
    send(FETCH_ADD, atomic_eth(base + fa_off, KEYS[LEGIT], add))
    image[fa_off:fa_off + 8] = struct.pack("<Q", add)
    send(CMP_SWAP, atomic_eth(base + cs_off, KEYS[LEGIT], swap, 0), ackreq=True)
    image[cs_off:cs_off + 8] = struct.pack("<Q", swap)
    atomics = [psn - 2, psn - 1]
    # READs of what the flow wrote, the atomics' bytes included. They come
    # after every write, so each execution (the first and every duplicate)
    # must answer with the final bytes.
    reads = []
    for r_off, n in [(0, 4096), (4096, 1025), (20000, 3000), (REGION - 1024, 1024),
                     (REGION - 16, 16), (100, 1)]:
        reads.append((psn, r_off, n))
        frames.append(roce(bth(READ_REQ, LEGIT_QPN, psn) + reth(base + r_off, KEYS[LEGIT], n),
                           src=LEGIT_PEER_IP, dst=LEGIT_EP_IP))
        psn += max(1, -(-n // MTU))
    return {"frames": frames, "image": bytes(image), "reads": reads, "atomics": atomics,
            "psns": psn}


def near_legit(rng, n):
    """Frames for LEGIT_QPN at plausible PSNs with LEGIT's key that each
    fail one check before the responder looks at the PSN."""
    out = []
    for i in range(n):
        psn = rng.randrange(0, 400)
        body = bth(WRITE_ONLY, LEGIT_QPN, psn) + reth(iova(LEGIT), KEYS[LEGIT], 64) + b"\xbd" * 64
        kind = i % 6
        if kind == 0:    # source address not the connection's peer (IBA 9.6.1)
            out.append(roce(body, src=PEER_IP, dst=LEGIT_EP_IP))
        elif kind == 1:  # destination address not the QP's own
            out.append(roce(body, src=LEGIT_PEER_IP, dst=EP_IP))
        elif kind == 2:  # another partition (IBA 10.9)
            b = bth(WRITE_ONLY, LEGIT_QPN, psn, pkey=0x8001) + body[12:]
            out.append(roce(b, src=LEGIT_PEER_IP, dst=LEGIT_EP_IP))
        elif kind == 3:  # bad ICRC
            out.append(roce(body, src=LEGIT_PEER_IP, dst=LEGIT_EP_IP, fix_icrc=False))
        elif kind == 4:  # bad IPv4 header checksum
            f = bytearray(roce(body, src=LEGIT_PEER_IP, dst=LEGIT_EP_IP))
            f[24] ^= 0x5A
            out.append(bytes(f))
        else:            # a fragment (first of several: MF set)
            out.append(roce(body, src=LEGIT_PEER_IP, dst=LEGIT_EP_IP, flags=0x2000))
    return out


# --------------------------------------------------------------------------
# Attacks on the victim QPs

def victim_key(rng):
    """A key an attacker would try: a victim's, a guard's, the read-only
    region's, a stale or guessed one (never LEGIT's)."""
    return rng.choice([KEYS[VICTIM]] * 4 + [KEYS[GUARD_LO], KEYS[GUARD_HI], KEYS[READ_ONLY],
                                            0x2200 | rng.randrange(256), rng.getrandbits(32),
                                            0])


def psn_storm(rng, n):
    """Valid WRITEs and READs to V_PSN and V_SR (selective repeat) at PSNs
    all over the 24-bit space, around the expected PSN and far from it;
    bursts of duplicates of one PSN."""
    out = []
    for i in range(n):
        qpn = V_SR if i % 3 == 0 else V_PSN
        if i % 5 == 0:
            psn = V_RQ_PSN + rng.randrange(-64, 256)
        elif i % 5 == 1:
            psn = rng.getrandbits(24)
        else:
            psn = V_RQ_PSN + (i // 5) % 128  # runs: in order the first time
        off = rng.randrange(0, REGION // 2, 8)
        if i % 7 == 0:
            body = bth(READ_REQ, qpn, psn) + reth(iova(VICTIM) + off, KEYS[VICTIM], 512)
        else:
            n_bytes = rng.choice([4, 64, 256, MTU])
            body = (bth(WRITE_ONLY, qpn, psn, ackreq=rng.random() < 0.3) +
                    reth(iova(VICTIM) + off, KEYS[VICTIM], n_bytes) + b"\x77" * n_bytes)
        out.append(roce(body))
    return out


def read_flood(rng, n):
    """READs to V_READ in runs of 16 consecutive PSNs, more than its
    max_dest_rd_atomic (2) outstanding; 4 KiB each from the victim and
    the read-only region; atomics among them (they share the depth)."""
    out = []
    psn = V_RQ_PSN
    for i in range(n):
        if i % 16 == 0:
            psn = V_RQ_PSN + rng.randrange(0, 64)
        region = VICTIM if i % 3 else READ_ONLY
        if i % 11 == 0:
            body = bth(FETCH_ADD, V_READ, psn) + atomic_eth(iova(VICTIM) + 8 * rng.randrange(64),
                                                            KEYS[VICTIM], 1)
        else:
            body = bth(READ_REQ, V_READ, psn) + reth(iova(region) + rng.randrange(0, 0x8000),
                                                     KEYS[region], rng.choice([4096, 65536 - 0x8000]))
        out.append(roce(body))
        psn += 1
    return out


def bad_keys_and_addresses(rng, n):
    """To V_KEYS (and V_MUT): WRITEs, READs and atomics with wrong or stale
    keys, the read-only region's key for a WRITE, a guard's for anything,
    VAs just before and after a region (into its neighbour, which the VAs
    make adjacent), lengths that overflow the 64-bit VA, misaligned
    atomics."""
    out = []
    for i in range(n):
        qpn = rng.choice([V_KEYS, V_KEYS, V_MUT])
        psn = V_RQ_PSN + rng.randrange(0, 32)
        kind = i % 8
        key = victim_key(rng)
        if kind == 0:    # one byte past the victim region's end, into READ_ONLY
            body = (bth(WRITE_ONLY, qpn, psn) + reth(iova(READ_ONLY) - 63, KEYS[VICTIM], 64) +
                    b"\x66" * 64)
        elif kind == 1:  # one byte before the victim region, into GUARD_LO
            body = (bth(WRITE_ONLY, qpn, psn) + reth(iova(VICTIM) - 1, KEYS[VICTIM], 64) +
                    b"\x66" * 64)
        elif kind == 2:  # a read-only or guard key for a WRITE
            k = rng.choice([KEYS[READ_ONLY], KEYS[GUARD_LO], KEYS[GUARD_HI]])
            va = iova({KEYS[READ_ONLY]: READ_ONLY, KEYS[GUARD_LO]: GUARD_LO,
                       KEYS[GUARD_HI]: GUARD_HI}[k]) + 256
            body = bth(WRITE_ONLY, qpn, psn) + reth(va, k, 64) + b"\x66" * 64
        elif kind == 3:  # VA + length wraps around 2^64
            body = bth(READ_REQ, qpn, psn) + reth(0xFFFFFFFFFFFFFF00, KEYS[VICTIM], 0x1000)
        elif kind == 4:  # misaligned atomic, atomic on the read-only region
            va = iova(VICTIM) + 3 if i % 2 else iova(READ_ONLY)
            k = KEYS[VICTIM] if i % 2 else KEYS[READ_ONLY]
            body = bth(CMP_SWAP, qpn, psn) + atomic_eth(va, k, 0xDEAD, 0)
        elif kind == 5:  # a random VA with a plausible key
            body = (bth(WRITE_ONLY, qpn, psn) + reth(rng.getrandbits(64), key, 256) +
                    b"\x66" * 256)
        elif kind == 6:  # a READ of a guard region
            body = bth(READ_REQ, qpn, psn) + reth(iova(GUARD_HI), KEYS[GUARD_HI], 1024)
        else:            # Send with Invalidate of the victim's or a guessed key
            body = (bth(SEND_ONLY_INV, qpn, psn) + struct.pack(">I", key) + b"\x55" * 32)
        out.append(roce(body))
    return out


def lengths(rng, n):
    """Zero and maximum lengths: DMA length 0 with and without payload, DMA
    length 2^32-1, payloads of MTU+4, runts (shorter than the Ethernet
    minimum, shorter than the headers), frames at the pool's 4352-byte data
    room, one past it and jumbo frames of 9000 bytes (two mbufs)."""
    out = []
    for i in range(n):
        qpn = rng.choice([V_MUT, V_KEYS, V_UC])
        op = WRITE_ONLY if qpn != V_UC else WRITE_ONLY | 0x20
        psn = V_RQ_PSN + rng.randrange(0, 16)
        kind = i % 9
        if kind == 0:
            out.append(roce(bth(op, qpn, psn) + reth(iova(VICTIM), KEYS[VICTIM], 0)))
        elif kind == 1:
            out.append(roce(bth(op, qpn, psn) + reth(iova(VICTIM), KEYS[VICTIM], 0) + b"\x11" * 64))
        elif kind == 2:
            out.append(roce(bth(op, qpn, psn) + reth(iova(VICTIM), KEYS[VICTIM], 0xFFFFFFFF) +
                            b"\x22" * MTU))
        elif kind == 3:
            out.append(roce(bth(op, qpn, psn) + reth(iova(VICTIM), KEYS[VICTIM], MTU + 4) +
                            b"\x33" * (MTU + 4)))
        elif kind == 4:
            out.append(roce(bth(op, qpn, psn) + reth(iova(VICTIM), KEYS[VICTIM], 64) +
                            b"\x44" * 64)[:rng.choice([14, 20, 33, 41, 53, 59])])
        elif kind == 5:
            # Exactly the data room, one byte over (an odd length that
            # also breaks the word rule), and jumbo.
            size = rng.choice([4352, 4353, 9000])
            body = bth(op, qpn, psn) + reth(iova(VICTIM), KEYS[VICTIM], 4096)
            out.append(roce(body + b"\x55" * (size - 14 - 20 - 8 - len(body) - 4)))
        elif kind == 6:  # payload of 4096 at MTU 1024
            out.append(roce(bth(op, qpn, psn) + reth(iova(VICTIM), KEYS[VICTIM], 4096) +
                            b"\x66" * 4096))
        elif kind == 7:  # an Ethernet header alone, and one padded with zeros to 60 bytes
            out.append(eth(ETH_IPV4).ljust(rng.choice([14, 60]), b"\0"))
        else:            # READ of 2^31 bytes
            out.append(roce(bth(READ_REQ, qpn, psn) + reth(iova(VICTIM), KEYS[VICTIM], 1 << 31)))
    return out


def ipv4_oddities(rng, n):
    """IPv4 options (NOPs, a record-route), fragments (MF, offsets, both),
    a header length beyond the frame, a bad version nibble, TTL 0."""
    out = []
    for i in range(n):
        qpn = rng.choice(TARGETS[:3])
        psn = V_RQ_PSN + rng.randrange(0, 16)
        body = bth(WRITE_ONLY, qpn, psn) + reth(iova(VICTIM) + 1024, KEYS[VICTIM], 32) + b"\x99" * 32
        kind = i % 7
        if kind == 0:
            out.append(roce(body, options=b"\x01\x01\x01\x01"))
        elif kind == 1:
            out.append(roce(body, options=b"\x07\x0b\x04" + b"\0" * 8 + b"\x00"))  # RR
        elif kind == 2:
            out.append(roce(body, flags=0x2000))            # MF: first fragment
        elif kind == 3:
            out.append(roce(body, flags=rng.randrange(1, 0x1FFF)))  # a later fragment
        elif kind == 4:
            f = bytearray(roce(body))
            f[14] = 0x4F                                     # IHL 60 bytes
            out.append(fix_checksums(bytes(f)))
        elif kind == 5:
            f = bytearray(roce(body))
            f[14] = 0x65                                     # version 6 in an IPv4 frame
            out.append(bytes(f))
        else:
            f = bytearray(roce(body))
            f[22] = 0                                        # TTL 0 (ICRC masks it)
            out.append(fix_checksums(bytes(f)))
    return out


def pfc_storm(rng, n):
    """PFC frames pausing every priority or some for up to 65535 quanta,
    XONs, 802.3x PAUSE, and broken MAC control frames (short, another
    opcode)."""
    out = []
    for i in range(n):
        kind = i % 6
        if kind in (0, 1):
            out.append(pfc(rng.randrange(1, 256), [rng.randrange(0, 0x10000) for _ in range(8)]))
        elif kind == 2:
            out.append(pfc(0xFF, [0xFFFF] * 8))
        elif kind == 3:
            out.append(pfc(0xFF, [0] * 8))                   # XON every priority
        elif kind == 4:
            out.append(pfc(0, [0xFFFF] + [0] * 7, opcode=0x0001))  # 802.3x PAUSE
        else:
            out.append(rng.choice([pfc(0xFF, [0xFFFF] * 8, length=20),
                                   pfc(0xFF, [1] * 8, opcode=0x0202)]))
    return out


def not_roce(rng, n):
    """ARP for our address and others', ICMP echo (answered, rate limited),
    UDP to another port, INT's port with garbage, IPv6 to a victim, an
    unknown EtherType."""
    out = []
    for i in range(n):
        kind = i % 7
        if kind == 0:
            target = EP_IP if i % 2 else bytes([10, 0, 0, 99])
            arp = struct.pack(">HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, PEER_MAC, PEER_IP,
                              b"\0" * 6, target)
            out.append((b"\xff" * 6 + PEER_MAC + struct.pack(">H", 0x0806) + arp).ljust(60, b"\0"))
        elif kind == 1:
            icmp = bytearray(struct.pack(">BBHHH", 8, 0, 0, 0x77, i & 0xFFFF) + b"x" * 32)
            icmp[2:4] = struct.pack(">H", ipv4_checksum(bytes(icmp)))
            ip = bytearray(struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(icmp), 1, 0, 64, 1, 0,
                                       PEER_IP, EP_IP))
            ip[10:12] = struct.pack(">H", ipv4_checksum(bytes(ip)))
            out.append(eth(ETH_IPV4) + bytes(ip) + bytes(icmp))
        elif kind in (2, 3):
            f = bytearray(roce(bth(WRITE_ONLY, V_MUT, V_RQ_PSN) + reth(iova(VICTIM), KEYS[VICTIM], 8)
                               + b"\0" * 8))
            f[36:38] = struct.pack(">H", 4789 if kind == 2 else 4792)  # VXLAN, INT
            out.append(fix_checksums(bytes(f)))
        elif kind == 4:
            out.append(roce(bth(WRITE_ONLY, V_MUT, V_RQ_PSN) + reth(iova(VICTIM), KEYS[VICTIM], 8)
                            + b"\0" * 8, v6=True, src=b"\0" * 3 + b"\x02", dst=b"\0" * 3 + b"\x01"))
        elif kind == 5:
            out.append(eth(0x88B5) + bytes(rng.getrandbits(8) for _ in range(46)))
        else:
            out.append(roce(bth(UD_SEND_ONLY, V_UD, rng.getrandbits(24)) +
                            deth(UD_QKEY if i % 2 else 0x1234) + b"\x42" * 200))
    return out


# --------------------------------------------------------------------------
# Valid requests, the fuzz corpus, and their mutations

def valid_requests(rng, n):
    """Plausible requests to the victims (the raw material of mutations)."""
    out = []
    for _ in range(n):
        qpn = rng.choice(TARGETS)
        psn = V_RQ_PSN + rng.randrange(0, 64)
        off = rng.randrange(0, REGION // 2, 64)
        if qpn == V_UD:
            out.append(roce(bth(UD_SEND_ONLY, qpn, psn) + deth(UD_QKEY) + b"\x10" * 128))
            continue
        uc = 0x20 if qpn == V_UC else 0
        op = rng.choice([WRITE_ONLY, WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST, SEND_ONLY,
                         SEND_ONLY_IMM] + ([] if uc else [READ_REQ, FETCH_ADD, CMP_SWAP, ACK]))
        if op in (WRITE_ONLY, WRITE_FIRST):
            ln = MTU if op == WRITE_FIRST else rng.choice([8, 64, 512])
            body = bth(op | uc, qpn, psn) + reth(iova(VICTIM) + off, KEYS[VICTIM],
                                                 ln if op == WRITE_ONLY else 3 * MTU) + b"\x21" * ln
        elif op in (WRITE_MIDDLE, WRITE_LAST):
            body = bth(op | uc, qpn, psn) + b"\x22" * (MTU if op == WRITE_MIDDLE else 100)
        elif op == SEND_ONLY:
            body = bth(op | uc, qpn, psn) + b"\x23" * 64
        elif op == SEND_ONLY_IMM:
            body = bth(op | uc, qpn, psn) + struct.pack(">I", 0xABCD) + b"\x24" * 64
        elif op == READ_REQ:
            body = bth(op, qpn, psn) + reth(iova(VICTIM) + off, KEYS[VICTIM], 2048)
        elif op == ACK:
            body = bth(op, qpn, psn) + struct.pack(">I", rng.getrandbits(32))
        else:
            body = bth(op, qpn, psn) + atomic_eth(iova(VICTIM) + off, KEYS[VICTIM], 5, 0)
        out.append(roce(body))
    return out


def corpus_frames(corpus_dir):
    """The parse fuzzer's seeds (tests/fuzz/corpus/parse) as they are, and
    retargeted: destination QP a victim, IPv4 addresses the victims',
    checksums fixed."""
    out = []
    rng = random.Random(0xC0)
    for name in sorted(os.listdir(corpus_dir)):
        with open(os.path.join(corpus_dir, name), "rb") as f:
            frame = f.read()
        out.append(frame)
        l3 = ro.l3_offset(frame)
        if len(frame) < l3 + 20 + 8 + 12 + 4:
            continue
        f = bytearray(frame)
        et = struct.unpack(">H", f[l3 - 2:l3])[0]
        if et == ETH_IPV4 and f[l3] == 0x45 and f[l3 + 9] == 17:
            f[l3 + 12:l3 + 16] = PEER_IP
            f[l3 + 16:l3 + 20] = EP_IP
            bth_off = l3 + 28
        elif et == ETH_IPV6 and f[l3 + 6] == 17:
            bth_off = l3 + 48
        else:
            continue
        if struct.unpack(">H", f[bth_off - 6:bth_off - 4])[0] != ro.ROCE_PORT:
            continue
        opcode = f[bth_off]
        qpn = V_UD if opcode >> 5 == 3 else V_UC if opcode >> 5 == 1 else rng.choice(TARGETS[:3])
        f[bth_off + 5:bth_off + 8] = struct.pack(">I", qpn)[1:]
        f[bth_off + 9:bth_off + 12] = struct.pack(">I", V_RQ_PSN)[1:]
        out.append(fix_checksums(bytes(f)))
    return out


def mutate(rng, frame):
    """One random mutation: flipped bytes (anywhere, or in the headers),
    a field set to an edge value, truncation, extension; the checksums
    fixed afterwards half of the time, so that the changes also reach the
    checks behind the ICRC."""
    f = bytearray(frame)
    kind = rng.randrange(6)
    if kind == 0 and f:
        for _ in range(rng.randrange(1, 9)):
            f[rng.randrange(len(f))] ^= 1 << rng.randrange(8)
    elif kind == 1 and len(f) > 14:
        i = rng.randrange(14, min(len(f), 14 + 20 + 8 + 12 + 28))
        f[i] = rng.choice([0x00, 0xFF, 0x7F, 0x80, rng.getrandbits(8)])
    elif kind == 2 and len(f) > 60:
        opcode_at = ro.l3_offset(f) + 28
        if opcode_at < len(f):
            f[opcode_at] = rng.getrandbits(8)
    elif kind == 3:
        f = f[:rng.randrange(0, len(f) + 1)]
    elif kind == 4:
        f += bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 64)))
    else:
        for _ in range(rng.randrange(1, 4)):
            i = rng.randrange(max(1, len(f) - 3))
            f[i:i + 4] = struct.pack(">I", rng.choice([0, 0xFFFFFFFF, 0x80000000,
                                                      rng.getrandbits(32)]))[:len(f) - i]
    return fix_checksums(bytes(f)) if rng.random() < 0.5 else bytes(f)


# Byte strings no random or mutated frame may contain: LEGIT's key, its QPN,
# its addresses. A frame holding none of them cannot name LEGIT_QPN, carry
# LEGIT's key (for a WRITE, atomic or Send with Invalidate) or come from the
# legitimate flow's addresses.
FORBIDDEN = [struct.pack(">I", KEYS[LEGIT]), struct.pack(">I", LEGIT_QPN)[1:], LEGIT_EP_IP,
             LEGIT_PEER_IP]


def clean(frames):
    return [f for f in frames if f and not any(b in f for b in FORBIDDEN)]


def build(corpus_dir, seed=0x4057, mutations=4000):
    """(frames, the legitimate flow (legit_flow), count per kind): every
    kind of frame above, shuffled, with the legitimate flow's frames spread
    through in their order."""
    rng = random.Random(seed)
    flow = legit_flow(rng)
    legit = flow["frames"]
    base = valid_requests(rng, 400) + corpus_frames(corpus_dir)
    kinds = {
        "corpus": clean(corpus_frames(corpus_dir)),
        "mutated": clean([mutate(rng, rng.choice(base)) for _ in range(mutations)]),
        "valid_to_victims": clean(valid_requests(rng, 400)),
        "near_legit": near_legit(rng, 300),
        "psn_storm": clean(psn_storm(rng, 1200)),
        "read_flood": clean(read_flood(rng, 640)),
        "bad_keys": clean(bad_keys_and_addresses(rng, 480)),
        "lengths": clean(lengths(rng, 180)),
        "ipv4": clean(ipv4_oddities(rng, 210)),
        "pfc": pfc_storm(rng, 300),
        "not_roce": clean(not_roce(rng, 210)),
    }
    only = os.environ.get("HOSTILE_KINDS")  # a comma-separated subset, to narrow a failure down
    if only:
        kinds = {k: v for k, v in kinds.items() if k in only.split(",")}
    hostile = [f for fs in kinds.values() for f in fs]
    rng.shuffle(hostile)
    # The legitimate frames at evenly spread places, in PSN order.
    total = len(hostile) + len(legit)
    step = total / len(legit)
    at = {int(i * step): f for i, f in enumerate(legit)}
    frames, h = [], iter(hostile)
    for i in range(total):
        frames.append(at[i] if i in at else next(h))
    counts = {k: len(v) for k, v in kinds.items()}
    counts["legit"] = len(legit)
    return frames, flow, counts


def write_pcap(path, frames):
    """Classic pcap; snap length 65535 so the jumbo frames stay whole."""
    ro.write_pcap(path, frames)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: hostile_frames.py OUT.pcap")
    frames, _, counts = build(os.path.join(HERE, "..", "fuzz", "corpus", "parse"))
    write_pcap(sys.argv[1], frames)
    print(len(frames), "frames", counts)
