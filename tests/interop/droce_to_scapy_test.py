"""droce builds RoCEv2 packets (wire_gen -> build_packet) -> scapy parses.

Every opcode family, IPv4 and IPv6, VLAN or not, payloads 0..4096. scapy
dissects Ethernet/802.1Q/IP/IPv6/UDP/BTH (and AETH for ACKs, the CNP
padding); scapy.contrib.roce has no RETH, DETH, AtomicETH, AtomicAckETH,
ImmDt or IETH layers, so those are compared as raw bytes at the offsets
roce_oracle computes from IBA 9.3. The ICRC is recomputed by scapy for IPv4
and by roce_oracle.icrc for IPv4 and IPv6.

usage: droce_to_scapy_test.py DROCE_DECODE WIRE_GEN
"""

import ipaddress
import os
import random
import tempfile

import roce_oracle as ro
from scapy.all import IP, UDP, Dot1Q, Ether, IPv6, conf, raw
from scapy.contrib.roce import AETH, BTH, CNPPadding

conf.verb = 0
PER_FAMILY_PER_IP = 100


def check_frame(fails, i, s, frame):
    v6 = ":" in s["src_ip"]
    op = s["opcode"]
    payload = ro.spec_payload(s)
    pad = ro.pad_count(len(payload))
    where = f"pkt {i + 1} ({ro.OPCODES[op][0]}, {'v6' if v6 else 'v4'})"
    p = Ether(frame)
    fails.eq(p.src, s["src_mac"], f"{where}: src mac")
    fails.eq(p.dst, s["dst_mac"], f"{where}: dst mac")
    l3_off = 14
    if s.get("vlan"):
        fails.check(Dot1Q in p, f"{where}: no 802.1Q tag")
        if Dot1Q not in p:
            return
        fails.eq(p[Dot1Q].vlan, s["vlan_id"], f"{where}: vlan id")
        fails.eq(p[Dot1Q].prio, s["pcp"], f"{where}: pcp")
        fails.eq(p[Dot1Q].id, 0, f"{where}: DEI")
        l3_off = 18
    else:
        fails.check(Dot1Q not in p, f"{where}: unexpected 802.1Q tag")
    tos = s["dscp"] << 2 | s["ecn"]
    l3_len = len(frame) - l3_off
    if v6:
        fails.check(IPv6 in p, f"{where}: scapy sees no IPv6")
        if IPv6 not in p:
            return
        ip = p[IPv6]
        fails.eq(ip.tc, tos, f"{where}: traffic class")
        fails.eq(ip.fl, s["flow_label"], f"{where}: flow label")
        fails.eq(ip.plen, l3_len - 40, f"{where}: payload length")
        fails.eq(ip.nh, 17, f"{where}: next header")
        fails.eq(ip.hlim, s["ttl"], f"{where}: hop limit")
        ip_len = 40
    else:
        fails.check(IP in p, f"{where}: scapy sees no IPv4")
        if IP not in p:
            return
        ip = p[IP]
        fails.eq(ip.ihl, 5, f"{where}: ihl")
        fails.eq(ip.tos, tos, f"{where}: tos")
        fails.eq(ip.len, l3_len, f"{where}: total length")
        fails.eq(int(ip.flags), 2, f"{where}: flags (DF)")
        fails.eq(ip.frag, 0, f"{where}: fragment offset")
        fails.eq(ip.ttl, s["ttl"], f"{where}: ttl")
        fails.eq(ip.proto, 17, f"{where}: protocol")
        fails.check(ro.ipv4_header_ok(frame[l3_off:l3_off + 20]),
                    f"{where}: IPv4 header checksum wrong")
        ip_len = 20
    fails.check(ipaddress.ip_address(ip.src) == ipaddress.ip_address(s["src_ip"]),
                f"{where}: src ip {ip.src}")
    fails.check(ipaddress.ip_address(ip.dst) == ipaddress.ip_address(s["dst_ip"]),
                f"{where}: dst ip {ip.dst}")
    u = p[UDP]
    fails.eq(u.sport, s["udp_src_port"], f"{where}: udp sport")
    fails.eq(u.dport, ro.ROCE_PORT, f"{where}: udp dport")
    fails.eq(u.len, l3_len - ip_len, f"{where}: udp length")
    fails.eq(u.chksum, 0, f"{where}: udp checksum (annex A17.4.3: 0)")
    fails.check(BTH in p, f"{where}: scapy sees no BTH")
    if BTH not in p:
        return
    b = p[BTH]
    fails.eq(b.opcode, op, f"{where}: opcode")
    fails.eq(b.solicited, int(s["solicited"]), f"{where}: solicited")
    fails.eq(b.migreq, int(s["mig_req"]), f"{where}: migreq")
    fails.eq(b.padcount, pad, f"{where}: padcount")
    fails.eq(b.version, 0, f"{where}: tver")
    fails.eq(b.pkey, s["pkey"], f"{where}: pkey")
    fails.eq(b.fecn, int(s["fecn"]), f"{where}: fecn")
    fails.eq(b.becn, int(s["becn"]), f"{where}: becn")
    fails.eq(b.resv6, 0, f"{where}: BTH reserved (byte 4)")
    fails.eq(b.dqpn, s["dest_qp"], f"{where}: dest qp")
    fails.eq(b.ackreq, int(s["ack_req"]), f"{where}: ackreq")
    fails.eq(b.resv7, 0, f"{where}: BTH reserved (byte 8)")
    fails.eq(b.psn, s["psn"], f"{where}: psn")
    # Everything between the BTH and the ICRC, by IBA 9.3 offsets.
    bth_off = l3_off + ip_len + 8
    ext = ro.encode_ext(op, s)
    after_bth = frame[bth_off + 12:-4]
    fails.eq(after_bth[:len(ext)].hex(), ext.hex(), f"{where}: extension headers")
    fails.eq(after_bth[len(ext):len(ext) + len(payload)], payload,
             f"{where}: payload")
    fails.eq(after_bth[len(ext) + len(payload):], bytes(pad), f"{where}: pad")
    fails.eq(len(after_bth), len(ext) + len(payload) + pad,
             f"{where}: length after BTH")
    if op == 0x11:
        fails.check(AETH in p, f"{where}: scapy sees no AETH")
        if AETH in p:
            fails.eq(p[AETH].syndrome, s["aeth_syndrome"], f"{where}: syndrome")
            fails.eq(p[AETH].msn, s["aeth_msn"], f"{where}: msn")
    if op == 0x81:
        fails.check(CNPPadding in p, f"{where}: scapy sees no CNP padding")
        if CNPPadding in p:
            fails.eq((p[CNPPadding].reserved1, p[CNPPadding].reserved2), (0, 0),
                     f"{where}: CNP reserved")
    # ICRC: the independent one for both families, scapy's for IPv4.
    own = ro.icrc_bytes(frame[l3_off:-4], v6)
    fails.eq(frame[-4:].hex(), own.hex(), f"{where}: ICRC vs independent")
    if not v6:
        q = p.copy()
        q[BTH].icrc = None
        fails.eq(frame[-4:].hex(), raw(q)[-4:].hex(), f"{where}: ICRC vs scapy")


def main():
    _, wire_gen = ro.tool_paths()
    rng = random.Random(0xD20C)
    specs = ro.generate_specs(rng, PER_FAMILY_PER_IP)
    fails = ro.Failures("droce->scapy")
    with tempfile.TemporaryDirectory(prefix="droce-interop-") as d:
        frames = ro.wire_gen(wire_gen, specs, os.path.join(d, "droce.pcap"))
    for i, (s, f) in enumerate(zip(specs, frames)):
        check_frame(fails, i, s, f)
    fails.finish()


if __name__ == "__main__":
    main()
