"""scapy builds RoCEv2 packets -> droce-decode --json parses them.

Every opcode family, IPv4 and IPv6, VLAN or not, payloads 0..4096: droce
must agree with the spec on every field and find the ICRC correct. For IPv4
the ICRC is scapy's own (scapy.contrib.roce computes it); scapy 2.5 does not
do IPv6, so there the ICRC comes from roce_oracle.icrc, which this test also
checks against scapy on every IPv4 packet.

usage: scapy_to_droce_test.py DROCE_DECODE WIRE_GEN
"""

import ipaddress
import os
import random
import struct
import tempfile

import roce_oracle as ro
from scapy.all import IP, UDP, Dot1Q, Ether, IPv6, Raw, conf, raw, wrpcap
from scapy.contrib.roce import BTH

conf.verb = 0
PER_FAMILY_PER_IP = 100


def scapy_frame(s, rng):
    v6 = ":" in s["src_ip"]
    op = s["opcode"]
    payload = ro.spec_payload(s)
    pad = ro.pad_count(len(payload))
    l2 = Ether(src=s["src_mac"], dst=s["dst_mac"])
    if s.get("vlan"):
        l2 = l2 / Dot1Q(vlan=s["vlan_id"], prio=s["pcp"])
    tos = s["dscp"] << 2 | s["ecn"]
    if v6:
        l3 = IPv6(src=s["src_ip"], dst=s["dst_ip"], tc=tos,
                  fl=s["flow_label"], hlim=s["ttl"])
    else:
        # Random IP id and DF: droce must not care about either.
        l3 = IP(src=s["src_ip"], dst=s["dst_ip"], tos=tos, ttl=s["ttl"],
                id=rng.getrandbits(16), flags="DF" if rng.random() < 0.8 else 0)
    # UDP checksum: 0 as NICs send it, or a real one (scapy computes it);
    # the ICRC masks it either way.
    udp = UDP(sport=s["udp_src_port"], dport=ro.ROCE_PORT,
              chksum=0 if rng.random() < 0.5 else None)
    bth = BTH(opcode=op, solicited=int(s["solicited"]),
              migreq=int(s["mig_req"]), padcount=pad, pkey=s["pkey"],
              fecn=int(s["fecn"]), becn=int(s["becn"]), dqpn=s["dest_qp"],
              ackreq=int(s["ack_req"]), psn=s["psn"])
    if v6:
        bth.icrc = 0  # filled below with the independent ICRC
    pkt = l2 / l3 / udp / bth / Raw(ro.encode_ext(op, s) + payload +
                                    bytes(pad))
    frame = bytearray(raw(pkt))
    l3_off = ro.l3_offset(frame)
    own = ro.icrc_bytes(bytes(frame[l3_off:-4]), v6)
    if v6:
        frame[-4:] = own
    return bytes(frame), own


def expected_json(s):
    v6 = ":" in s["src_ip"]
    op = s["opcode"]
    payload = ro.spec_payload(s)
    e = {
        "ok": True, "roce": True, "error": None, "icrc_ok": True,
        "ip_version": 6 if v6 else 4,
        "src_mac": s["src_mac"], "dst_mac": s["dst_mac"],
        "dscp": s["dscp"], "ecn": s["ecn"], "ttl": s["ttl"],
        "udp_src_port": s["udp_src_port"], "udp_dst_port": ro.ROCE_PORT,
        "opcode": op, "opcode_name": ro.OPCODES[op][0],
        "solicited": s["solicited"], "mig_req": s["mig_req"],
        "pad_count": ro.pad_count(len(payload)), "pkey": s["pkey"],
        "fecn": s["fecn"], "becn": s["becn"], "dest_qp": s["dest_qp"],
        "ack_req": s["ack_req"], "psn": s["psn"],
        "payload_length": len(payload),
    }
    if s.get("vlan"):
        e.update(vlan_id=s["vlan_id"], pcp=s["pcp"])
    if v6:
        e["flow_label"] = s["flow_label"]
    for h in ro.ext_headers(op):
        for f in ro.EXT_FIELDS[h]:
            e[f] = s[f]
    return e


def main():
    decode, _ = ro.tool_paths()
    rng = random.Random(0x5CA9)
    specs = ro.generate_specs(rng, PER_FAMILY_PER_IP)
    fails = ro.Failures("scapy->droce")
    frames, icrcs = [], []
    for i, s in enumerate(specs):
        frame, own = scapy_frame(s, rng)
        frames.append(frame)
        icrcs.append(own)
        if ":" not in s["src_ip"]:
            # The oracle ICRC must match scapy's on IPv4, or it proves nothing
            # on IPv6.
            fails.eq(own.hex(), frame[-4:].hex(),
                     f"pkt {i + 1}: independent ICRC vs scapy's (IPv4)")
    with tempfile.TemporaryDirectory(prefix="droce-interop-") as d:
        pcap = os.path.join(d, "scapy.pcap")
        wrpcap(pcap, [Ether(f) for f in frames])
        out = ro.decode_json(decode, pcap, "--strict")
    fails.eq(len(out), len(specs), "number of decoded packets")
    for i, (s, j) in enumerate(zip(specs, out)):
        where = f"pkt {i + 1} ({ro.OPCODES[s['opcode']][0]}, " \
                f"{'v6' if ':' in s['src_ip'] else 'v4'})"
        fails.eq(j["index"], i + 1, f"{where}: index")
        for k, want in expected_json(s).items():
            fails.eq(j.get(k, "<absent>"), want, f"{where}: {k}")
        for k in ("src_ip", "dst_ip"):
            fails.check(k in j and ipaddress.ip_address(j[k]) ==
                        ipaddress.ip_address(s[k]),
                        f"{where}: {k} {j.get(k)} != {s[k]}")
        fails.eq(j.get("icrc"), struct.unpack("<I", icrcs[i])[0],
                 f"{where}: icrc value")
        # Headers the opcode does not carry must not be reported.
        carried = {f for h in ro.ext_headers(s["opcode"])
                   for f in ro.EXT_FIELDS[h]}
        for f in ro.ALL_EXT_FIELDS:
            if f not in carried:
                fails.check(f not in j, f"{where}: unexpected field {f}")
        if not s.get("vlan"):
            fails.check("vlan_id" not in j, f"{where}: unexpected vlan_id")
    per_family = {f: 0 for f in ro.FAMILIES}
    for s in specs:
        for f, ops in ro.FAMILIES.items():
            per_family[f] += s["opcode"] in ops
    fails.check(min(per_family.values()) >= 2 * PER_FAMILY_PER_IP,
                f"coverage per family: {per_family}")
    fails.finish()


if __name__ == "__main__":
    main()
