"""droce-endpoint as a target an application can watch: with --completions
every completion is written as one JSON line. scapy's requests are replayed
through net_pcap (rx_pcap -> endpoint -> tx_pcap): a SEND, a SEND with
immediate, an RDMA WRITE with immediate and a SEND with invalidate; the
test reads the file back and checks every field of each receive
completion (status and opcode by number and name, byte_len, imm_data,
invalidated_rkey, flags, wr_id = the receive WQE, the time).

Then a READ of a region filled with fill = "counter" whose iova is not a
multiple of 256: the byte at VA i is i mod 256 (not offset mod 256).

Every ACK and READ response advertises end-to-end credits (IBA 9.7.7.2)
counting the QP's receive ring.

And a region preloaded from a file (fill = "file:PATH", shorter than the
region: the rest zero) and dumped at exit (dump = "PATH"): a READ across
the file's end returns its last bytes and zeros, and the dump holds the
file's bytes with a WRITE's bytes in their place."""

import json
import os
import random
import struct
import sys
import time

from e2e_common import *  # noqa: F401,F403

RKEY, INV_RKEY, COUNTER_RKEY = 0x1234, 0x5678, 0x9A00
COUNTER_IOVA, READ_LEN = 0x10007, 300
FILE_RKEY, FILE_MR_LEN, FILE_LEN = 0x7700, 8192, 5000
RECV_OFF, RECV_LEN = 0x8000, 1024

# RC opcodes with an immediate or an invalidate (IBA 9.2.1 table 38).
SEND_ONLY_IMM, WRITE_ONLY_IMM, SEND_ONLY_INV = 0x05, 0x0B, 0x17
# libibverbs' enum values.
WC_SUCCESS, WC_RECV, WC_RECV_RDMA_WITH_IMM = 0, 128, 129
WC_WITH_IMM, WC_WITH_INV = 2, 8


