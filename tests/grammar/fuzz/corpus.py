"""Valid inputs to mutate, and the JSON Schema keywords real schemas use.

Seeds come from the repository's own tests (string constants that parse as EBNF or as a regex)
and from the shared data next to the repository: MaskBench's real-world schemas and the JSON
Schema Test Suite. Without the shared data the built-in seeds and keywords below still work.
"""

from __future__ import annotations

import ast
import collections
import gzip
import json
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT.parent / "shared" / "data"
MASKBENCH = DATA / "maskbench-dev.jsonl.gz"
SUITE = DATA / "json-schema-test-suite"
TESTS = ROOT / "tests" / "grammar"

# Keywords whose value is one subschema, a map of them, or a list (or one) of them.
SCHEMA_VALUED = {"not", "if", "then", "else", "contains", "additionalProperties", "propertyNames",
                 "unevaluatedProperties", "unevaluatedItems", "additionalItems", "contentSchema"}
SCHEMA_MAPS = {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
SCHEMA_LISTS = {"items", "prefixItems", "allOf", "anyOf", "oneOf"}
BUILTIN_KEYWORDS = sorted(SCHEMA_VALUED | SCHEMA_MAPS | SCHEMA_LISTS | {
    "type", "enum", "const", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "minLength", "maxLength", "pattern", "format", "required", "minProperties", "maxProperties",
    "minItems", "maxItems", "uniqueItems", "minContains", "maxContains", "dependentRequired", "$ref",
    "$id", "$anchor", "$schema", "title", "description", "default", "examples", "dependencies"})


@lru_cache(maxsize=1)
def maskbench_schemas() -> list:
    if not MASKBENCH.exists():
        return []
    with gzip.open(MASKBENCH, "rt", encoding="utf-8") as f:
        return [json.loads(line)["schema"] for line in f if line.strip()]


@lru_cache(maxsize=1)
def suite_schemas() -> list:
    out = []
    for path in sorted(SUITE.glob("draft2020-12/*.json")) + sorted(SUITE.glob("draft7/*.json")):
        for group in json.loads(path.read_text(encoding="utf-8")):
            out.append(group["schema"])
    return out


def _keywords_of(schema, counts: collections.Counter) -> None:
    if not isinstance(schema, dict):
        return
    for key, value in schema.items():
        counts[key] += 1
        if key in SCHEMA_VALUED:
            _keywords_of(value, counts)
        elif key in SCHEMA_MAPS and isinstance(value, dict):
            for sub in value.values():
                _keywords_of(sub, counts)
        elif key in SCHEMA_LISTS:
            for sub in value if isinstance(value, list) else [value]:
                _keywords_of(sub, counts)


@lru_cache(maxsize=1)
def schema_keywords() -> list[str]:
    """Keywords (keys in schema position) seen at least 3 times in the suite and MaskBench,
    most frequent first; the built-in list when the data is missing."""
    counts: collections.Counter = collections.Counter()
    for schema in suite_schemas() + maskbench_schemas():
        _keywords_of(schema, counts)
    found = [k for k, n in counts.most_common() if n >= 3]
    return found or BUILTIN_KEYWORDS


def _string_constants(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


@lru_cache(maxsize=1)
def ebnf_seeds() -> list[str]:
    from trellis.grammar import ebnf

    texts = [ebnf.WEBLLM_JSON_EBNF, ebnf.LLAMACPP_JSON_EBNF, ebnf.ARITHMETIC_EBNF]
    for name in ("test_ebnf.py", "test_core.py", "test_shortest_completion.py"):
        if (TESTS / name).exists():
            texts += [t for t in _string_constants(TESTS / name) if "::=" in t]
    return [t for t in dict.fromkeys(texts) if _parses(ebnf.parse_ebnf, t)]


@lru_cache(maxsize=1)
def regex_seeds() -> list[str]:
    from trellis.grammar.regex import parse_regex

    texts = _string_constants(TESTS / "test_regex.py") if (TESTS / "test_regex.py").exists() else []
    texts += [s["pattern"] for s in maskbench_schemas()[::7]
              if isinstance(s, dict) and isinstance(s.get("pattern"), str)]
    texts += _patterns_in(maskbench_schemas()[:2000])
    texts = [t for t in texts if any(c in t for c in "[](){}*+?|\\.") and len(t) < 400]
    return [t for t in dict.fromkeys(texts) if _parses(parse_regex, t)][:600] or [r"[a-z]+\d{2,4}", r"(ab|c)*"]


def _patterns_in(schemas) -> list[str]:
    out = []

    def visit(node):
        if isinstance(node, dict):
            if isinstance(node.get("pattern"), str):
                out.append(node["pattern"])
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(schemas)
    return out


@lru_cache(maxsize=1)
def schema_seeds() -> list:
    """A fixed sample: every 20th MaskBench schema and every 3rd suite schema."""
    seeds = maskbench_schemas()[::20] + suite_schemas()[::3]
    return seeds or [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}]


def _parses(parse, text: str) -> bool:
    try:
        parse(text)
        return True
    except Exception:  # noqa: BLE001 - a seed must be valid; anything else is left out
        return False


def preload() -> None:
    schema_keywords(), ebnf_seeds(), regex_seeds(), schema_seeds()
