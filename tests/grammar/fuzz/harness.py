"""Drives the generators into the worker pool for a time budget; classifies, de-duplicates and
minimises findings; formats the results.

Finding classes: crash (the worker died: a signal, a sanitizer report), hang (over the time
bound), memory (MemoryError under the worker's RLIMIT_AS), untyped (an exception that is not a
TrellisError) and disagreement (the matcher's verbs contradict each other, or a completed JSON
text fails the `jsonschema` oracle). Findings are de-duplicated by class, exception type and
location (the innermost trellis frame; for a RecursionError the function most on the stack).
"""

from __future__ import annotations

import collections
import re
import time
from dataclasses import dataclass, field

from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed

from tests.grammar.fuzz import corpus
from tests.grammar.fuzz.cases import Case, reproducer
from tests.grammar.fuzz.generators import GENERATORS
from tests.grammar.fuzz.minimize import minimize
from tests.grammar.fuzz.worker import deep_recursion

CLASSES = ("crash", "hang", "memory", "untyped", "disagreement")


def finding_key(case: Case, outcome: dict) -> str | None:
    """None for a good outcome (compiled, or a typed error); else the de-duplication key."""
    status = outcome["status"]
    if status in ("compiled", "typed"):
        return None
    where = outcome.get("location") or "?"
    if status in ("crash", "hang"):  # stacks come from faulthandler: the function, not the line
        where = re.sub(r":\d+$", "", where)
    if status == "crash":
        return f"crash: {outcome['cause']} {outcome.get('sanitizer', '')} in {outcome.get('phase', '?')} at {where}"
    if status == "hang":
        return f"hang: in {outcome.get('phase', '?')} at {where}"
    if status == "disagreement":
        return f"disagreement: {outcome['check']} ({case.kind})"
    return f"{status}: {outcome['error_type']} at {where}"


@dataclass
class Finding:
    key: str
    cls: str
    generator: str
    case: Case
    outcome: dict
    count: int = 1
    minimized: Case | None = None

    @property
    def smallest(self) -> Case:
        return self.minimized or self.case

    def describe(self) -> str:
        o = self.outcome
        detail = o.get("message") or o.get("sanitizer") or o.get("cause") or ""
        lines = [f"[{self.cls}] {self.key}  (x{self.count}, generator {self.generator})"]
        if detail:
            lines.append(f"  {detail[:500]}")
        if self.cls in ("crash", "hang") and o.get("stderr"):
            lines.append("  worker stderr (tail):\n    " + o["stderr"][-1200:].replace("\n", "\n    "))
        elif o.get("traceback"):
            lines.append("  " + o["traceback"][-1200:].replace("\n", "\n  "))
        walk = o.get("phase") == "walk" or self.cls == "disagreement"
        with deep_recursion():
            text = reproducer(self.smallest, walk=walk)
        lines.append("  reproducer:\n    " + text.replace("\n", "\n    "))
        return "\n".join(lines)


@dataclass
class GeneratorStats:
    tried: int = 0
    compiled: int = 0
    typed: int = 0
    walks: int = 0
    walk_steps: int = 0
    seconds: float = 0.0
    findings: collections.Counter = field(default_factory=collections.Counter)
    typed_errors: collections.Counter = field(default_factory=collections.Counter)

    @property
    def throughput(self) -> float:
        return self.tried / self.seconds if self.seconds else 0.0


class _BudgetSpent(BaseException):
    """Ends a generation loop (a BaseException, so that hypothesis does not treat it as a failure)."""


class FuzzRun:
    def __init__(self, pool, seed: int = 0):
        self.pool, self.seed = pool, seed
        self.stats: dict[str, GeneratorStats] = {}
        self.findings: dict[str, Finding] = {}
        corpus.preload()  # the seeds load once, outside every generator's time budget

    def fuzz(self, generator: str, seconds: float) -> GeneratorStats:
        """Feed `generator`'s cases to the pool for `seconds` (plus the last cases' time bound)."""
        stats = self.stats.setdefault(generator, GeneratorStats())
        started = time.monotonic()
        deadline = started + seconds

        def record(case: Case, outcome: dict) -> None:
            self._record(stats, case, outcome)

        @hypothesis_seed(self.seed)
        @settings(database=None, deadline=None, max_examples=10**9, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet)
        @given(GENERATORS[generator])
        def generate(case: Case) -> None:
            if time.monotonic() >= deadline:
                raise _BudgetSpent
            self.pool.submit(case, record)

        try:
            generate()
        except _BudgetSpent:
            pass
        self.pool.drain()
        stats.seconds += time.monotonic() - started
        return stats

    def _record(self, stats: GeneratorStats, case: Case, outcome: dict) -> None:
        stats.tried += 1
        status = outcome["status"]
        if status == "compiled":
            stats.compiled += 1
            if outcome.get("walk"):
                stats.walks += 1
                stats.walk_steps += outcome["walk"]["steps"]
        elif status == "typed":
            stats.typed += 1
            stats.typed_errors[outcome["error_type"]] += 1
        key = finding_key(case, outcome)
        if key is None:
            return
        stats.findings[status] += 1
        if key in self.findings:
            self.findings[key].count += 1
        else:
            self.findings[key] = Finding(key, status, case.generator, case, outcome)

    def minimize_findings(self, seconds: float, per_finding_s: float = 20.0) -> None:
        """Shrink each finding not yet minimised while the budget lasts; hangs are left whole
        (every try would cost a full time bound)."""
        deadline = time.monotonic() + seconds
        for finding in self.findings.values():
            left = deadline - time.monotonic()
            if finding.minimized is not None or finding.cls == "hang" or left <= 0:
                continue
            tries = 40 if finding.cls == "crash" else 400

            def reproduces(candidate: Case, key=finding.key) -> bool:
                return finding_key(candidate, self.pool.run(candidate)) == key

            with deep_recursion():
                finding.minimized = minimize(finding.case, reproduces, min(per_finding_s, left), tries)

    # ---- reports ----

    def summary(self) -> str:
        lines = [f"{len(self.findings)} distinct findings"]
        lines += [f.describe() for f in self.findings.values()]
        return "\n\n".join(lines)

    def markdown_table(self) -> list[str]:
        head = ("| generator | inputs | compiled | typed errors | walks (steps) | "
                + " | ".join(CLASSES) + " | inputs/s |")
        rows = [head, "|" + "---|" * (7 + len(CLASSES) - 1)]
        total = GeneratorStats()
        for name, s in self.stats.items():
            rows.append(self._row(name, s))
            total.tried += s.tried
            total.compiled += s.compiled
            total.typed += s.typed
            total.walks += s.walks
            total.walk_steps += s.walk_steps
            total.seconds += s.seconds
            total.findings.update(s.findings)
        rows.append(self._row("**all**", total))
        return rows

    @staticmethod
    def _row(name: str, s: GeneratorStats) -> str:
        classes = " | ".join(str(s.findings.get(c, 0)) for c in CLASSES)
        return (f"| {name} | {s.tried} | {s.compiled} | {s.typed} | {s.walks} ({s.walk_steps}) | {classes} | "
                f"{s.throughput:.1f} |")
