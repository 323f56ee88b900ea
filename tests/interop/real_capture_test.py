"""Known answers from real hardware: packets a NIC put on the wire, with the
ICRC the NIC computed. droce-decode must accept them (ICRC correct) and
decode every field; the independent ICRC in roce_oracle must agree too.

Sources (published as hex / field values; no capture file was available):
 1. A CNP captured on a Mellanox ConnectX-4 Lx, as hex-dumped in scapy's RoCE
    regression tests (test/contrib/roce.uts, "RoCE CNP captured on
    ConnectX-4 Lx"). Note the NIC sends UDP source port 0 in CNPs.
 2. A UC SEND ONLY between two Mellanox MACs (OUI 24:8a:07) from the same
    scapy tests, which give its fields, the IPv4 checksum 0xb4d5, the UDP
    checksum 0xaca2 and the ICRC bytes 78 f3 53 f3. The frame is rebuilt
    here byte by byte from those values; the IPv4 and UDP checksums being
    right confirms the transcription.

usage: real_capture_test.py DROCE_DECODE WIRE_GEN
"""

import os
import struct
import tempfile

import roce_oracle as ro

CX4LX_CNP = bytes.fromhex(
    "e41d2dab2bc2" "7cfe90643b32" "0800"
    "45c2003c718c400040119161" "0a001101" "0a001201"       # IPv4
    "000012b700280000"                                     # UDP
    "8100ffff40000118" "00000000"                          # BTH
    + "00" * 16                                            # CNP reserved
    + "82fd002a")                                          # ICRC


def uc_send_only():
    payload = bytes.fromhex("4630818be28935d90e9a95505401be885e50")  # 18 B
    bth = bytes([0x24, 0x40 | 2 << 4, 0xFF, 0xFF, 0]) + (211).to_bytes(3, "big") \
        + b"\x00" + (13571856).to_bytes(3, "big")
    udp = struct.pack(">HHHH", 49152, 4791, 44, 0xACA2)
    ip = bytearray(struct.pack(">BBHHHBBH4s4s", 0x45, 0x01, 64, 1144, 0x4000,
                               64, 17, 0xB4D5, bytes([192, 168, 0, 7]),
                               bytes([192, 168, 0, 7])))
    eth = bytes.fromhex("248a07a8fa22" "248a07a8fa22" "0800")
    return eth + bytes(ip) + udp + bth + payload + b"\x00\x00" + \
        bytes.fromhex("78f353f3"), payload


def udp_checksum_ok(frame):
    ip = frame[14:34]
    udp = frame[34:]
    pseudo = ip[12:20] + struct.pack(">BBH", 0, 17, len(udp))
    data = pseudo + udp + (b"\0" if len(udp) % 2 else b"")
    s = sum(struct.unpack(f">{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s == 0xFFFF


def main():
    decode, _ = ro.tool_paths()
    fails = ro.Failures("real-capture")
    uc, uc_payload = uc_send_only()
    fails.check(ro.ipv4_header_ok(uc[14:34]), "UC: IPv4 checksum transcription")
    fails.check(udp_checksum_ok(uc), "UC: UDP checksum transcription")
    fails.check(ro.ipv4_header_ok(CX4LX_CNP[14:34]), "CNP: IPv4 checksum")
    for name, fr in (("CNP", CX4LX_CNP), ("UC", uc)):
        fails.eq(ro.icrc_bytes(fr[14:-4], False).hex(), fr[-4:].hex(),
                 f"{name}: independent ICRC vs the NIC's")
    with tempfile.TemporaryDirectory(prefix="droce-interop-") as d:
        pcap = os.path.join(d, "real.pcap")
        ro.write_pcap(pcap, [CX4LX_CNP, uc])
        out = ro.decode_json(decode, pcap, "--strict")
    fails.eq(len(out), 2, "packets decoded")
    if len(out) == 2:
        cnp, j = out
        want_cnp = {
            "ok": True, "icrc_ok": True, "opcode": 0x81, "opcode_name": "CNP",
            "dest_qp": 0x118, "psn": 0, "becn": True, "fecn": False,
            "ack_req": False, "pkey": 0xFFFF, "pad_count": 0,
            "payload_length": 0, "src_ip": "10.0.17.1", "dst_ip": "10.0.18.1",
            "dscp": 0x30, "ecn": 2, "ttl": 64, "udp_src_port": 0,
            "icrc": 0x2A00FD82,
        }
        for k, v in want_cnp.items():
            fails.eq(cnp.get(k), v, f"CNP: {k}")
        want_uc = {
            "ok": True, "icrc_ok": True, "opcode": 0x24,
            "opcode_name": "UC_SEND_ONLY", "dest_qp": 211, "psn": 13571856,
            "mig_req": True, "pad_count": 2, "payload_length": len(uc_payload),
            "src_ip": "192.168.0.7", "dscp": 0, "ecn": 1, "udp_src_port": 49152,
        }
        for k, v in want_uc.items():
            fails.eq(j.get(k), v, f"UC: {k}")
    fails.finish()


if __name__ == "__main__":
    main()
