"""dpdk-testpmd as the reference rate next to droce in the DPDK benches
(engine_bench.py, shard_rx_bench.py): run it on a vdev for a while with
per-second stats, stop it with SIGINT, and take the median of its
per-second packet rates."""

import re
import signal
import statistics
import subprocess
import time


def testpmd_mpps(eal, vdev, app_args, secs):
    """Median Mpps of testpmd's per-second samples: Tx-pps for txonly,
    else Rx-pps. `eal`: EAL options (lcores, memory, --file-prefix);
    `app_args`: testpmd's own (forwarding mode, cores, queues)."""
    cmd = ["dpdk-testpmd", *eal, f"--vdev={vdev}", "--", "--port-topology=loop",
           "--stats-period=1", "--auto-start", "--total-num-mbufs=16384",
           "--mbuf-size=4608", *app_args]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL)
    time.sleep(secs + 2)
    p.send_signal(signal.SIGINT)
    try:
        out = p.communicate(timeout=20)[0].decode(errors="replace")
    except subprocess.TimeoutExpired:
        p.kill()
        out = p.communicate()[0].decode(errors="replace")
    key = "Tx-pps" if "--forward-mode=txonly" in app_args else "Rx-pps"
    samples = [int(x) for x in re.findall(key + r":\s+(\d+)", out)]
    samples = [s for s in samples if s > 0]
    samples = samples[1:] or samples  # the first period is partial
    if not samples:
        raise SystemExit(f"testpmd gave no {key}:\n{out[-2000:]}")
    return statistics.median(samples) / 1e6
