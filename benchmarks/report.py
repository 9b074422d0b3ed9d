"""Shared by the benchmarks: the machine line their results files start with, percentiles, and
results files written by several benchmarks, a section each."""

import os
import re
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


_SECTION = re.compile(r"^<!-- .* section: .* -->$", re.M)


def write_section(path: Path, marker: str | None, text: str) -> None:
    """Writes `text` into the results file in place of the section that starts with the line
    `marker` (a section runs to the next marker line), keeping the rest; marker None: the head,
    what comes before the first section. A section not there yet is appended."""
    old = path.read_text() if path.exists() else ""
    starts = [m.start() for m in _SECTION.finditer(old)]
    parts = [old[:starts[0]] if starts else old]
    parts += [old[a:b] for a, b in zip(starts, starts[1:] + [len(old)])]
    body = text.rstrip("\n") + "\n\n"
    if marker is None:
        parts[0] = body
    else:
        mine = [i for i, part in enumerate(parts[1:], 1) if part.startswith(marker)]
        if mine:
            parts[mine[0]] = body
        else:
            parts.append(body)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(parts).rstrip("\n") + "\n")
