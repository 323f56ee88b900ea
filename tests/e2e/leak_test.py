"""Zero mbuf leaks: after a run the app checks rte_mempool_avail_count ==
size for every port pool (exit 1 and a message otherwise). Runs it under
load: a net_null port flooding RX (millions of mbufs through the pool) and
a net_pcap port replaying 1000 1-KiB WRITEs (AckReq on each, so TX is busy
with ACKs; a burst of them may be coalesced into fewer ACKs)."""

import os
import sys

from e2e_common import *  # noqa: F401,F403


def main():
    exe = find_endpoint()
    d = workdir()
    # 1. RX flood, small pool (so that the pool runs dry now and then).
    r = run_endpoint(exe, "droce_e2e_leak1", ["net_null0"],
                     ["--duration", "2", "--mbufs", "2600", "--stats-interval", "0.5"])
    sys.stdout.write(r.stdout[-1500:])
    check(r.returncode == 0, f"exit {r.returncode}: {r.stderr[-1500:]}")
    check("all pools full at shutdown" in r.stdout, "leak check (RX flood)")
    check(r.stdout.count("port 0 net_null0") >= 2, "live stats lines (--stats-interval)")
    # 2. Many requests and responses.
    cfg = os.path.join(d, "ep.toml")
    with open(cfg, "w") as f:
        f.write(f"""
[[mr]]
key = 0x100
length = 65536
fill = "byte:0x5a"
[[qp]]
qpn = {EP_QPN:#x}
peer_qpn = {PEER_QPN:#x}
local_ip = "{EP_IP}"
peer_ip = "{PEER_IP}"
local_mac = "{EP_MAC}"
peer_mac = "{PEER_MAC}"
max_send_wr = 4096
""")
    n = 1000
    data = b"\xa5" * 1024
    pkts = [request(WRITE_ONLY, psn, reth((psn % 64) * 1024, 0x100, 1024), data, ackreq=True)
            for psn in range(n)]
    in_pcap, out_pcap = os.path.join(d, "in.pcap"), os.path.join(d, "out.pcap")
    wrpcap(in_pcap, pkts)
    r = run_endpoint(exe, "droce_e2e_leak2",
                     [f"net_pcap0,rx_pcap={in_pcap},tx_pcap={out_pcap}"],
                     ["--config", cfg, "--exit-when-idle", "500"])
    sys.stdout.write(r.stdout[-1500:])
    check(r.returncode == 0, f"exit {r.returncode}: {r.stderr[-1500:]}")
    check("all pools full at shutdown" in r.stdout, "leak check (TX)")
    out = roce_frames(out_pcap)
    acks = [split(p)[0].psn for p in out if split(p)[0].opcode == ACK]
    check(len(acks) == len(out) and acks and acks[-1] == n - 1,
          f"{len(out)} frames, last ACK {acks[-1:]}")
    check(all(split(p)[1][0] >> 5 == 0 for p in out), "only ACKs, no NAK")
    check(acks == sorted(acks), "ACK PSNs in order")
    print("leak: OK")


if __name__ == "__main__":
    main()
