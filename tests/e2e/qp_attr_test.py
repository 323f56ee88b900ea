"""A [[qp]] table's access, pkey and max_dest_rd_atomic reach the QP.
scapy's requests are replayed through net_pcap (rx_pcap -> endpoint ->
tx_pcap):

- QP 0x12, access = ["remote_read"], pkey = 0x8001: a READ with the
  default P_Key 0xffff (another partition) is dropped and counted
  (IBA 10.9); the same READ with 0x8001 is answered, the response carrying
  0x8001; a WRITE is refused with a remote access error NAK (syndrome
  0x62, IBA 9.7.5.2.4) although its region allows remote writes.
- QP 0x13, max_dest_rd_atomic = 1: two READs in one burst; the first is
  answered, the second is an invalid request NAK (syndrome 0x61,
  IBA 9.7.5.2) since the first's responses are still held.
- QP 0x14, recovery = "sr" (docs/MULTIPATH.md), and QP 0x15 by default
  (go-back-N): a WRITE's FIRST, LAST, MIDDLE, the LAST overtaking the
  MIDDLE. Selective repeat places the LAST and SACKs it (a PSN sequence
  error NAK for PSN 1 carrying the PSN received, 2), then the MIDDLE fills the hole and the
  ACK covers PSN 2; all three payloads land. Go-back-N NAKs the expected
  PSN 1, drops the LAST (its bytes stay as filled) and acknowledges up to
  the MIDDLE only."""

import json
import os
import sys

from e2e_common import *  # noqa: F401,F403

RKEY = 0x1234
QP_A, PEER_A, QP_B, PEER_B = 0x12, 0x23, 0x13, 0x24
PKEY = 0x8001
QP_SR, PEER_SR, QP_GBN, PEER_GBN = 0x14, 0x25, 0x15, 0x26
VA_SR, VA_GBN = 0x2000, 0x3000
NAK_PSN_SEQ = 0x60  # AETH syndrome (IBA 9.7.5.2.1 table 45)


def with_pkey(p, pkey):
    p[BTH].pkey = pkey
    p[BTH].icrc = None  # scapy computes it again
    return Ether(raw(p))


