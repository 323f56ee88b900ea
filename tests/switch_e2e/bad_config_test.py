"""droce-switch refuses bad configurations with exit code 2 and a message
naming the option (or file:line:col: key for --config)."""

import os
import subprocess
import sys
import tempfile

EXE = sys.argv[1]
EAL = ["--no-huge", "-m", "256", "--no-pci", "-l", "0",
       "--log-level=lib.eal:warning", "--vdev=net_null0", "--vdev=net_null1"]
failed = 0


def check(name, app_args, want, config=None, eal=True):
    global failed
    args = list(app_args)
    path = None
    if config is not None:
        fd, path = tempfile.mkstemp(suffix=".toml")
        with os.fdopen(fd, "w") as f:
            f.write(config)
        args = ["--config", path, *args]
    prefix = ["--file-prefix", "swbad_" + name] if eal else []
    cmd = [EXE, *(EAL + prefix if eal else []), "--", *args]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        rc, err = r.returncode, r.stderr
    except subprocess.TimeoutExpired:
        rc, err = -1, "timeout"
    finally:
        if path:
            os.unlink(path)
    good = rc == 2 and want in err and "droce-switch: " in err
    print(("ok   " if good else "FAIL ") + f"{name}: rc={rc} {err.strip().splitlines()[-1] if err.strip() else ''}",
          flush=True)
    if not good:
        print(f"     wanted exit 2 and '{want}' in stderr; cmd: {' '.join(cmd)}\n{err}")
        failed += 1


ROUTES = ["--route", "10.0.0.1=0", "--route", "10.0.0.2=1"]
PORTS = ["--port", "net_null0", "--port", "net_null1"]

check("no_ports", ["--route", "10.0.0.1=0"], "--port: no ports")
check("no_routes", PORTS, "--route: no routes")
check("route_syntax", [*PORTS, "--route", "10.0.0.1"], "--route: '10.0.0.1': expected")
check("route_bad_ip", [*PORTS, "--route", "10.0.0.300/32=0"], "--route:")
check("route_bad_len", [*PORTS, "--route", "10.0.0.0/40=0"], "--route: '10.0.0.0/40': prefix length")
check("route_port_range", [*PORTS, "--route", "10.0.0.1=5"], "--route: port 5 does not exist")
check("rate_range", ["--port", "net_null0@5T", *ROUTES[:2]], "--port: '5T' is out of range")
check("rate_syntax", [*PORTS, *ROUTES, "--rate", "fast"], "--rate: 'fast' is not a rate")
check("kmin_kmax", [*PORTS, *ROUTES, "--kmin", "64KiB", "--kmax", "32KiB"],
      "--kmin: Kmin (65536 B) must be below Kmax")
check("pmax", [*PORTS, *ROUTES, "--pmax", "2"], "--pmax: 2 is out of range 0..1")
check("ecn_mode", [*PORTS, *ROUTES, "--ecn", "sometimes"], "--ecn: 'sometimes' is not one of")
check("xon_xoff", [*PORTS, *ROUTES, "--pfc", "--xoff", "10KiB", "--xon", "20KiB"],
      "--xon: XON")
check("pfc_prio", [*PORTS, *ROUTES, "--pfc", "--pfc-priorities", "9"], "--pfc-priorities")
check("buffer_size", [*PORTS, *ROUTES, "--buffer", "lots"], "--buffer: 'lots' is not a size")
check("unknown_flag", [*PORTS, *ROUTES, "--frobnicate"], "frobnicate")
check("config_unknown_key", [], ":2:1: switch.ecnn: unknown key",
      config="[switch]\necnn = 1\n[[ports]]\nname = \"net_null0\"\n")
# The config goes through droce-sim's reader: the same message as droce-sim's.
check("config_bad_rate", [], ':3:8: ports[0].rate: expected a value like "100G"',
      config="[[ports]]\nname = \"net_null0\"\nrate = \"ten\"\n")
check("config_rate_range", [], ':3:8: ports[0].rate: out of range',
      config="[[ports]]\nname = \"net_null0\"\nrate = \"5T\"\n")
check("config_route_port", [], "routes[0].ports: port 3 does not exist",
      config="[[ports]]\nname = \"net_null0\"\n[[routes]]\nprefix = \"default\"\nports = [0, 3]\n")
check("config_syntax", [], ":1:", config="[switch\n")
# Needs EAL: the port is resolved after rte_eal_init.
check("no_such_port", ["--port", "net_null0", "--port", "net_memif7", *ROUTES],
      "--port: no DPDK port 'net_memif7'")
check("port_twice", ["--port", "net_null0", "--port", "net_null0", *ROUTES],
      "is already used")

print(f"{failed} failure(s)")
sys.exit(1 if failed else 0)
