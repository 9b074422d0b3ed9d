"""Cache walks through a run index (kernels/grammar/src/vocab.h, RunIndex).

In a plain state that every byte of a common class (letters, word characters) leads back to, a
cache walk accepts the tokens that keep to the class from the index and walks only the exits
(nodes whose byte leaves the class) that the state takes. These tests walk grammars whose loops
use each class, entered from the loop itself and from the state before its first letter, and
counts over a class (a chain of states that ends), with exits that go on, that loop back, that end the rule, and anchors past the index's depth, on a
vocabulary built so that those subtrees are large; every token is tried against every mask.
"""

from __future__ import annotations

import json
import os
import random
from functools import lru_cache

import pytest

from trellis.grammar import GrammarCompiler, GrammarMatcher, Vocabulary

CORES = os.environ.get("TRELLIS_CORE_BACKENDS", "native,wasmtime").split(",")
STOP = 1


@lru_cache(maxsize=1)
def run_vocab() -> Vocabulary:
    """Words of lower-case letters (long runs under shared prefixes), words that leave the run
    (a capital, a digit, `_`, a space or a comma after letters, UTF-8), and a few tokens longer
    than 255 bytes, whose exits lie deeper than the index keeps."""
    rng = random.Random(11)
    lower, upper, other = "abcdeyz", "ABZ", "019_ ,-é"
    tokens = {c.encode() for c in lower + upper + other}

    def word() -> str:
        return "".join(rng.choice(lower) for _ in range(rng.randint(1, 6)))

    for _ in range(3000):
        w, kind = word(), rng.random()
        if kind < 0.05:  # a capital, then a comma or so and letters
            w = rng.choice(upper) + rng.choice(other) + w
        elif kind < 0.25:  # a capital, then letters and maybe more
            w = rng.choice(upper) + w + (rng.choice(other + upper) + word() if rng.random() < 0.4 else "")
        elif kind < 0.4:  # a space and a capitalised word
            w = " " + rng.choice(upper) + w + (rng.choice(" ,") if rng.random() < 0.3 else "")
        elif kind < 0.6:  # letters that leave the run at the end
            w += "".join(rng.choice(other + upper) for _ in range(rng.randint(1, 2)))
        elif kind < 0.7:  # or in the middle
            cut = rng.randint(1, len(w))
            w = w[:cut] + rng.choice(other + upper) + w[cut:]
        tokens.add(w.encode())
    tokens |= {b"a" * 300, b"b" * 254 + b"A" + b"bc" * 20, b"c" * 260 + b" Dd", b"a" * 299 + b", Ab"}
    ordered = [b"", b""] + sorted(tokens)
    return Vocabulary.from_token_bytes(ordered, special_ids=(0, 1), stop_ids=(STOP,), vocab_size=len(ordered) + 3)


GRAMMARS = [
    ("regex", r"[A-Z][a-z]+( [A-Z][a-z]+)*, \d{1,5}"),  # vocab_bench's regex: entered, exits that go on
    ("regex", r"[a-z ]+"),  # a loop over more than the run: exits that loop back
    ("regex", r"[A-Z][a-z]*,[A-Z]|[A-Z],[a-z]"),  # a comma goes on one way before the run, another in it
    ("regex", r"[A-Z][a-z]*(,[A-Z])?|[A-Z],[a-z]"),  # the same where the run may end the grammar
    ("ebnf", 'root ::= a [a-z]+ "." | b\nb ::= a "-"\na ::= [^.]'),  # a run that only one caller takes
    ("regex", r"\w+(,\w+)*"),  # the widest run
    ("regex", r"[a-zA-Z]*_?[0-9]+"),
    ("regex", r"(Ab|[a-z]+-)+[a-z]*"),  # runs entered again after each exit
    ("regex", r"[a-z]{2,}[A-Z][a-z]+"),  # counted, then a loop
    ("regex", r"[a-z]{2,5}"),  # a count: the run's tokens up to its length, no exit past it
    ("regex", r"[a-z]{1,3},[a-z]"),  # a count that must go on: no comma past it
    ("regex", r"[a-z]{1,3}(,[a-z])?"),  # the same where it may end the grammar
    ("regex", r"([a-z]{2}|[a-z]{4}),"),  # the comma after 2 or 4 letters, not 3
    ("regex", r"([a-z]{2}|[a-z]{4})(,[a-z])?"),
    ("regex", r"[a-zA-Z0-9 ]{1,12}"),  # a count whose other byte goes on in it
    ("regex", r"[a-z0-9_]{3,8}(,[A-Z][a-z]{1,3})*"),  # counts with exits that go on
    ("regex", r"[a-z]{250,260}"),  # longer than the token lengths the index compares: walked
    ("ebnf", 'root ::= word ("," word)* "."\nword ::= [a-z]+ | [A-Z] [a-zA-Z0-9]*'),  # loops inside called rules
    ("json_schema", {"type": "object", "properties": {
        "name": {"type": "string", "pattern": "^[a-z]+( [a-z]+)*$"},
        "tags": {"type": "array", "items": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"}}},
        "required": ["name", "tags"], "additionalProperties": False}),
]


@pytest.fixture(scope="module", params=CORES)
def compiler(request):
    return GrammarCompiler(run_vocab(), core=request.param)


def compile_one(compiler: GrammarCompiler, kind: str, text):
    if kind == "regex":
        return compiler.compile_regex(text)
    if kind == "ebnf":
        return compiler.compile_grammar(text)
    return compiler.compile_json_schema(json.dumps(text))


@pytest.mark.parametrize("warm", [False, True], ids=["lazy", "warmed"])
@pytest.mark.parametrize("index", range(len(GRAMMARS)))
def test_masks_through_run_loops_agree_with_accept_token(compiler, index, warm):
    kind, text = GRAMMARS[index]
    vocab = compiler.vocab
    for seed in range(4):
        grammar = compile_one(compiler, kind, text)
        if warm:
            grammar.warm()
        m = GrammarMatcher(grammar)
        rng = random.Random(seed)
        for step in range(14):
            allowed = set(m.allowed_tokens())
            for t in range(2, vocab.vocab_size):
                ok = m.accept_token(t)
                if ok:
                    m.rollback(1)
                assert ok == (t in allowed), (text, seed, step, vocab.token_bytes[t])
            choices = sorted(allowed - {STOP})
            if not choices:
                break
            # Mostly the longest tokens: the walk goes deep into the loops and past their exits.
            choices.sort(key=lambda t: len(vocab.token_bytes[t]))
            assert m.accept_token(rng.choice(choices[len(choices) // 2:] if rng.random() < 0.7 else choices))


def test_the_run_accepts_a_long_loop_in_one_mask(compiler):
    """A token of 300 letters is accepted by the loop's mask, and one whose exit lies past the
    index's depth is walked and refused where the grammar refuses its byte."""
    vocab = compiler.vocab
    m = GrammarMatcher(compiler.compile_regex(r"[a-z]+"))
    allowed = {vocab.token_bytes[t] for t in m.allowed_tokens()}
    assert b"a" * 300 in allowed and b"c" * 260 + b" Dd" not in allowed and b"b" * 254 + b"A" + b"bc" * 20 not in allowed
    m = GrammarMatcher(compiler.compile_regex(r"[a-z]+( [A-Z][a-z]+)?"))
    allowed = {vocab.token_bytes[t] for t in m.allowed_tokens()}
    assert b"c" * 260 + b" Dd" in allowed and b"a" * 299 + b", Ab" not in allowed