def main():
    exe = find_endpoint()
    d = workdir()
    cfg = os.path.join(d, "ep.toml")
    rng = random.Random(11)
    loaded = bytes(rng.getrandbits(8) for _ in range(FILE_LEN))
    load_file, dump_file = os.path.join(d, "load.bin"), os.path.join(d, "dump.bin")
    with open(load_file, "wb") as f:
        f.write(loaded)
    with open(cfg, "w") as f:
        f.write(f"""
[[mr]]
key = {RKEY:#x}
length = 65536

[[mr]]                # the SEND with invalidate names this one
key = {INV_RKEY:#x}
length = 4096

[[mr]]
key = {COUNTER_RKEY:#x}
length = 4096
iova = {COUNTER_IOVA:#x}
fill = "counter"

[[mr]]
key = {FILE_RKEY:#x}
length = {FILE_MR_LEN}
fill = "file:{load_file}"
dump = "{dump_file}"

[[qp]]
qpn = {EP_QPN:#x}
peer_qpn = {PEER_QPN:#x}
local_mac = "{EP_MAC}"
peer_mac = "{PEER_MAC}"
local_ip = "{EP_IP}"
peer_ip = "{PEER_IP}"
recv = {{ count = 4, length = {RECV_LEN}, mr = {RKEY:#x}, offset = {RECV_OFF:#x} }}
""")
    imm1, imm2 = 0x11223344, 0xCAFEF00D
    pkts = [
        request(SEND_ONLY, 0, b"", bytes(64), ackreq=True),
        # ImmDt follows the BTH (IBA 9.3.4); it is big-endian on the wire.
        request(SEND_ONLY_IMM, 1, struct.pack("!I", imm1), bytes(range(32)), ackreq=True),
        request(WRITE_ONLY_IMM, 2, reth(0x2000, RKEY, 16) + struct.pack("!I", imm2),
                bytes(16), ackreq=True),
        # IETH: the R_Key to invalidate (IBA 9.3.5).
        request(SEND_ONLY_INV, 3, struct.pack("!I", INV_RKEY), bytes(8), ackreq=True),
        request(READ_REQ, 4, reth(COUNTER_IOVA, COUNTER_RKEY, READ_LEN), ackreq=True),
        request(READ_REQ, 5, reth(FILE_LEN - 10, FILE_RKEY, 64), ackreq=True),
        request(WRITE_ONLY, 6, reth(0x100, FILE_RKEY, 16), b"W" * 16, ackreq=True),
    ]
    in_pcap, out_pcap = os.path.join(d, "in.pcap"), os.path.join(d, "out.pcap")
    wrpcap(in_pcap, pkts)
    wcs_file = os.path.join(d, "completions.jsonl")
    t0 = time.time_ns()
    r = run_endpoint(exe, "droce_e2e_target",
                     [f"net_pcap0,rx_pcap={in_pcap},tx_pcap={out_pcap}"],
                     ["--config", cfg, "--exit-when-idle", "500", "--idle-sleep-us", "50",
                      "--completions", wcs_file])
    t1 = time.time_ns()
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    check(r.returncode == 0, f"droce-endpoint exit code {r.returncode}")
    check("completions 4 (errors 0)" in r.stdout, "four completions counted")

    out = roce_frames(out_pcap)
    reads = {p[BTH].psn: split(p)[1][4:] for p in out if p[BTH].opcode == READ_ONLY}
    check(sorted(reads) == [4, 5], f"READ responses at PSNs {sorted(reads)}, want 4 and 5")
    got = reads[4]  # after the AETH
    want_fill = bytes((COUNTER_IOVA + i) & 0xFF for i in range(READ_LEN))
    check(got == want_fill, f"counter fill: VA {COUNTER_IOVA:#x}.. holds {got[:8].hex()}.., "
                            f"want VA mod 256 {want_fill[:8].hex()}..")
    check(reads[5] == loaded[-10:] + bytes(54),
          "READ across the loaded file's end: its last 10 bytes, then zeros")
    with open(dump_file, "rb") as f:
        dumped = f.read()
    want_dump = bytearray(loaded + bytes(FILE_MR_LEN - FILE_LEN))
    want_dump[0x100:0x110] = b"W" * 16
    check(dumped == bytes(want_dump), f"dump: {len(dumped)} bytes, want the file's "
                                      f"{FILE_LEN} + zeros to {FILE_MR_LEN}, WRITE at 0x100")
    acks = [p for p in out if p[BTH].opcode == ACK]
    check(acks and acks[-1][BTH].psn == 6 and raw(acks[-1][UDP].payload)[12] >> 5 == 0,
          f"every request acknowledged: {[p.summary() for p in acks]}")
    # End-to-end credits (IBA 9.7.7.2): every AETH with an ACK syndrome
    # (the ACKs, the READ responses) counts the QP's receive ring, 4 WQEs
    # of which some may be waiting to be reposted: a code of at most 4
    # credits (IBA table 46: codes 0..4 are 0..4), never the invalid 0x1F.
    aeths = [raw(p[UDP].payload)[12] for p in out if p[BTH].opcode in (ACK, READ_ONLY)]
    check(aeths and all(a >> 5 == 0 and (a & 0x1F) <= 4 for a in aeths),
          f"AETH credit codes {[hex(a) for a in aeths]}, want 0..4 (the receive ring)")

    with open(wcs_file) as f:
        lines = [json.loads(line) for line in f]
    for wc in lines:
        print(json.dumps(wc, sort_keys=True))
    check(len(lines) == 4, f"{len(lines)} completion lines, want 4")
    base = {"port": 0, "qpn": EP_QPN, "status": WC_SUCCESS, "status_name": "success",
            "src_qp": 0, "vendor_err": 0}
    want = [
        dict(base, wr_id=0, opcode=WC_RECV, opcode_name="recv", byte_len=64,
             wc_flags=0, flags=[]),
        dict(base, wr_id=1, opcode=WC_RECV, opcode_name="recv", byte_len=32,
             imm_data=imm1, wc_flags=WC_WITH_IMM, flags=["with_imm"]),
        dict(base, wr_id=2, opcode=WC_RECV_RDMA_WITH_IMM, opcode_name="recv_rdma_with_imm",
             byte_len=16, imm_data=imm2, wc_flags=WC_WITH_IMM, flags=["with_imm"]),
        dict(base, wr_id=3, opcode=WC_RECV, opcode_name="recv", byte_len=8,
             invalidated_rkey=INV_RKEY, wc_flags=WC_WITH_INV, flags=["with_inv"]),
    ]
    prev = t0
    for i, (got, w) in enumerate(zip(lines, want)):
        t = got.pop("time_ns", None)
        check(isinstance(t, int) and prev <= t <= t1,
              f"completion {i}: time_ns {t} not in order within the run [{t0}, {t1}]")
        prev = t
        check(got == w, f"completion {i}: {got}\n  want {w}")
    print("target: OK")


if __name__ == "__main__":
    main()
