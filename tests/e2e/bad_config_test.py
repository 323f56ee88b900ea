"""Bad configuration ends with exit code 2 and a message naming the option,
never a crash: one case per kind (unknown app/EAL option, missing port, QPN
out of range or taken, MR larger than EAL memory, bad MTU/MAC/CC, unknown or
malformed config keys, TOML syntax error, spraying without selective
repeat)."""

import os
import subprocess
import sys

from e2e_common import *  # noqa: F401,F403

QP_FLAGS = ["--qpn", "0x11", "--peer-qpn", "0x22", "--local-ip", EP_IP, "--peer-ip",
            PEER_IP, "--peer-mac", PEER_MAC]


def main():
    exe = find_endpoint()
    d = workdir()

    def cfg(name, text):
        path = os.path.join(d, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    qp_cfg = f"""
[[qp]]
qpn = 0x11
peer_qpn = 0x22
local_ip = "{EP_IP}"
peer_ip = "{PEER_IP}"
peer_mac = "{PEER_MAC}"
"""
    cases = [
        # (name, EAL extra args, app args, text that must be in stderr)
        ("unknown app option", [], ["--bogus"], "--bogus"),
        ("unknown EAL option", ["--bogus-eal"], [], "EAL"),
        ("port that does not exist", [], ["--port", "net_nope"], "port: no port 'net_nope'"),
        ("port id that does not exist", [], ["--port", "7"], "port: no port '7'"),
        ("QPN out of range (flag)", [], QP_FLAGS[:0] + ["--qpn", "0x1000000"] + QP_FLAGS[2:],
         "--qpn"),
        ("QPN reserved (config)", [], ["--config", cfg("q1.toml", qp_cfg.replace(
            "qpn = 0x11", "qpn = 1"))], "qpn: 0x1 is out of range"),
        ("QPN given twice", [], ["--config", cfg("q2.toml", qp_cfg + qp_cfg)],
         "qp[1]: qpn: QPN 0x11 is already in use"),
        ("MR larger than memory", [], ["--mr-size", str(1 << 30)], "--mr-size"),
        ("MR larger than 4 GiB", [], ["--mr-size", str(5 << 30)], "mr"),
        ("bad MTU", [], QP_FLAGS + ["--mtu", "1000"], "--mtu"),
        ("bad MAC", [], QP_FLAGS[:-2] + ["--peer-mac", "02:00:zz:00:00:01"],
         "--peer-mac: '02:00:zz:00:00:01' is not a MAC address"),
        ("unknown CC", [], QP_FLAGS + ["--cc", "nope"], "cc"),
        ("bad --address", [], ["--address", "10.0.0.300"], "--address"),
        ("--ping with no address to ping from", [], ["--ping", "10.0.0.9"],
         "--ping: 10.0.0.9: port 0 has no IPv4 address"),
        ("--ping of IPv4 from an IPv6-only port", [], ["--address", "fd00::1", "--ping", "10.0.0.9"],
         "no IPv4 address to ping from"),
        ("unknown config key", [], ["--config", cfg("k.toml", qp_cfg + "bogus = 1\n")],
         "qp[0].bogus: unknown key"),
        ("config value out of range", [], ["--config", cfg("r.toml", qp_cfg + "dscp = 64\n")],
         "qp[0].dscp"),
        ("spray without selective repeat (config)", [],
         ["--config", cfg("e.toml", qp_cfg + 'entropy = "spray"\n')],
         "qp[0].entropy: spray reorders packets: it needs qp[0].recovery sr"),
        ("flowlet without selective repeat (flag)", [], QP_FLAGS + ["--entropy", "flowlet"],
         "--entropy: flowlet reorders packets: it needs --recovery sr"),
        ("TOML syntax error", [], ["--config", cfg("s.toml", "[[qp]\n")], "config: "),
        ("missing config file", [], ["--config", os.path.join(d, "none.toml")], "--config"),
        ("MR key slot too large", [], ["--mr-size", "4096", "--mr-key", "0xffffff00"],
         "key 0xffffff00"),
        ("missing peer IP", [], ["--qpn", "0x11", "--local-ip", EP_IP, "--peer-mac",
                                  PEER_MAC], "peer_ip"),
        ("too few mbufs", [], ["--mbufs", "10"], "mbufs"),
        ("completions file not writable", [],
         ["--completions", os.path.join(d, "no-such-dir", "wc.jsonl")],
         "--completions: cannot write"),
        ("fill file missing", [], ["--config", cfg("f1.toml", "[[mr]]\nlength = 4096\n"
                                                 f"fill = \"file:{d}/none.bin\"\n")],
         "mr[0].fill: cannot read"),
        ("fill file longer than the region", [],
         ["--mr-size", "16", "--mr-fill", f"file:{cfg('long.bin', 'x' * 17)}"],
         "--mr-fill: " + os.path.join(d, "long.bin") + " is longer than the region"),
        ("dump file not writable", [], ["--mr-size", "4096", "--mr-dump",
                                        os.path.join(d, "no-such-dir", "dump.bin")],
         "--mr-dump: cannot write"),
        ("P_Key of partition 0", [], ["--config", cfg("p.toml", qp_cfg + "pkey = 0x8000\n")],
         "qp[0].pkey: 0x8000 is in the invalid partition 0"),
        ("honour_credits not a boolean", [],
         ["--config", cfg("h.toml", qp_cfg + 'honour_credits = "yes"\n')],
         "qp[0].honour_credits: expected true or false"),
        ("max_dest_rd_atomic 0", [],
         ["--config", cfg("m.toml", qp_cfg + "max_dest_rd_atomic = 0\n")],
         "qp[0].max_dest_rd_atomic"),
        ("unknown QP access flag", [],
         ["--config", cfg("a.toml", qp_cfg + "access = [\"remote_bogus\"]\n")],
         "qp[0].access: 'remote_bogus' is not an access flag"),
    ]
    failures = 0
    for i, (name, eal_extra, app, want) in enumerate(cases):
        cmd = [exe] + eal(f"droce_e2e_bad{i}", ["net_null0"]) + eal_extra + ["--"] + app
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        ok = r.returncode == 2 and want in r.stderr
        print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {r.returncode}: "
              f"{[l for l in r.stderr.splitlines() if 'error' in l.lower()][-1:]}")
        if not ok:
            failures += 1
            print(r.stderr[-1500:])
    check(failures == 0, f"{failures} bad-configuration cases failed")
    print("bad config: OK")


if __name__ == "__main__":
    main()
