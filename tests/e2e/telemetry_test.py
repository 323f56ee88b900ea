"""dpdk-telemetry.py reads /droce/stats, /droce/qp,<qpn> and /droce/port,<id>
from a running droce-endpoint (net_null port: a stream of non-RoCE frames),
commands piped to its stdin, -f <file-prefix>."""

import json
import os
import subprocess
import sys
import time

from e2e_common import *  # noqa: F401,F403

TELEMETRY = "/usr/bin/dpdk-telemetry.py"
PREFIX = "droce_e2e_tel"


def query(commands):
    r = subprocess.run(["/usr/bin/python3", TELEMETRY, "-f", PREFIX],
                       input="".join(c + "\n" for c in commands),
                       capture_output=True, text=True, timeout=20)
    out = {}
    for line in r.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            out.update(json.loads(line))
    return out, r


def main():
    exe = find_endpoint()
    if not os.path.exists(TELEMETRY):
        sys.exit(f"{TELEMETRY} missing: install dpdk-dev")
    cmd = [exe] + eal(PREFIX, ["net_null0"]) + [
        "--", "--duration", "20", "--idle-sleep-us", "100",
        "--qpn", "0x17", "--peer-qpn", "0x27", "--local-ip", EP_IP, "--peer-ip", PEER_IP,
        "--peer-mac", PEER_MAC, "--rq-psn", "0x300", "--mr-size", "4096"]
    ep = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        sock = f"/var/run/dpdk/{PREFIX}/dpdk_telemetry.v2"
        for _ in range(100):
            if os.path.exists(sock):
                break
            time.sleep(0.1)
        time.sleep(1.0)  # a few stats periods
        got, r = query(["/droce/stats", "/droce/qp,0x17", "/droce/qp", "/droce/port,0",
                        "/droce/port"])
        print(r.stdout[:2000])
        check("/droce/stats" in got, "no /droce/stats answer: " + r.stdout + r.stderr)
        st = got["/droce/stats"]
        check(st["ports"] == 1 and st["qps"] == 1, f"stats {st}")
        # net_null hands back mbufs as they were: zeros, or pieces of the
        # frames the port sent (its announcements), cut to 64 bytes. Counted
        # and dropped, never delivered to a QP.
        check(st["rx_frames"] > 0 and st["rx_delivered"] == 0 and st["rx_unknown_qpn"] == 0 and
              st["rx_not_roce"] + st["rx_malformed"] + st["arp_bad"] >= st["rx_frames"],
              f"net_null frames counted and dropped {st}")
        qp = got["/droce/qp"]
        # The last /droce/qp answer (the list) replaced the first in `got`:
        got1, _ = query(["/droce/qp,0x17"])
        qp = got1["/droce/qp"]
        check(qp["qpn"] == 0x17 and qp["dest_qpn"] == 0x27, f"qp {qp}")
        check(qp["state"] == "RTS" and qp["expected_psn"] == 0x300, f"qp {qp}")
        check("naks_seq_sent" in qp, "QP counters missing")
        check(got["/droce/qp"] == [0x17], f"qp list {got['/droce/qp']}")
        port = got["/droce/port"]
        check(port == [0], f"port list {port}")
        got2, _ = query(["/droce/port,0"])
        p0 = got2["/droce/port"]
        check(p0["name"] == "net_null0" and p0["eth_ipackets"] > 0, f"port {p0}")
        check(p0["mempool_size"] > 0, "mempool size")
        check(p0["link_up"] == 1 and p0["port_link_downs"] == 0, f"link state {p0}")
        # The port owns its QP's address: it announced it (a gratuitous ARP,
        # and an advertisement of its link-local IPv6 address).
        check(p0["arp_requests_out"] == 1 and p0["nd_adverts_out"] == 1,
              f"announcements {p0['arp_requests_out']} {p0['nd_adverts_out']}")
        check("neighbours" in p0, "port has no neighbour count")
        got4, _ = query(["/droce/neighbours,0"])
        check(got4.get("/droce/neighbours") == {}, f"neighbours {got4}")
        got5, _ = query(["/droce/neighbours,7"])
        check(not got5.get("/droce/neighbours"), f"unknown port answered {got5}")
        # A QPN that does not exist is an error, not a crash.
        got3, _ = query(["/droce/qp,0x99"])
        check(got3.get("/droce/qp") is None, f"unknown QPN answered {got3}")
    finally:
        ep.send_signal(2)  # SIGINT: clean shutdown
        out, err = ep.communicate(timeout=30)
    sys.stdout.write(out[-1500:])
    check(ep.returncode == 0, f"exit code {ep.returncode}: {err[-2000:]}")
    check("all pools full at shutdown" in out, "leak check line missing")
    print("telemetry: OK")


if __name__ == "__main__":
    main()
