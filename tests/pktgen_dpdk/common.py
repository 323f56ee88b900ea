"""Helpers for droce-pktgen-dpdk tests: every DPDK process has its own
--file-prefix and runs with --no-huge -m 256 --no-pci, bounded in time."""
import os
import subprocess

EAL = ["--no-huge", "-m", "256", "--no-pci", "--log-level=warning"]


def eal(prefix, lcore, *vdevs):
    return ["-l", str(lcore), "--file-prefix", f"{prefix}-{os.getpid()}", *EAL,
            *[f"--vdev={v}" for v in vdevs]]


def run(cmd, timeout):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr
