"""droce-decode's command line: exit codes, error messages, --strict,
not-RoCE packets, bad-ICRC packets still decoded, text output, pcapng and
stdin input, captures cut short by the snap length.

usage: decode_cli_test.py DROCE_DECODE WIRE_GEN
"""

import json
import os
import random
import shutil
import struct
import subprocess
import tempfile

import roce_oracle as ro


def run(decode, *args, stdin=None):
    return subprocess.run([decode, *args], capture_output=True, text=True,
                          stdin=stdin)


def main():
    decode, wire_gen = ro.tool_paths()
    fails = ro.Failures("decode-cli")
    rng = random.Random(0xC11)
    d = tempfile.mkdtemp(prefix="droce-interop-")
    try:
        # --- Bad usage: exit 2 and a message naming what was wrong.
        r = run(decode, "--bogus", "x.pcap")
        fails.eq(r.returncode, 2, "unknown option: exit code")
        fails.check("--bogus" in r.stderr, f"unknown option not named: {r.stderr!r}")
        r = run(decode)
        fails.eq(r.returncode, 2, "no capture given: exit code")
        fails.check("capture" in r.stderr, f"missing argument not named: {r.stderr!r}")
        missing = os.path.join(d, "does-not-exist.pcap")
        r = run(decode, missing)
        fails.eq(r.returncode, 2, "missing file: exit code")
        fails.check(missing in r.stderr, f"missing file not named: {r.stderr!r}")
        junk = os.path.join(d, "junk.pcap")
        open(junk, "wb").write(b"this is not a capture file at all\n" * 4)
        r = run(decode, junk)
        fails.eq(r.returncode, 2, "unreadable file: exit code")
        fails.check(junk in r.stderr, f"unreadable file not named: {r.stderr!r}")
        raw_ip = os.path.join(d, "rawip.pcap")  # link type 101 (raw IP)
        with open(raw_ip, "wb") as f:
            f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 101))
        r = run(decode, raw_ip)
        fails.eq(r.returncode, 2, "non-Ethernet link type: exit code")
        fails.check("link type" in r.stderr and raw_ip in r.stderr,
                    f"link type message: {r.stderr!r}")
        r = run(decode, "--help")
        fails.eq(r.returncode, 0, "--help: exit code")
        fails.check("--strict" in r.stdout and "--json" in r.stdout,
                    "--help lists the options")

        # --- A mixed capture.
        specs = [ro.random_spec(rng, 0x0A, False, vlan=False, payload_len=33),
                 ro.random_spec(rng, 0x11, True, vlan=True),
                 ro.random_spec(rng, 0x64, False, vlan=False, payload_len=8)]
        good = ro.wire_gen(wire_gen, specs, os.path.join(d, "good.pcap"))
        bad_icrc = bytearray(good[0])
        bad_icrc[-10] ^= 0x40  # a payload byte
        arp = bytes.fromhex("ffffffffffff020000000001" "0806") + bytes(28)
        other_udp = bytearray(good[2])
        other_udp[14 + 20 + 2:14 + 20 + 4] = struct.pack(">H", 4789)  # VXLAN
        tcp = bytearray(good[2])
        tcp[14 + 9] = 6
        # Fix the IPv4 checksum so the packet is a valid non-UDP one.
        tcp[14 + 10:14 + 12] = b"\0\0"
        s = sum(struct.unpack(">10H", bytes(tcp[14:34])))
        while s >> 16:
            s = (s & 0xFFFF) + (s >> 16)
        tcp[14 + 10:14 + 12] = struct.pack(">H", ~s & 0xFFFF)
        with_fcs = good[1] + b"\xde\xad\xbe\xef"  # trailing FCS: ignored
        truncated = good[0][:40]
        frames = [good[0], bytes(bad_icrc), arp, bytes(other_udp), bytes(tcp),
                  with_fcs, truncated, good[2]]
        mixed = os.path.join(d, "mixed.pcap")
        ro.write_pcap(mixed, frames)
        r = run(decode, "--json", mixed)
        fails.eq(r.returncode, 0, "mixed capture without --strict: exit code")
        out = [json.loads(line) for line in r.stdout.splitlines()]
        fails.eq(len(out), len(frames), "one JSON object per packet")
        if len(out) == len(frames):
            fails.eq([j["index"] for j in out], list(range(1, 9)), "indexes")
            fails.eq([j["ok"] for j in out],
                     [True, False, False, False, False, True, False, True], "ok")
            fails.eq([j["roce"] for j in out],
                     [True, True, False, False, False, True, True, True], "roce")
            fails.eq([j["error"] for j in out],
                     [None, "bad_icrc", "not_ip", "not_rocev2_port", "not_udp",
                      None, "truncated_payload", None], "errors")
            fails.eq([j["icrc_ok"] for j in out],
                     [True, False, None, None, None, True, None, True], "icrc_ok")
            b = out[1]
            for k in ("opcode", "dest_qp", "psn", "reth_va", "reth_rkey",
                      "reth_dma_length"):
                fails.eq(b.get(k), specs[0].get(k), f"bad-ICRC packet still shows {k}")
            fails.eq(b.get("payload_length"), 33, "bad-ICRC packet payload_length")
            fails.eq(out[3].get("udp_dst_port"), 4789, "not-RoCE UDP shows its port")
            fails.eq(out[5].get("aeth_msn"), specs[1]["aeth_msn"],
                     "frame with trailing FCS decodes")
            fails.eq(out[5].get("vlan_id"), specs[1]["vlan_id"], "vlan id")
            fails.eq(out[7].get("deth_src_qp"), specs[2]["deth_src_qp"], "DETH src QP")
        r = run(decode, "--json", "--strict", mixed)
        fails.eq(r.returncode, 1, "--strict with bad packets: exit code")
        fails.eq(len(r.stdout.splitlines()), len(frames),
                 "--strict still prints every packet")
        clean = os.path.join(d, "clean.pcap")
        ro.write_pcap(clean, [good[0], arp, bytes(other_udp), good[1]])
        r = run(decode, "--strict", clean)
        fails.eq(r.returncode, 0, "--strict: not-RoCE packets are not failures")

        # --- Text output: one line per packet, the key facts on it.
        r = run(decode, mixed)
        lines = r.stdout.splitlines()
        fails.eq(len(lines), len(frames), "text: one line per packet")
        if len(lines) == len(frames):
            fails.check("RC_RDMA_WRITE_ONLY" in lines[0] and "icrc=ok" in lines[0]
                        and f"psn={specs[0]['psn']}" in lines[0]
                        and "RETH[" in lines[0], f"text line 1: {lines[0]}")
            fails.check("icrc=BAD" in lines[1], f"text line 2: {lines[1]}")
            # An ARP frame (hardware type 0) is named as one; VXLAN and TCP are
            # not RoCEv2.
            fails.check("ARP malformed (unsupported)" in lines[2] and "not RoCEv2" in lines[3]
                        and "not RoCEv2" in lines[4], f"text: not-RoCE lines {lines[2:5]}")
            fails.check("AETH[" in lines[5] and "vlan=" in lines[5]
                        and "IPv6" in lines[5], f"text line 6: {lines[5]}")
            fails.check("truncated_payload" in lines[6], f"text line 7: {lines[6]}")
            fails.check("DETH[" in lines[7], f"text line 8: {lines[7]}")

        # --- Snap length shorter than the frame: reported, not overread.
        snap = os.path.join(d, "snap.pcap")
        with open(snap, "wb") as f:
            f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 64, 1))
            f.write(struct.pack("<IIII", 0, 0, 64, len(good[0])) + good[0][:64])
        r = run(decode, "--json", snap)
        j = json.loads(r.stdout.splitlines()[0]) if r.stdout else {}
        fails.eq((j.get("ok"), j.get("error"), j.get("captured_length"),
                  j.get("wire_length")),
                 (False, "truncated_payload", 64, len(good[0])), "snapped frame")

        # --- pcapng and stdin.
        if shutil.which("editcap"):
            ng = os.path.join(d, "mixed.pcapng")
            subprocess.run(["editcap", "-F", "pcapng", mixed, ng], check=True,
                           capture_output=True)
            r = run(decode, "--json", ng)
            fails.eq([json.loads(x)["error"] for x in r.stdout.splitlines()],
                     [j["error"] for j in out], "pcapng gives the same result")
        with open(mixed, "rb") as f:
            r = run(decode, "--json", "-", stdin=f)
        fails.eq(len(r.stdout.splitlines()), len(frames), "reads stdin with '-'")

        # --- ARP, neighbour discovery and ping are named, not "not RoCEv2".
        from scapy.all import ARP, Ether, ICMP, ICMPv6ND_NA, ICMPv6ND_NS, IP, IPv6
        from scapy.all import ICMPv6NDOptDstLLAddr, ICMPv6NDOptSrcLLAddr
        a, b = "02:00:00:00:00:0a", "02:00:00:00:00:0b"
        nd = [Ether(dst="ff:ff:ff:ff:ff:ff", src=a) / ARP(op=1, hwsrc=a, psrc="10.0.0.1",
                                                         pdst="10.0.0.2"),
              Ether(dst=a, src=b) / ARP(op=2, hwsrc=b, psrc="10.0.0.2", hwdst=a, pdst="10.0.0.1"),
              Ether(dst="33:33:ff:00:00:02", src=a)
              / IPv6(src="2001:db8::1", dst="ff02::1:ff00:2", hlim=255)
              / ICMPv6ND_NS(tgt="2001:db8::2") / ICMPv6NDOptSrcLLAddr(lladdr=a),
              Ether(dst=a, src=b) / IPv6(src="2001:db8::2", dst="2001:db8::1", hlim=255)
              / ICMPv6ND_NA(tgt="2001:db8::2", S=1, O=1) / ICMPv6NDOptDstLLAddr(lladdr=b),
              Ether(dst=b, src=a) / IP(src="10.0.0.1", dst="10.0.0.2") / ICMP(id=7, seq=3),
              Ether(dst=b, src=a) / IPv6(src="2001:db8::1", dst="2001:db8::2", hlim=64)
              / ICMPv6ND_NS(tgt="2001:db8::2")]  # hop limit 64: RFC 4861 says discard
        ndcap = os.path.join(d, "nd.pcap")
        ro.write_pcap(ndcap, [bytes(p) for p in nd])
        r = run(decode, ndcap)
        lines = r.stdout.splitlines()
        want = ["ARP request who-has 10.0.0.2 tell 10.0.0.1", "ARP reply 10.0.0.2 is-at " + b,
                "ICMPv6 neighbour solicitation who-has 2001:db8::2 (" + a + ")",
                "ICMPv6 neighbour advertisement 2001:db8::2 is-at " + b + " S O",
                "ICMP echo request id=0x0007 seq=3", "ICMPv6 malformed (bad_nd)"]
        fails.eq(len(lines), len(want), "neighbour frames: one line each")
        for line, w in zip(lines, want):
            fails.check(w in line, f"neighbour frame named: {line!r} has {w!r}")
        r = run(decode, "--json", ndcap)
        recs = [json.loads(x) for x in r.stdout.splitlines()]
        fails.check([x.get("protocol") for x in recs] == ["arp", "arp", "icmpv6", "icmpv6", "icmp",
                                                          "icmpv6"], "json: protocol named")
        fails.check(recs[3].get("target") == "2001:db8::2" and recs[3].get("solicited") is True,
                    f"json: advertisement fields ({recs[3]})")
        r = run(decode, "--strict", ndcap)
        fails.eq(r.returncode, 0, "--strict: neighbour frames are not RoCE failures")
    finally:
        shutil.rmtree(d)
    fails.finish()


if __name__ == "__main__":
    main()
