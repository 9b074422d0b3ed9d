"""Fixtures for web/tests/grammar.test.mjs: what the NATIVE core does, for the wasm core to match.

    python web/tests/make_fixtures.py [--out build/test-fixtures/grammar_wasm.json] [--no-smollm2]

Writes vocabularies (token bytes as hex), grammars as IR words, and for each grammar a script of
matcher operations with the native core's results: masks (base64 int32 words), accept results,
rollback, termination, jump-forward strings and bytes, shortest completions, and the core's error code and message for
refused calls and refused IR. The node test replays each script through web/grammar.js and the
wasm core and expects identical results. tests/grammar/test_wasm_node.py runs both.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import sys
from array import array
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "py"))

from trellis.errors import GrammarError, TrellisError  # noqa: E402
from trellis.grammar import GrammarCompiler, GrammarMatcher, Vocabulary, ir  # noqa: E402
from trellis.grammar.ebnf import ARITHMETIC_EBNF, WEBLLM_JSON_EBNF, parse_ebnf  # noqa: E402
from trellis.grammar.frontends import grammar_of  # noqa: E402

DEFAULT_OUT = ROOT / "build" / "test-fixtures" / "grammar_wasm.json"
ALPHABET = b'ab(){}[]":,019+-* .etrufnlsx\\\n'
STOP, SPECIAL = 1, (0, 1)


def tiny_vocab() -> Vocabulary:
    """Specials 0 and 1 (1 stops), every 1- and 2-byte string over ALPHABET, longer random
    strings, UTF-8 pieces, and 5 padding ids past the tokens."""
    tokens = [b"", b""]
    tokens += [bytes([a]) for a in ALPHABET]
    tokens += [bytes([a, b]) for a in ALPHABET for b in ALPHABET]
    rng = random.Random(11)
    tokens += [bytes(rng.choice(ALPHABET) for _ in range(rng.randint(3, 7))) for _ in range(60)]
    tokens += ["é".encode(), "é".encode()[:1], "é".encode()[1:], "日本".encode(), b"true", b'{"a": ']
    return Vocabulary.from_token_bytes(tokens, special_ids=SPECIAL, stop_ids=(STOP,),
                                       vocab_size=len(tokens) + 5)


def vocab_json(vocab: Vocabulary) -> dict:
    return {"tokenBytes": [b.hex() for b in vocab.token_bytes], "vocabSize": vocab.vocab_size,
            "specialIds": list(vocab.special_ids), "stopIds": list(vocab.stop_ids)}


def b64_words(mask: array) -> str:
    return base64.b64encode(mask.tobytes()).decode()


class Recorder:
    """Runs matcher operations on the native core and records (operation, result)."""

    def __init__(self, compiler: GrammarCompiler, compiled):
        self.core = compiler.core
        self.m = GrammarMatcher(compiled)
        self.ops: list[dict] = []

    def error(self) -> dict:
        t = self.core.t
        return {"code": t.call("tg_last_error_code"), "message": t.read_cstring(t.call("tg_last_error"))}

    def do(self, op: str, **args):
        """Run one op; record its result, or the core's error when it raises."""
        m = self.m
        entry = {"op": op, **args}
        try:
            if op == "mask":
                mask = m.new_bitmask()
                m.fill_next_token_bitmask(mask)
                entry["words"] = b64_words(mask)
                result = mask
            elif op == "accept_token":
                result = entry["result"] = m.accept_token(args["id"])
            elif op == "accept_string":
                result = entry["result"] = m.accept_string(bytes.fromhex(args["hex"]))
            elif op == "rollback":
                result = m.rollback(args["n"])
            elif op == "reset":
                result = m.reset()
            elif op in ("is_terminated", "can_terminate"):
                result = entry["result"] = getattr(m, op)()
            elif op == "history_length":
                result = entry["result"] = m.history_length
            elif op == "jump":
                result = entry["result"] = m.find_jump_forward_string()
                entry["hex"] = self.core.jump_forward(m._handle).hex()
            elif op == "shortest":
                result = m.shortest_completion()
                entry["hex"] = None if result is None else result.hex()
            else:
                raise ValueError(op)
        except TrellisError:
            entry["error"] = self.error()
            result = None
        self.ops.append(entry)
        return result


def allowed_ids(mask: array, vocab_size: int) -> list[int]:
    return [i for i in range(vocab_size) if mask[i >> 5] >> (i & 31) & 1]


def walk(compiler: GrammarCompiler, compiled, seed: int, steps: int, forced: list[int] | None = None):
    """A random walk (or the `forced` token sequence) with the API's side roads on the way."""
    vocab = compiler.vocab
    rng = random.Random(seed)
    r = Recorder(compiler, compiled)
    r.do("jump")
    sequence = list(forced) if forced is not None else None
    n = steps if sequence is None else len(sequence)
    for step in range(n + 1):
        mask = r.do("mask")
        allowed = allowed_ids(mask, vocab.vocab_size)
        r.do("can_terminate")
        r.do("is_terminated")
        if step % 3 == 0:
            r.do("jump")
            r.do("shortest")
        refused = [i for i in rng.sample(range(vocab.vocab_size), 20) if i not in allowed]
        if refused:
            r.do("accept_token", id=refused[0])  # refused: the state must not change
        if step % 7 == 3:
            r.do("accept_token", id=vocab.vocab_size + step)  # out of range: an error
        if step == n or not allowed:
            break
        if sequence is not None:
            token = sequence[step]
        else:
            text = [i for i in allowed if i not in vocab.stop_ids]
            token = rng.choice(text) if text else rng.choice(allowed)
        r.do("accept_token", id=token)
        if step % 5 == 4:  # side roads: rollback, a too-far rollback, reset, a forced string
            r.do("history_length")
            r.do("rollback", n=rng.randint(1, min(3, step + 1)))
            r.do("mask")
            r.do("rollback", n=10_000)  # too far: an error, state unchanged
            if step % 10 == 9:
                r.do("reset")
                r.do("history_length")
            forced_text = r.do("jump")
            if forced_text:
                r.do("accept_string", hex=forced_text.encode().hex())
    # Stop if allowed.
    if r.do("can_terminate"):
        for s in vocab.stop_ids:
            r.do("accept_token", id=s)
            r.do("is_terminated")
            r.do("shortest")
            r.do("mask")
            break
    return r.ops


