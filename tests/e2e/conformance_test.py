"""Conformance: RoCEv2 requests built by scapy are replayed into
droce-endpoint through net_pcap (rx_pcap -> endpoint -> tx_pcap); every
response is checked field by field, ICRC included:
WRITE only/first/middle/last, SEND into a posted receive WQE, READ (only,
first/middle/last responses, data = the configured fill pattern or what an
earlier WRITE/SEND/atomic put there), CMP_SWAP and FETCH_ADD (original
values), a CE-marked WRITE (-> CNP), an out-of-sequence PSN (-> PSN
sequence error NAK) and a bad-rkey WRITE (-> remote access error NAK)."""

import json
import os
import random
import struct
import sys

from e2e_common import *  # noqa: F401,F403

RKEY = 0x1234
MR_LEN = 65536
RECV_OFF = 32768
MTU = 1024


def pattern(va, n):
    return bytes((va + i) & 0xFF for i in range(n))


def main():
    exe = find_endpoint()
    d = workdir()
    cfg = os.path.join(d, "ep.toml")
    with open(cfg, "w") as f:
        f.write(f"""
# One MR (counter fill: byte at VA i is i mod 256, VAs start at 0) and one
# RC QP expecting PSN 100 from its peer.
[[mr]]
key = {RKEY:#x}
length = {MR_LEN}
fill = "counter"

[[qp]]
qpn = {EP_QPN:#x}
peer_qpn = {PEER_QPN:#x}
rq_psn = 100
sq_psn = 0x500
mtu = {MTU}
dscp = {DSCP}
local_mac = "{EP_MAC}"
peer_mac = "{PEER_MAC}"
local_ip = "{EP_IP}"
peer_ip = "{PEER_IP}"
recv = {{ count = 4, length = 1024, mr = {RKEY:#x}, offset = {RECV_OFF} }}
""")
    rng = random.Random(7)
    w_only = b"ABCDEFGH"
    w_multi = bytes(rng.getrandbits(8) for _ in range(3 * MTU))
    send_data = bytes(rng.getrandbits(8) for _ in range(64))
    ce_data = bytes(range(16))
    cmp_orig = struct.unpack("<Q", pattern(0x3000, 8))[0]  # host-order word
    add_orig = struct.unpack("<Q", pattern(0x3008, 8))[0]
    swap = 0x00000000DEADBEEF
    pkts = [
        request(WRITE_ONLY, 100, reth(0, RKEY, 8), w_only, ackreq=True),
        request(WRITE_FIRST, 101, reth(0x100, RKEY, len(w_multi)), w_multi[:MTU]),
        request(WRITE_MIDDLE, 102, b"", w_multi[MTU:2 * MTU]),
        request(WRITE_LAST, 103, b"", w_multi[2 * MTU:], ackreq=True),
        request(SEND_ONLY, 104, b"", send_data, ackreq=True),
        request(READ_REQ, 105, reth(0x2000, RKEY, 2048), ackreq=True),       # 105-106
        request(READ_REQ, 107, reth(0x100, RKEY, len(w_multi)), ackreq=True),  # 107-109
        request(READ_REQ, 110, reth(RECV_OFF, RKEY, len(send_data)), ackreq=True),
        request(CMP_SWAP, 111, atomic_eth(0x3000, RKEY, swap, cmp_orig), ackreq=True),
        request(FETCH_ADD, 112, atomic_eth(0x3008, RKEY, 5, 0), ackreq=True),
        request(READ_REQ, 113, reth(0x3000, RKEY, 16), ackreq=True),
        request(WRITE_ONLY, 114, reth(0x4000, RKEY, 16), ce_data, ackreq=True, ecn=CE),
        request(WRITE_ONLY, 116, reth(0x4100, RKEY, 8), w_only, ackreq=True),   # gap: 115
        request(WRITE_ONLY, 115, reth(0x4200, 0x9999, 8), w_only, ackreq=True),  # bad rkey
    ]
    in_pcap, out_pcap = os.path.join(d, "in.pcap"), os.path.join(d, "out.pcap")
    wrpcap(in_pcap, pkts)
    stats = os.path.join(d, "stats.json")
    cap = os.path.join(d, "capture.pcap")
    r = run_endpoint(exe, "droce_e2e_conf",
                     [f"net_pcap0,rx_pcap={in_pcap},tx_pcap={out_pcap}"],
                     ["--config", cfg, "--exit-when-idle", "500", "--json", stats,
                      "--capture", cap,
                      "--idle-sleep-us", "50"])
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    check(r.returncode == 0, f"droce-endpoint exit code {r.returncode}")
    check("all pools full at shutdown" in r.stdout, "leak check line missing")

    sent = rdpcap(out_pcap)
    # The port first announces its address (docs/ETHERNET.md): a gratuitous
    # ARP for EP_IP, and an unsolicited advertisement of its IPv6 link-local
    # address; the rest is the RoCE traffic.
    ann = [p for p in sent if UDP not in p]
    check(len(ann) == 2 and ARP in ann[0] and ann[0][ARP].op == 1 and
          ann[0][ARP].psrc == EP_IP == ann[0][ARP].pdst and ann[0][Ether].src == EP_MAC and
          ann[0][Ether].dst == "ff:ff:ff:ff:ff:ff",
          f"announcements: {[p.summary() for p in ann]}")
    out = [p for p in sent if UDP in p]
    print(f"{len(out)} frames out")
    resp = {}
    cnps = []
    naks = []  # (psn, syndrome, msn)
    for p in out:
        check(p[Ether].src == EP_MAC and p[Ether].dst == PEER_MAC, "MACs: " + p.summary())
        check(p[IP].src == EP_IP and p[IP].dst == PEER_IP, "IPs: " + p.summary())
        check(p[IP].ttl == 64 and p[IP].flags.DF, "TTL/DF")
        check(p[UDP].dport == ROCE_PORT and p[UDP].chksum == 0, "UDP port/checksum")
        check(p[UDP].sport & 0xC000 == 0xC000, "UDP source port entropy range")
        check(icrc_ok(p), "ICRC or IPv4 checksum wrong: " + p.summary())
        bth, rest, _ = split(p)
        check(bth.dqpn == PEER_QPN, f"dest QPN {bth.dqpn:#x}")
        check(bth.pkey == 0xFFFF and bth.version == 0, "pkey / transport version")
        if bth.opcode == CNP:
            cnps.append(p)
            continue
        check(p[IP].tos == (DSCP << 2) | ECT0, f"DSCP/ECN {p[IP].tos:#x} on {bth.opcode:#x}")
        key = (bth.opcode, bth.psn)
        if bth.opcode == ACK and rest[0] >> 5 != 0:
            naks.append((bth.psn, rest[0], int.from_bytes(rest[1:4], "big")))
            continue
        check(key not in resp, f"duplicate response {key}")
        resp[key] = (bth, rest)

    def aeth(key, syndrome_class=0, syndrome=None):
        check(key in resp, f"missing response opcode {key[0]:#x} psn {key[1]}; "
              f"have {sorted(resp)}")
        bth, rest = resp[key]
        syn, msn = rest[0], int.from_bytes(rest[1:4], "big")
        if syndrome is None:
            check(syn >> 5 == syndrome_class, f"{key}: syndrome {syn:#x}")
        else:
            check(syn == syndrome, f"{key}: syndrome {syn:#x}, want {syndrome:#x}")
        return bth, rest[4:], msn

    # ACKs (IBA 9.7.5.1.1): syndrome 000xxxxx, MSN counts completed
    # messages. Requests that arrive in one burst may be acknowledged by one
    # coalesced ACK (an ACK covers every earlier PSN), so 100 and 103 are
    # optional; 104 (before the READs) is not.
    for psn, want in [(100, 1), (103, 2)]:
        if (ACK, psn) in resp:
            _, _, msn = aeth((ACK, psn))
            check(msn == want, f"MSN {msn} at PSN {psn}")
    _, _, msn = aeth((ACK, 104)); check(msn == 3, f"MSN {msn} after SEND")
    # READ responses: first/last carry an AETH, middle none (IBA 9.3.3).
    _, d1, _ = aeth((READ_FIRST, 105))
    _, d2, _ = aeth((READ_LAST, 106))
    check(d1 + d2 == pattern(0x2000, 2048), "READ of the fill pattern")
    _, r1, _ = aeth((READ_FIRST, 107))
    check((READ_MIDDLE, 108) in resp, "READ middle response missing")
    _, r2 = resp[(READ_MIDDLE, 108)]
    _, r3, _ = aeth((READ_LAST, 109))
    check(r1 + r2 + r3 == w_multi, "READ back of the multi-packet WRITE")
    _, rs, _ = aeth((READ_ONLY, 110))
    check(rs == send_data, "READ back of the SEND payload in the receive WQE")
    # Atomic ACKs: AETH + AtomicAckETH with the original value (IBA 9.5.3).
    _, o1, _ = aeth((ATOMIC_ACK, 111))
    check(struct.unpack("!Q", o1)[0] == cmp_orig, f"CMP_SWAP original {o1.hex()}")
    _, o2, _ = aeth((ATOMIC_ACK, 112))
    check(struct.unpack("!Q", o2)[0] == add_orig, f"FETCH_ADD original {o2.hex()}")
    _, ra, _ = aeth((READ_ONLY, 113))
    check(ra == struct.pack("<QQ", swap, add_orig + 5), f"memory after atomics {ra.hex()}")
    # CE-marked WRITE: ACKed, and one CNP (annex A17.9.2: BECN set, opcode
    # 0x81, dest = the sender's QP, 16 reserved bytes).
    aeth((ACK, 114))
    check(len(cnps) == 1, f"{len(cnps)} CNPs")
    cb, crest, _ = split(cnps[0])
    check(cb.becn == 1, "CNP BECN")
    check(crest == b"\0" * 16, "CNP reserved bytes")
    check(cnps[0][IP].tos & 3 != CE, "CNP must not be CE")
    # Out of sequence (116 while 115 expected): PSN sequence error NAK
    # carrying the expected PSN (IBA 9.7.5.2.1, syndrome 0x60); then the
    # bad-rkey WRITE at 115: remote access error NAK (syndrome 0x62, IBA
    # 9.7.5.2.4). Neither advances the MSN (10 = 3 + 3 READs + 2 atomics +
    # READ + the CE WRITE).
    check(naks == [(115, 0x60, 10), (115, 0x62, 10)], f"NAKs {naks}")
    check(len(out) == len(resp) + len(cnps) + len(naks), "unexpected frames")
    check(set(k[1] for k in resp) >= set(range(104, 115)), f"responses {sorted(resp)}")

    # --capture holds what the port received and what it sent.
    captured = rdpcap(cap)
    check(len(captured) == len(pkts) + len(sent), f"capture has {len(captured)} frames")
    check(sorted(raw(p) for p in captured) == sorted([raw(p) for p in pkts] +
                                                     [raw(p) for p in sent]),
          "capture differs from in.pcap + out.pcap")

    with open(stats) as f:
        s = json.load(f)
    qp = s["qps"][0]["counters"]
    for name, want in [("rx_ecn_ce", 1), ("cnps_sent", 1), ("naks_seq_sent", 1),
                       ("naks_remote_access_sent", 1), ("atomic_acks_sent", 2),
                       ("rx_request_packets", 14)]:
        check(qp[name] == want, f"counter {name} = {qp[name]}, want {want}")
    port = s["ports"][0]
    check(port["endpoint"]["rx_frames"] == len(pkts), "rx_frames")
    check(port["port"]["tx_frames"] == len(sent), "tx_frames vs out.pcap")
    check(port["mempool_avail"] == port["mempool_size"], "mbuf pool not full")
    print("conformance: OK")


if __name__ == "__main__":
    main()
