"""Shared by the benchmarks: the machine line their results files start with, and percentiles."""

import os
import platform
from pathlib import Path


def cpu_facts() -> dict[str, str]:
    """/proc/cpuinfo's first processor and the RAM size (empty where /proc is missing)."""
    info: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            info.setdefault(key.strip(), value.strip())
        mem = Path("/proc/meminfo").read_text().split()[1]
        info["mem"] = f"{int(mem) / 2**20:.0f} GiB RAM"
    except (OSError, IndexError, ValueError):
        pass
    return info


def cpu_line(detail: bool = False) -> str:
    info = cpu_facts()
    model = info.get("model name", "?")
    if detail:
        model += f" (family {info.get('cpu family', '?')}, model {info.get('model', '?')})"
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else "?"
    return (f"- CPU: {model}, {info.get('mem', '? RAM')}; {os.cpu_count()} logical cores ({usable} usable), "
            f"{platform.machine()}, {platform.platform()}")


def percentile(values, q: float) -> float:
    """The q-quantile (0..1) of `values`, interpolated between the nearest ranks."""
    s = sorted(values)
    if len(s) == 1:
        return s[0]
    k = (len(s) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)
