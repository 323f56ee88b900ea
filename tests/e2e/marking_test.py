"""droce-endpoint's packet marks end to end: a QP defined by flags
(--dscp, --ecn, --vlan, --pcp) and one defined in the config file (the
same keys) answer scapy requests replayed through net_pcap; scapy reads
every answer and checks its 802.1Q tag (VID, PCP), DSCP and ECN.

Per case the requests are a WRITE ONLY with AckReq (-> ACK), a READ
(-> READ response) and a CE-marked WRITE (-> ACK and a CNP). ACKs and READ
responses carry the QP's marks. A CNP carries the QP's tag, the CNP DSCP
(48, QpAttr::cnp_dscp) and Not-ECT, so it is never marked on its way back
(RoCEv2 annex A17.9.2)."""

import os
import sys

from scapy.all import Dot1Q

from e2e_common import *  # noqa: F401,F403

RKEY = 0x1234
NOT_ECT, ECT1 = 0, 1
CNP_DSCP = 48
QP_FLAGS = ["--qpn", hex(EP_QPN), "--peer-qpn", hex(PEER_QPN), "--rq-psn", "10",
            "--local-mac", EP_MAC, "--peer-mac", PEER_MAC, "--local-ip", EP_IP,
            "--peer-ip", PEER_IP, "--mr-size", "65536", "--mr-key", hex(RKEY)]
QP_CONFIG = f"""
[[mr]]
key = {RKEY:#x}
length = 65536

[[qp]]
qpn = {EP_QPN:#x}
peer_qpn = {PEER_QPN:#x}
rq_psn = 10
local_mac = "{EP_MAC}"
peer_mac = "{PEER_MAC}"
local_ip = "{EP_IP}"
peer_ip = "{PEER_IP}"
"""

# (name, how the QP is defined, the marks: DSCP, ECN, VID or None for an
# untagged frame, PCP)
CASES = [
    ("flags, defaults", ("flags", []), (26, ECT0, None, 0)),
    ("flags, all marks", ("flags", ["--dscp", "10", "--ecn", "ect1", "--vlan", "5",
                                    "--pcp", "3"]), (10, ECT1, 5, 3)),
    ("flags, PCP only (priority tag)", ("flags", ["--pcp", "6"]), (26, ECT0, 0, 6)),
    ("config, defaults", ("config", ""), (26, ECT0, None, 0)),
    ("config, all marks", ("config", 'dscp = 46\necn = "not-ect"\nvlan = 100\npcp = 5\n'),
     (46, NOT_ECT, 100, 5)),
    ("config, PCP only (priority tag)", ("config", "pcp = 2\n"), (26, ECT0, 0, 2)),
]


def requests():
    return [
        request(WRITE_ONLY, 10, reth(0, RKEY, 8), b"ABCDEFGH", ackreq=True),
        request(READ_REQ, 11, reth(0, RKEY, 64), ackreq=True),
        request(WRITE_ONLY, 12, reth(0x100, RKEY, 8), b"IJKLMNOP", ackreq=True, ecn=CE),
    ]


def marks_of(p):
    """(DSCP, ECN, VID or None, PCP) of a frame."""
    vid, pcp = (p[Dot1Q].vlan, p[Dot1Q].prio) if p.haslayer(Dot1Q) else (None, 0)
    return p[IP].tos >> 2, p[IP].tos & 3, vid, pcp


def run_case(exe, d, i, name, how, want):
    kind, extra = how
    in_pcap = os.path.join(d, f"in{i}.pcap")
    out_pcap = os.path.join(d, f"out{i}.pcap")
    wrpcap(in_pcap, requests())
    if kind == "flags":
        app = QP_FLAGS + extra
    else:
        cfg = os.path.join(d, f"ep{i}.toml")
        with open(cfg, "w") as f:
            f.write(QP_CONFIG + extra)
        app = ["--config", cfg]
    r = run_endpoint(exe, f"droce_e2e_mark{i}",
                     [f"net_pcap0,rx_pcap={in_pcap},tx_pcap={out_pcap}"],
                     app + ["--exit-when-idle", "300", "--idle-sleep-us", "50"])
    if r.returncode != 0:
        sys.stderr.write(r.stderr)
    check(r.returncode == 0, f"{name}: droce-endpoint exit code {r.returncode}")
    out = roce_frames(out_pcap)
    seen = {}
    for p in out:
        check(icrc_ok(p), f"{name}: ICRC or IPv4 checksum wrong: " + p.summary())
        op = p[BTH].opcode
        seen[op] = seen.get(op, 0) + 1
        dscp, ecn, vid, pcp = want
        if op == CNP:
            dscp, ecn = CNP_DSCP, NOT_ECT
        got = marks_of(p)
        check(got == (dscp, ecn, vid, pcp),
              f"{name}: opcode {op:#x} has DSCP/ECN/VID/PCP {got}, want "
              f"{(dscp, ecn, vid, pcp)}")
    # Both WRITEs are acknowledged (coalescing may fold them into one ACK,
    # but the READ between them forces the first out).
    check(seen.get(ACK, 0) >= 1 and seen.get(READ_ONLY) == 1 and seen.get(CNP) == 1,
          f"{name}: answers by opcode {seen}")
    print(f"ok   {name}: {len(out)} frames, marks {want}")


def main():
    exe = find_endpoint()
    d = workdir()
    for i, (name, how, want) in enumerate(CASES):
        run_case(exe, d, i, name, how, want)
    print("marking: OK")


if __name__ == "__main__":
    main()
