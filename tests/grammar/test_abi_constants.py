"""The ABI's constants have one meaning on every side: trellis.grammar.abi mirrors the C header,
and web/grammar.js's copies (JS cannot import Python) say the same."""

import re
from pathlib import Path

from trellis.grammar.abi import NO_COMPLETION, SIGNATURES, ErrorCode, SchemaFlag, Stat

ROOT = Path(__file__).resolve().parents[2]
HEADER = (ROOT / "kernels/grammar/include/trellis_grammar.h").read_text()


def _enum(name: str, prefix: str) -> dict[str, int]:
    body = re.search(r"enum %s \{(.*?)\};" % name, HEADER, re.S).group(1)
    return {k: int(v) for k, v in re.findall(prefix + r"(\w+) = (\d+)", body)}


def test_error_codes_and_stats_match_the_header():
    assert _enum("tg_error_code", "TG_(?:ERR_)?") == {e.name: e.value for e in ErrorCode}
    assert _enum("tg_grammar_stat_id", "TG_STAT_") == {s.name: s.value for s in Stat}
    assert _enum("tg_schema_flag", "TG_SCHEMA_") == {f.name: f.value for f in SchemaFlag}
    assert int(re.search(r"#define TG_NO_COMPLETION \((-?\d+)\)", HEADER).group(1)) == NO_COMPLETION


def test_every_exported_function_has_a_signature():
    exported = set(re.findall(r"TG_API [^;(]*?\b(tg_\w+)\(", HEADER))
    assert exported == set(SIGNATURES)


def test_grammar_js_constants_match():
    js = (ROOT / "web/grammar.js").read_text()
    consts = {k: int(v) for k, v in re.findall(r"export const (\w+) = (-?\d+);", js)}
    assert consts.pop("NO_COMPLETION") == NO_COMPLETION
    assert consts and all(ErrorCode[k.removeprefix("ERR_")] == v for k, v in consts.items())
