"""A benchmark rank's own figures from /proc (Linux): when the process started, its resident
memory now and at peak, and resetting that peak so that a later phase is measured alone.
No imports beyond the standard library: the DeepSpeed side's venv imports it too."""

import os
import time


def process_start_s():
    """When this process started, on time.time()'s clock (from /proc: the launcher's fork)."""
    with open("/proc/self/stat") as f:
        start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        uptime_s = float(f.read().split()[0])
    return time.time() - uptime_s + start_ticks / os.sysconf("SC_CLK_TCK")


def status_bytes(field):
    """VmRSS / VmHWM of this process, in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak_rss():
    """Resets VmHWM to the current RSS (Linux: writing 5 to clear_refs), so that the peak of a
    later phase can be read on its own. False where the kernel refuses."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False
