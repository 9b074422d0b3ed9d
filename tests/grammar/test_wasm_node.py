"""The wasm grammar core under node, through web/grammar.js, against the native core.

web/tests/make_fixtures.py records the native core's results (masks, accepts, rollback,
jump-forward, errors) into build/test-fixtures/; `node --test web/tests/` replays them on the
wasm module through the JS glue and must get identical results.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "build" / "test-fixtures" / "grammar_wasm.json"
WASM = ROOT / "build" / "grammar" / "wasm" / "trellis_grammar.wasm"
NATIVE = ROOT / "build" / "grammar" / "native" / "libtrellis_grammar.so"


def test_wasm_core_in_node_matches_native():
    node = shutil.which("node")
    assert node, "node is not on PATH: `python3 build.py test` installs it (Debian package nodejs)"
    for path in (WASM, NATIVE):
        assert path.exists(), f"{path} is missing: run `python3 build.py grammar`"
    subprocess.run([sys.executable, str(ROOT / "web" / "tests" / "make_fixtures.py"), "--out", str(FIXTURES)],
                   cwd=ROOT, check=True, timeout=300)
    proc = subprocess.run([node, "--test", "web/tests/"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "TRELLIS_GRAMMAR_FIXTURES": str(FIXTURES),
                               "TRELLIS_GRAMMAR_WASM": str(WASM)})
    summary = [line for line in proc.stdout.splitlines() if line.startswith(("# pass", "# fail", "# skipped"))]
    failures = [line for line in proc.stdout.splitlines() if line.startswith("not ok") or "error:" in line]
    assert proc.returncode == 0, "node --test failed:\n" + "\n".join(failures[:40] + summary) + proc.stderr[-2000:]
    assert "# fail 0" in summary and "# skipped 0" in summary, "\n".join(summary)
