"""A fast, deterministic MaskBench sample through Trellis: zero invalid instances accepted.

40 schemas drawn with a fixed seed from ../shared/data/maskbench-dev.jsonl.gz, instances
serialized and tokenized as GUIDE.md says (benchmarks/json_schema_bench.py does the same on the
whole split). Schemas Trellis refuses with a typed error (UnsupportedSchemaError, GrammarLimitError)
are counted as refused, not failures; any other exception is a defect. Along the first valid
instance of each schema the mask must allow every next token (the mask agrees with accept_token).
"""

from __future__ import annotations

import json

import numpy as np

from benchmarks.json_schema_bench import DATA, load_split, select, tokenize_tests
from trellis.errors import TrellisError
from trellis.grammar.json_schema import json_schema_to_grammar

SAMPLE, SEED = 40, 20261130


def test_maskbench_sample_accepts_no_invalid_instance():
    assert DATA.exists(), f"{DATA} is missing (the shared data folder sits beside the checkout)"
    from grammar_bench import load_vocab  # benchmarks/ is on sys.path via json_schema_bench

    from trellis.grammar import GrammarCompiler, GrammarMatcher, Vocabulary

    entries = load_split()
    chosen = [entries[i] for i in select(len(entries), SAMPLE, SEED)]
    tests = tokenize_tests(chosen, load_vocab())
    vocab = Vocabulary.smollm2()
    compiler = GrammarCompiler(vocab)
    eos = vocab.stop_ids[0]
    mask = np.zeros((vocab.vocab_size + 31) // 32, dtype=np.int32)
    refused, invalid_accepted, valid_rejected, checked = [], [], [], 0
    for entry, cases in zip(chosen, tests):
        try:
            compiled = compiler.compile_ir(json_schema_to_grammar(entry["schema"]))
        except TrellisError as e:
            refused.append((entry["id"], type(e).__name__, str(e)[:120]))
            continue
        first_valid = True
        for valid, ids in cases:
            m = GrammarMatcher(compiled)
            ok = True
            for t in ids + [eos]:
                if valid and first_valid:
                    m.fill_next_token_bitmask(mask)
                    in_mask = bool((int(mask[t // 32]) >> (t % 32)) & 1)
                    assert in_mask == m.accept_token(t), (entry["id"], t)
                    if not in_mask:
                        ok = False
                        break
                elif not m.accept_token(t):
                    ok = False
                    break
            if valid:
                first_valid = False
            checked += 1
            if not valid and ok:
                invalid_accepted.append(entry["id"])
            if valid and not ok:
                valid_rejected.append(entry["id"])
    print(f"\nMaskBench sample: {len(chosen)} schemas, {len(refused)} refused, {checked} instances, "
          f"{len(valid_rejected)} valid rejected, {len(invalid_accepted)} invalid accepted")
    for r in refused:
        print("  refused:", *r)
    for r in sorted(set(valid_rejected)):
        print("  valid rejected in:", r)
    assert checked > 0 or len(refused) == len(chosen)
    assert not invalid_accepted, f"invalid instances accepted in {sorted(set(invalid_accepted))}"