def main():
    exe = find_endpoint()
    d = workdir()
    cfg = os.path.join(d, "ep.toml")
    dump = os.path.join(d, "mr.bin")
    common = f"""local_mac = "{EP_MAC}"
peer_mac = "{PEER_MAC}"
local_ip = "{EP_IP}"
peer_ip = "{PEER_IP}"
"""
    with open(cfg, "w") as f:
        f.write(f"""
[[mr]]
key = {RKEY:#x}
length = 65536
fill = "counter"
dump = "{dump}"

[[qp]]
qpn = {QP_A:#x}
peer_qpn = {PEER_A:#x}
access = ["remote_read"]
pkey = {PKEY:#x}
{common}
[[qp]]
qpn = {QP_B:#x}
peer_qpn = {PEER_B:#x}
max_dest_rd_atomic = 1
{common}
[[qp]]
qpn = {QP_SR:#x}
peer_qpn = {PEER_SR:#x}
recovery = "sr"
{common}
[[qp]]
qpn = {QP_GBN:#x}
peer_qpn = {PEER_GBN:#x}
{common}""")
    pkts = [
        request(READ_REQ, 0, reth(0x40, RKEY, 16), ackreq=True, dqpn=QP_A),  # P_Key 0xffff
        with_pkey(request(READ_REQ, 0, reth(0x40, RKEY, 16), ackreq=True, dqpn=QP_A), PKEY),
        with_pkey(request(WRITE_ONLY, 1, reth(0x80, RKEY, 8), b"x" * 8, ackreq=True,
                          dqpn=QP_A), PKEY),
        request(READ_REQ, 0, reth(0, RKEY, 2048), ackreq=True, dqpn=QP_B),  # PSNs 0-1
        request(READ_REQ, 2, reth(0, RKEY, 16), ackreq=True, dqpn=QP_B),
    ]
    for qpn, va in ((QP_SR, VA_SR), (QP_GBN, VA_GBN)):
        pkts += [request(WRITE_FIRST, 0, reth(va, RKEY, 2048 + 16), b"a" * 1024, ackreq=True,
                         dqpn=qpn),
                 request(WRITE_LAST, 2, b"", b"c" * 16, ackreq=True, dqpn=qpn),
                 request(WRITE_MIDDLE, 1, b"", b"b" * 1024, ackreq=True, dqpn=qpn)]
    in_pcap, out_pcap = os.path.join(d, "in.pcap"), os.path.join(d, "out.pcap")
    wrpcap(in_pcap, pkts)
    stats = os.path.join(d, "stats.json")
    r = run_endpoint(exe, "droce_e2e_qpattr",
                     [f"net_pcap0,rx_pcap={in_pcap},tx_pcap={out_pcap}"],
                     ["--config", cfg, "--exit-when-idle", "500", "--idle-sleep-us", "50",
                      "--json", stats])
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    check(r.returncode == 0, f"droce-endpoint exit code {r.returncode}")

    answers = {PEER_A: [], PEER_B: [], PEER_SR: [], PEER_GBN: []}
    for p in roce_frames(out_pcap):
        check(icrc_ok(p), "ICRC or IPv4 checksum wrong: " + p.summary())
        bth, rest, _ = split(p)
        answers[bth.dqpn].append((bth.opcode, bth.psn, bth.pkey, rest))
    a = answers[PEER_A]
    print("QP A:", [(hex(o), psn, hex(k), rest[:1].hex()) for o, psn, k, rest in a])
    check(len(a) == 2, f"QP A: {len(a)} answers, want a READ response and a NAK")
    check(a[0][:3] == (READ_ONLY, 0, PKEY) and a[0][3][4:] == bytes(range(0x40, 0x50)),
          "QP A: the READ with its P_Key answered, in its partition")
    check(a[1][:3] == (ACK, 1, PKEY) and a[1][3][0] == 0x62,
          "QP A: the WRITE refused by the QP's access: remote access error NAK")
    b = answers[PEER_B]
    print("QP B:", [(hex(o), psn, hex(k), rest[:1].hex()) for o, psn, k, rest in b])
    check([(o, psn) for o, psn, _, _ in b] == [(READ_FIRST, 0), (READ_LAST, 1), (ACK, 2)],
          "QP B: the first READ answered, then one NAK")
    check(b[2][3][0] == 0x61, f"QP B: invalid request NAK, syndrome {b[2][3][0]:#x}")

    with open(dump, "rb") as f:
        mem = f.read()
    counter = bytes(i & 0xFF for i in range(VA_GBN + 2048, VA_GBN + 2048 + 16))
    for name, peer, va in (("sr", PEER_SR, VA_SR), ("gbn", PEER_GBN, VA_GBN)):
        # (BTH PSN, AETH syndrome, AETH MSN field)
        acks = [(psn, rest[0], int.from_bytes(rest[1:4], "big"))
                for o, psn, _, rest in answers[peer] if o == ACK]
        print(f"QP {name}: (PSN, syndrome, MSN)", [(p, hex(y), m) for p, y, m in acks])
        naks = [(psn, msn) for psn, syn, msn in acks if syn == NAK_PSN_SEQ]
        last = [psn for psn, syn, _ in acks if syn < 0x20][-1:]
        if name == "sr":
            # The SACK: the expected PSN in the BTH, the PSN received in
            # the MSN field (transport/qp.h, IRN).
            check(naks == [(1, 2)],
                  f"QP sr: the overtaking LAST SACKed (NAKs {naks}, want [(1, 2)])")
            check(last == [2], f"QP sr: the MIDDLE filled the hole, ACK to PSN 2 ({last})")
            want = b"a" * 1024 + b"b" * 1024 + b"c" * 16
        else:
            # IBA 9.7.5.2.1: the expected PSN, the MSN of completed messages.
            check(naks == [(1, 0)],
                  f"QP gbn: one NAK of the expected PSN ({naks}, want [(1, 0)])")
            check(last == [1], f"QP gbn: the LAST dropped, ACK to PSN 1 only ({last})")
            want = b"a" * 1024 + b"b" * 1024 + counter
        got = mem[va:va + 2048 + 16]
        check(got == want, f"QP {name}: the region holds what was placed "
                           f"(first difference at {next((i for i in range(len(want)) if got[i:i+1] != want[i:i+1]), None)})")

    with open(stats) as f:
        s = json.load(f)
    qa = next(q for q in s["qps"] if q["qpn"] == QP_A)["counters"]
    check(qa["rx_dropped_bad_pkey"] == 1, f"QP A: rx_dropped_bad_pkey "
                                          f"{qa['rx_dropped_bad_pkey']}, want 1")
    print("qp attributes: OK")


if __name__ == "__main__":
    main()
