"""Everything droce builds decodes in tshark as RoCEv2 (InfiniBand over UDP
4791): no malformed frames, no expert errors, no unknown opcodes (CNP aside:
Wireshark 4.0 has no name for opcode 0x81), and tshark's reading of the BTH
and extension headers agrees with the spec the packet was built from.

Wireshark's heuristic sub-dissectors for InfiniBand payloads (SMC-R, NVMe,
iSER, ...) are all disabled so that random payload bytes are not taken for
those protocols and reported malformed.

The one expert error allowed is tshark's "Illegal checksum value (0)" on
IPv6 UDP: RFC 8200 wants a UDP checksum over IPv6, but RoCEv2 senders leave
it zero (annex A17.4.3; the ICRC covers the packet) and droce does the same.

usage: tshark_test.py DROCE_DECODE WIRE_GEN
"""

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

import roce_oracle as ro

SEVERITY_ERROR = 0x00800000  # Wireshark's PI_ERROR
# Short names of the heuristic dissectors on "infiniband.payload" in
# Wireshark 4.0 (tshark -G heuristic-decodes lists their protocols).
IB_HEURISTICS = [
    "smcr_infiniband", "smb_direct_infiniband", "rpcrdma_infiniband",
    "nvme_rdma", "lnet_ib", "iser_infiniband", "eth_over_ib",
    "mellanox_eoib", "sdp_infiniband", "fc_infiniband", "drbd_rdma",
]
FIELDS = [
    "frame.number", "frame.protocols", "_ws.col.Info", "_ws.malformed",
    "_ws.expert.message", "_ws.expert.severity", "ip.version", "vlan.id",
    "infiniband.bth.opcode", "infiniband.bth.se", "infiniband.bth.m",
    "infiniband.bth.padcnt", "infiniband.bth.tver", "infiniband.bth.p_key",
    "infiniband.bth.destqp", "infiniband.bth.a", "infiniband.bth.psn",
    "infiniband.reth.va", "infiniband.reth.r_key", "infiniband.reth.dmalen",
    "infiniband.aeth.syndrome", "infiniband.aeth.msn",
    "infiniband.deth.q_key", "infiniband.deth.srcqp",
    "infiniband.atomicacketh.origremdt", "infiniband.atomiceth.swapdt",
    "infiniband.atomiceth.cmpdt", "infiniband.invariant.crc",
]
# tshark field -> spec key (integers) for the headers tshark decodes.
INT_FIELDS = {
    "infiniband.bth.opcode": "opcode", "infiniband.bth.p_key": "pkey",
    "infiniband.bth.destqp": "dest_qp", "infiniband.bth.psn": "psn",
    "infiniband.reth.va": "reth_va", "infiniband.reth.r_key": "reth_rkey",
    "infiniband.reth.dmalen": "reth_dma_length",
    "infiniband.aeth.syndrome": "aeth_syndrome",
    "infiniband.aeth.msn": "aeth_msn",
    "infiniband.deth.q_key": "deth_qkey",
    "infiniband.deth.srcqp": "deth_src_qp",
    "infiniband.atomicacketh.origremdt": "atomic_ack_original",
    "infiniband.atomiceth.swapdt": "atomic_swap_add",
    "infiniband.atomiceth.cmpdt": "atomic_compare",
}
BOOL_FIELDS = {"infiniband.bth.se": "solicited", "infiniband.bth.m": "mig_req",
               "infiniband.bth.a": "ack_req"}


def as_int(v):
    return int(v, 0)


def as_bool(v):
    return v in ("1", "True", "true")


def heuristic_args(fails, pcap):
    listed = subprocess.run(["tshark", "-G", "heuristic-decodes"],
                            capture_output=True, text=True).stdout
    n_listed = sum(1 for line in listed.splitlines()
                   if line.startswith("infiniband.payload\t"))
    args = []
    for name in IB_HEURISTICS:
        r = subprocess.run(["tshark", "-r", pcap, "-c", "1",
                            "--disable-heuristic", name],
                           capture_output=True, text=True)
        if r.returncode == 0:
            args += ["--disable-heuristic", name]
    fails.check(len(args) // 2 >= n_listed,
                f"only {len(args) // 2} of {n_listed} infiniband.payload "
                f"heuristics could be disabled; update IB_HEURISTICS")
    return args


