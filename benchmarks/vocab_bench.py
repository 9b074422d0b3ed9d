"""Vocabulary-size benchmark: Trellis' grammar core and tokenizer on Gemma 3's 262,144-token
SentencePiece vocabulary beside SmolLM2's 49,152-token byte-level one, in the same run.

    .venv/bin/python benchmarks/vocab_bench.py [--reps N] [--out benchmarks/results/grammar.md]

Grammars: a JSON schema (nested object, enum, array of objects; once as written, where additional
properties are allowed, once strict), any JSON (built-in grammar) and
the regex [A-Z][a-z]+( [A-Z][a-z]+)*, \\d{1,5}; each with one valid document, tokenized by each
model's own tokenizer (trellis.model.tokenizer, the ids an engine would feed). Columns as in
grammar_bench.py: compile ms (median of fresh compiles), first mask ms, mask µs (median / p99 /
max of every later mask while the document is fed, pooled over the reps), for the lazy core and
for the core warmed at compile (CompiledGrammar.warm(), which builds every token-mask cache and so
scales with the vocabulary). A tokenizer table gives load time (tokenizer data -> Tokenizer) and
encode speed on a multilingual text.

The result replaces the section under VOCAB_MARKER in the results file, so grammar_bench.py's
tables above it stay.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "grammar.md"
VOCAB_MARKER = "<!-- vocab_bench.py section: written by benchmarks/vocab_bench.py -->"

for _path in (ROOT / "py", ROOT):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))
from benchmarks.report import cpu_line, percentile, write_section  # noqa: E402

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer", "minimum": 0},
        "role": {"enum": ["admin", "editor", "viewer"]},
        "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
                    "required": ["city"]},
        "orders": {"type": "array", "items": {"type": "object", "properties": {
            "sku": {"type": "string"}, "qty": {"type": "integer"}, "price": {"type": "number"}},
            "required": ["sku", "qty"]}},
    },
    "required": ["name", "age", "role", "orders"],
}
SCHEMA_DOC = {"name": "Zoë Åström", "age": 41, "role": "editor", "address": {"city": "Zürich", "zip": "8001"},
              "orders": [{"sku": "A-100", "qty": 2, "price": 19.99}, {"sku": "日本-7", "qty": 12, "price": 0.5}]}
ANY_JSON_DOC = {"id": "run-42", "scores": [98.5, -3, 6.02e23], "ok": True, "none": None,
                "text": "Quote \" backslash \\ tab \t emoji 🚀 日本語", "nested": {"a": [[], {}], "b": ""}}
REGEX = r"[A-Z][a-z]+( [A-Z][a-z]+)*, \d{1,5}"
REGEX_DOC = "Lovelace Street, 1843"
TOKENIZER_TEXT = ("The capital of France is Paris. Héllo wörld, naïve café; русский текст; 日本語のテキスト; "
                  "emoji 😀👍🏽 and code: def f(x):\n    return x ** 2  # square\n\n" * 20)


# What a profile found (2026-12-03, an instrumented build counting trie nodes per cache walk);
# rerun that before trusting these notes against a changed core.
PROFILE_NOTES = [
    "Where the time goes (profiled 2026-12-03 with a build of the core that counts the trie nodes "
    "each token-mask cache walk visits): Gemma 3's trie has 587,920 nodes (1.97 MB of token bytes, "
    "255,895 text tokens) against SmolLM2's 100,297 (332 KB, 49,135): 5.9x, and a warm mask copies "
    "a cached 8,192-word bitmask against 1,536 (5.3x), so walks and copies alike grow with the "
    "vocabulary; lazy compile does not depend on it. The non-strict schema's warmed compile was 19x "
    "SmolLM2's (20.1 M trie nodes visited against 1.05 M, in ~90 walks of ~191,000 nodes through "
    "the additional-property key, a right-recursive string body calling a rule per non-ASCII "
    "character, where the walk could skip a subtree only if it held no multi-byte token). That key "
    "now ends in one rule of plain states up to its closing quote, which the walk crosses as a "
    "string body (MaskWalk::text_loop): 3,664 ms -> 292-470 ms, in line with the trie's ratio. "
    "The issue's goal (mask and compile within 2x of SmolLM2's) is not met: what is left scales "
    "with the trie (5-10x for the warmed compiles, about 3x for medians); it would take sharing "
    "walks between tokens with a common lexical class (llguidance's slicer) rather than one walk "
    "per trie node. On this shared 2-core machine medians move by up to 2x between runs.",
]


def _models():
    """(name, gguf path, tokenizer data) for SmolLM2 and Gemma 3, read with the pure-Python reader."""
    from tests.model.gemma3 import gemma3_gguf_path
    from trellis.grammar.vocabulary import read_gguf_metadata
    from trellis.model.embedded import smollm2_gguf_path
    from trellis.model.tokenizer_data import tokenizer_data

    out = []
    for name, path in (("SmolLM2-135M (49,152, byte-level BPE)", str(smollm2_gguf_path())),
                       ("Gemma 3 270M (262,144, SentencePiece)", gemma3_gguf_path())):
        meta, _ = read_gguf_metadata(path, lambda key: key.startswith("tokenizer."))
        out.append((name, path, tokenizer_data(meta)))
    return out


def _grammars():
    doc = json.dumps(SCHEMA_DOC, ensure_ascii=False)
    return [("JSON schema (nested)", "json_schema", json.dumps(SCHEMA), doc),
            ("JSON schema (nested), strict", "json_schema_strict", json.dumps(SCHEMA), doc),
            ("any JSON (built-in)", "builtin_json", "", json.dumps(ANY_JSON_DOC, ensure_ascii=False, indent=2)),
            (f"regex `{REGEX}`", "regex", REGEX, REGEX_DOC)]


def _compile(compiler, kind, text):
    if kind == "json_schema":  # additional properties allowed, as the schema does not forbid them
        return compiler.compile_json_schema(text)
    if kind == "json_schema_strict":  # web-llm's default: no property the schema does not name
        return compiler.compile_json_schema(text, strict=True)
    if kind == "builtin_json":
        return compiler.compile_builtin_json()
    return compiler.compile_regex(text)


def run_grammar(compiler, kind, text, tokens, stop, reps, warm):
    import numpy as np

    from trellis.grammar import GrammarMatcher

    compile_ms, first_ms, mask_us = [], [], []
    clock = time.perf_counter_ns
    for _ in range(reps):
        mask = np.zeros(compiler.bitmask_words, dtype=np.int32)
        gc.collect()
        gc.disable()
        try:
            t0 = clock()
            compiled = _compile(compiler, kind, text)
            if warm:
                compiled.warm()
            t1 = clock()
            m = GrammarMatcher(compiled)
            m.fill_next_token_bitmask(mask)
            t2 = clock()
            compile_ms.append((t1 - t0) / 1e6)
            first_ms.append((t2 - t1) / 1e6)
            for step, tok in enumerate(tokens):
                if step:
                    t0 = clock()
                    m.fill_next_token_bitmask(mask)
                    mask_us.append((clock() - t0) / 1e3)
                if not (int(mask[tok >> 5]) >> (tok & 31)) & 1 or not m.accept_token(tok):
                    raise AssertionError(f"step {step}: document token {tok} refused")
            t0 = clock()
            m.fill_next_token_bitmask(mask)
            mask_us.append((clock() - t0) / 1e3)
            if not m.accept_token(stop) or not m.is_terminated():
                raise AssertionError("end of document: the stop token is refused")
        finally:
            gc.enable()
    return compile_ms, first_ms, mask_us


def _fmt(x: float) -> str:
    return f"{x:.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.2f}" if x >= 1 else f"{x:.3f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)

    from trellis.grammar import GrammarCompiler, Vocabulary
    from trellis.model.tokenizer import Tokenizer

    grammar_rows, tok_rows, setup_rows = [], [], []
    for name, path, data in _models():
        print(f"{name}", file=sys.stderr)
        t = time.perf_counter()
        tok = Tokenizer(data)
        load_s = time.perf_counter() - t
        tok.encode(TOKENIZER_TEXT[:200])  # first call: caches, imports
        t = time.perf_counter()
        ids = tok.encode(TOKENIZER_TEXT)
        enc_s = time.perf_counter() - t
        tok_rows.append(f"| {name} | {tok.model} | {1e3 * load_s:.0f} | {len(TOKENIZER_TEXT) / enc_s / 1e3:.0f} "
                        f"| {len(ids) / enc_s / 1e3:.0f} |")
        t = time.perf_counter()
        vocab = Vocabulary.from_gguf(path)
        compiler = GrammarCompiler(vocab)
        setup_rows.append(f"| {name} | {1e3 * (time.perf_counter() - t):.0f} |")
        stop = tok.eos_token_id
        for gname, kind, text, doc in _grammars():
            tokens = tok.encode_bytes(doc.encode())
            for warm in (False, True):
                c, f, m = run_grammar(compiler, kind, text, tokens, stop, args.reps, warm)
                engine = "warmed at compile" if warm else "lazy"
                grammar_rows.append(
                    f"| {gname} | {name} | {engine} | {_fmt(statistics.median(c))} | {_fmt(statistics.median(f))} "
                    f"| {_fmt(statistics.median(m))} | {_fmt(percentile(m, 0.99))} | {_fmt(max(m))} | {len(tokens)} |")
                print(grammar_rows[-1], file=sys.stderr)
        del compiler, vocab

    grammar_rows.sort(key=lambda row: [g for g, *_ in _grammars()].index(row.split(" | ")[0][2:]))
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    section = "\n".join([
        VOCAB_MARKER,
        "",
        "## Vocabulary size: Gemma 3 (262,144 tokens) beside SmolLM2 (49,152)",
        "",
        f"Written by `benchmarks/vocab_bench.py` on {now}, reps = {args.reps}; Trellis native core, "
        "documents tokenized by each model's own tokenizer.",
        "",
        cpu_line(detail=True),
        "",
        "| grammar | vocabulary | core | compile ms | first mask ms | mask median µs | p99 µs | max µs | tokens |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
        *grammar_rows,
        "",
        "Per-vocabulary set-up (Vocabulary.from_gguf + GrammarCompiler), outside the timings:",
        "",
        "| vocabulary | set-up ms |",
        "|---|---:|",
        *setup_rows,
        "",
        "Tokenizer (pure Python, trellis.model.tokenizer): load = tokenizer data to Tokenizer; encode on "
        f"a {len(TOKENIZER_TEXT):,}-character multilingual text (English, accents, Cyrillic, CJK, emoji, code).",
        "",
        "| vocabulary | model | load ms | encode k chars/s | encode k tokens/s |",
        "|---|---|---:|---:|---:|",
        *tok_rows,
        "",
        *PROFILE_NOTES,
        "",
    ])
    write_section(args.out, VOCAB_MARKER, section)
    print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
