"""Runs the JSON Schema Test Suite through the JSON Schema front-end and the grammar core.

Method (GUIDE.md): each test's data is serialized with json.dumps(data, ensure_ascii=False)
(default separators), tokenized without special tokens (greedy longest match over the
SmolLM2 vocabulary) and fed token by token; a valid instance passes when every token is
accepted and the matcher can then terminate, an invalid one is rejected when some token is
refused or the matcher cannot terminate. `accept_string` gives the same verdict faster and
is used when `tokens=False`.

For every test group: either compiling raises UnsupportedSchemaError (refused), or every
valid instance is accepted and every invalid one rejected (passed); anything else failed.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from trellis.errors import GrammarLimitError, UnsupportedSchemaError
from trellis.grammar import GrammarMatcher

SUITE = Path(__file__).resolve().parents[3] / "shared" / "data" / "json-schema-test-suite"
DRAFTS = {"draft2020-12": "2020-12", "draft2019-09": "2019-09", "draft7": "draft7", "draft6": "draft6",
          "draft4": "draft4"}


@dataclass
class GroupResult:
    file: str  # e.g. "draft7/optional/format/date.json"
    index: int
    description: str
    status: str  # "passed", "refused", "failed", "limit"
    keyword: str | None = None  # refusal keyword
    message: str = ""
    valid_rejected: list = field(default_factory=list)
    invalid_accepted: list = field(default_factory=list)
    seconds: float = 0.0


def suite_files() -> list[Path]:
    return sorted(p for d in DRAFTS for p in (SUITE / d).rglob("*.json"))


def load_groups():
    """(relative file name, draft, group index, group) for every group of the suite."""
    for path in suite_files():
        rel = path.relative_to(SUITE).as_posix()
        draft = DRAFTS[rel.split("/")[0]]
        for i, group in enumerate(json.loads(path.read_text(encoding="utf-8"))):
            yield rel, draft, i, group


class TokenFeeder:
    """Greedy longest-match tokenization over the vocabulary's non-special tokens."""

    def __init__(self, vocab):
        self.by_bytes = {b: i for i, b in enumerate(vocab.token_bytes) if b and i not in vocab.special_ids}
        self.longest = max(len(b) for b in self.by_bytes)

    def tokenize(self, text: str) -> list[int]:
        data, out, i = text.encode("utf-8"), [], 0
        while i < len(data):
            for n in range(min(self.longest, len(data) - i), 0, -1):
                t = self.by_bytes.get(data[i:i + n])
                if t is not None:
                    out.append(t)
                    i += n
                    break
            else:
                raise AssertionError(f"no token for byte {data[i]}")
        return out


def accepts(compiled, text: str, feeder: TokenFeeder | None) -> bool:
    matcher = GrammarMatcher(compiled)
    if feeder is None:
        return matcher.accept_string(text) and matcher.can_terminate()
    for t in feeder.tokenize(text):
        if not matcher.accept_token(t):
            return False
    return matcher.can_terminate()


def run_group(compiler, rel: str, draft: str, index: int, group: dict, *, feeder: TokenFeeder | None = None,
              any_whitespace: bool = True, property_order: str = "schema") -> GroupResult:
    started = time.perf_counter()
    result = GroupResult(rel, index, group["description"], "passed")
    try:
        # optional/format/ is the suite's opt-in for asserting formats (2019-09 and 2020-12 annotate)
        # through the compiler's entry point: the native converter where it covers the schema
        compiled = compiler.compile("json_schema", group["schema"], draft=draft, any_whitespace=any_whitespace,
                                    property_order=property_order,
                                    format_assertion=True if "/optional/format/" in rel else None)
    except UnsupportedSchemaError as e:
        result.status, result.keyword, result.message = "refused", e.keyword, str(e)
        result.seconds = time.perf_counter() - started
        return result
    except GrammarLimitError as e:
        result.status, result.message = "limit", str(e)
        result.seconds = time.perf_counter() - started
        return result
    for test in group["tests"]:
        text = json.dumps(test["data"], ensure_ascii=False)
        ok = accepts(compiled, text, feeder)
        if test["valid"] and not ok:
            result.valid_rejected.append(test["description"])
        elif not test["valid"] and ok:
            result.invalid_accepted.append(test["description"])
    if result.valid_rejected or result.invalid_accepted:
        result.status = "failed"
    result.seconds = time.perf_counter() - started
    return result


def run_suite(compiler, *, feeder=None, select=None, any_whitespace=True, property_order="schema") -> list[GroupResult]:
    out = []
    for n, (rel, draft, i, group) in enumerate(load_groups()):
        if select is not None and not select(n, rel, i):
            continue
        out.append(run_group(compiler, rel, draft, i, group, feeder=feeder, any_whitespace=any_whitespace,
                             property_order=property_order))
    return out