def compile_case(compiler: GrammarCompiler, name: str, source: tuple[str, str], vocab_name: str,
                 seed: int, steps: int, strings: list[bytes] = ()) -> dict:
    """source: (kind, text) for trellis.grammar.frontends; the JS front-end test reuses it."""
    grammar = grammar_of(*source)
    words, names = ir.serialize(grammar)
    compiled = compiler.compile_ir(grammar)
    ops = walk(compiler, compiled, seed, steps)
    if strings:  # accept_string scripts, including partial UTF-8 characters
        r = Recorder(compiler, compiled)
        for data in strings:
            r.do("accept_string", hex=data.hex())
            r.do("jump")
            r.do("shortest")
            r.do("mask")
            r.do("history_length")
        r.do("can_terminate")
        ops += [{"op": "reset"}] + r.ops
    return {"name": name, "vocab": vocab_name, "words": list(words), "ruleNames": names,
            "source": list(source), "stats": compiled.stats(), "ops": ops}


def error_case(compiler: GrammarCompiler, name: str, words: array, names=None) -> dict:
    """IR words the core may refuse: record whether it compiled, or its error."""
    core = compiler.core
    case = {"name": name, "vocab": "tiny", "words": list(words), "ruleNames": names}
    try:
        handle = core.grammar_compile(compiler._handle, words)
        core.free("grammar", handle)
        case["compiled"] = True
    except (GrammarError, TrellisError):
        t = core.t
        case["error"] = {"code": t.call("tg_last_error_code"),
                         "message": t.read_cstring(t.call("tg_last_error")),
                         "rule": t.call("tg_last_error_rule")}
    return case


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--no-smollm2", action="store_true", help="skip the SmolLM2 vocabulary case")
    args = parser.parse_args(argv)

    tiny = tiny_vocab()
    tc = GrammarCompiler(tiny, core="native")
    vocabs = {"tiny": vocab_json(tiny)}
    cases = [
        compile_case(tc, "arithmetic EBNF", ("ebnf", ARITHMETIC_EBNF), "tiny", 1, 40),
        compile_case(tc, "web-llm JSON EBNF", ("ebnf", WEBLLM_JSON_EBNF), "tiny", 2, 60),
        compile_case(tc, "built-in JSON", ("builtin_json", ""), "tiny", 3, 60),
        compile_case(tc, "regex", ("regex", r'(ab|[01]+)*"?(é|日本)?x\\n'), "tiny", 4, 25),
        compile_case(tc, "jump forward", ("ebnf", 'root ::= "a" ("bcé" | "bc(") "a"'), "tiny", 5, 8,
                     strings=[b"ab", b"x", "cé".encode()[:2], b"\xa9", b"a"]),
        compile_case(tc, "strings", ("ebnf", 'root ::= "ab" [c]* "(" | "日本" "a"+'), "tiny", 6, 12,
                     strings=["日".encode(), "本".encode()[:1], "本".encode()[1:], b"aa", b"b"]),
        # A shortest completion longer than the bindings' first buffer (256 bytes).
        compile_case(tc, "long completion", ("regex", "(ab){150}x"), "tiny", 9, 6),
    ]
    # Refused grammars: left recursion, an empty language, a size limit, malformed IR.
    for name, text in [
        ("left recursion", 'root ::= "a" | expr\nexpr ::= item "+"\nitem ::= expr | "b"'),
        ("empty language", "root ::= [^\\x00-\\U0010FFFF]"),
        ("limit", 'root ::= ("a"{1000}){1000}'),
    ]:
        words, names = ir.serialize(parse_ebnf(text))
        cases.append(error_case(tc, name, words, names))
    words, _ = ir.serialize(parse_ebnf('root ::= "ab" x*\nx ::= [a-c] | "(" root ")"'))
    rng = random.Random(3)
    cases.append(error_case(tc, "too short", array("i", [1, 2, 3])))
    for i in range(60):
        mutated = array("i", words)
        for _ in range(rng.randint(1, 3)):
            mutated[rng.randrange(len(mutated))] = rng.choice(
                [-1, 0, 1, 2, 7, 255, 256, 2**31 - 1, rng.randint(-9, 40)])
        if rng.random() < 0.2:
            mutated = mutated[: rng.randrange(len(mutated))]
        cases.append(error_case(tc, f"mutated IR {i}", mutated))

    if not args.no_smollm2:
        try:
            big = Vocabulary.smollm2()
        except TrellisError as e:
            print(f"make_fixtures: no SmolLM2 case ({e})", file=sys.stderr)
        else:
            bc = GrammarCompiler(big, core="native")
            vocabs["smollm2"] = vocab_json(big)
            cases.append(compile_case(bc, "SmolLM2 built-in JSON", ("builtin_json", ""), "smollm2", 7, 25))
            cases.append(compile_case(bc, "SmolLM2 arithmetic", ("ebnf", ARITHMETIC_EBNF), "smollm2", 8, 15))

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"vocabs": vocabs, "cases": cases}))
    n_ops = sum(len(c.get("ops", ())) for c in cases)
    print(f"make_fixtures: {len(cases)} cases, {n_ops} operations -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
