"""Replay one case in a fresh worker: python -m tests.grammar.fuzz.replay CASE_JSON (or @FILE).

Prints the outcome (status, error, location, the worker's stderr for a crash or hang)."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.grammar.fuzz.cases import Case
from tests.grammar.fuzz.pool import WorkerPool


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    text = Path(argv[0][1:]).read_text(encoding="utf-8") if argv[0].startswith("@") else argv[0]
    case = Case.from_json(text)
    with WorkerPool(size=1) as pool:
        outcome = pool.run(case)
    for key, value in outcome.items():
        print(f"{key}: {value}")
    return 0 if outcome["status"] in ("compiled", "typed") else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