def main():
    _, wire_gen = ro.tool_paths()
    if shutil.which("tshark") is None:
        print("tshark not installed", file=sys.stderr)
        sys.exit(77)  # meson: skipped
    rng = random.Random(0x75A4)
    specs = []
    for op in sorted(ro.OPCODES):
        for v6 in (False, True):
            for vlan in (False, True):
                for _ in range(3):
                    specs.append(ro.random_spec(rng, op, v6, vlan=vlan))
    fails = ro.Failures("tshark")
    with tempfile.TemporaryDirectory(prefix="droce-interop-") as d:
        pcap = os.path.join(d, "droce.pcap")
        frames = ro.wire_gen(wire_gen, specs, pcap)
        heur = heuristic_args(fails, pcap)
        cmd = ["tshark", "-n", "-r", pcap, *heur, "-T", "json"]
        for f in FIELDS:
            cmd += ["-e", f]
        r = subprocess.run(cmd, capture_output=True, text=True)
        fails.eq(r.returncode, 0, f"tshark exit code ({r.stderr.strip()})")
        # The display-filter form of the same check, as a user would run it.
        bad = subprocess.run(
            ["tshark", "-n", "-r", pcap, *heur, "-Y",
             "_ws.malformed || (_ws.expert.severity >= error && "
             "!(ipv6 && udp.checksum == 0))"],
            capture_output=True, text=True).stdout.strip()
        fails.eq(bad, "", "frames tshark flags malformed or with errors")
    pkts = json.loads(r.stdout or "[]")
    fails.eq(len(pkts), len(specs), "frames tshark read")
    for i, (s, fr, pk) in enumerate(zip(specs, frames, pkts)):
        L = pk["_source"]["layers"]
        one = lambda k: L.get(k, [None])[0]  # noqa: E731
        v6 = ":" in s["src_ip"]
        where = f"frame {i + 1} ({ro.OPCODES[s['opcode']][0]}, " \
                f"{'v6' if v6 else 'v4'}{', vlan' if s.get('vlan') else ''})"
        protos = one("frame.protocols") or ""
        fails.check("udp:infiniband" in protos,
                    f"{where}: not decoded as RoCEv2: {protos}")
        fails.check("_ws.malformed" not in L, f"{where}: malformed")
        for msg, sev in zip(L.get("_ws.expert.message", []),
                            L.get("_ws.expert.severity", [])):
            if as_int(sev) >= SEVERITY_ERROR:
                fails.check(v6 and msg.startswith("Illegal checksum value (0)"),
                            f"{where}: expert error: {msg}")
        info = one("_ws.col.Info") or ""
        if s["opcode"] == 0x81:
            fails.check(info.startswith("Unknown OpCode"),
                        f"{where}: tshark learned CNP? update this test: {info}")
        else:
            fails.check("Unknown OpCode" not in info,
                        f"{where}: unknown opcode: {info}")
        if s.get("vlan"):
            fails.eq(as_int(one("vlan.id") or "-1"), s["vlan_id"], f"{where}: vlan")
        fails.eq(as_int(one("ip.version") or "6"), 6 if v6 else 4,
                 f"{where}: ip version")
        for tf, key in INT_FIELDS.items():
            if key in s or tf.startswith("infiniband.bth."):
                got = one(tf)
                fails.eq(as_int(got) if got is not None else None, s[key],
                         f"{where}: {tf}")
        for tf, key in BOOL_FIELDS.items():
            fails.eq(as_bool(one(tf) or ""), s[key], f"{where}: {tf}")
        fails.eq(as_int(one("infiniband.bth.padcnt") or "-1"),
                 ro.pad_count(len(ro.spec_payload(s))), f"{where}: padcnt")
        fails.eq(as_int(one("infiniband.bth.tver") or "-1"), 0, f"{where}: tver")
        # tshark shows the ICRC (the 4 bytes read as a big-endian number)
        # without checking it; it must be the one droce wrote.
        crc = one("infiniband.invariant.crc")
        if s["opcode"] == 0x81:
            continue  # tshark stops at an opcode it does not know
        fails.eq(as_int(crc) if crc else None,
                 int.from_bytes(fr[-4:], "big"), f"{where}: invariant CRC")
    fails.finish()


if __name__ == "__main__":
    main()
