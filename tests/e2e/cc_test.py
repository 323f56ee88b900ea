"""droce-endpoint under every registered congestion control (--cc): the
same requests replayed through net_pcap (a WRITE ONLY with AckReq, a
four-packet READ, a CE-marked WRITE) are answered the same way whatever
the algorithm: an ACK, the READ's FIRST/MIDDLE/LAST responses, a CNP, all
with a good ICRC. The responder's answers are not held by its own CC."""

import os
import sys

from e2e_common import *  # noqa: F401,F403

RKEY = 0x1234


def algorithms(exe):
    """The registry's names, from the --cc line of droce-endpoint's --help."""
    r = subprocess.run([exe, "--no-huge", "--no-pci", "--", "--help"], capture_output=True,
                       text=True, timeout=30)
    line = next(l for l in r.stdout.splitlines() if l.strip().startswith("--cc "))
    return [n.strip() for n in line[line.index("(") + 1:line.index(")")].split(",")]


def main():
    exe = find_endpoint()
    d = workdir()
    names = algorithms(exe)
    check({"none", "dcqcn", "timely", "hpcc", "swift"} <= set(names), f"algorithms {names}")
    reqs = [
        request(WRITE_ONLY, 10, reth(0, RKEY, 8), b"ABCDEFGH", ackreq=True),
        request(READ_REQ, 11, reth(0, RKEY, 3 * 1024 + 512), ackreq=True),
        request(WRITE_ONLY, 15, reth(0x100, RKEY, 8), b"IJKLMNOP", ackreq=True, ecn=CE),
    ]
    for i, cc in enumerate(names):
        in_pcap = os.path.join(d, f"in{i}.pcap")
        out_pcap = os.path.join(d, f"out{i}.pcap")
        wrpcap(in_pcap, reqs)
        r = run_endpoint(exe, f"droce_e2e_cc{i}",
                         [f"net_pcap0,rx_pcap={in_pcap},tx_pcap={out_pcap}"],
                         ["--qpn", hex(EP_QPN), "--peer-qpn", hex(PEER_QPN), "--rq-psn", "10",
                          "--local-mac", EP_MAC, "--peer-mac", PEER_MAC, "--local-ip", EP_IP,
                          "--peer-ip", PEER_IP, "--mr-size", "65536", "--mr-key", hex(RKEY),
                          "--mtu", "1024", "--cc", cc,
                          "--exit-when-idle", "300", "--idle-sleep-us", "50"])
        if r.returncode != 0:
            sys.stderr.write(r.stderr)
        check(r.returncode == 0, f"--cc {cc}: droce-endpoint exit code {r.returncode}")
        seen = {}
        for p in roce_frames(out_pcap):
            check(icrc_ok(p), f"--cc {cc}: ICRC or IPv4 checksum wrong: " + p.summary())
            seen[p[BTH].opcode] = seen.get(p[BTH].opcode, 0) + 1
        check(seen.get(ACK, 0) >= 1 and seen.get(READ_FIRST) == 1 and
              seen.get(READ_MIDDLE) == 2 and seen.get(READ_LAST) == 1 and seen.get(CNP) == 1,
              f"--cc {cc}: answers by opcode {seen}")
        print(f"ok   --cc {cc}: answers by opcode {seen}")
    print("cc: OK")


if __name__ == "__main__":
    main()
