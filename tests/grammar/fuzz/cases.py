"""One fuzz input: what it is, how to compile it, and how to write it down as a reproducer.

A case's payload is plain data (str, or JSON-like dicts and lists) so that it travels to a
worker process, round-trips through JSON (lone surrogates included, as \\udXXX escapes) and
prints as a Python snippet a person can paste.
"""

from __future__ import annotations

import ast
import json
import os
from dataclasses import asdict, dataclass, field

KINDS = ("ebnf", "regex", "json_schema", "ir", "structural_tag", "response_format", "selftest")


@dataclass
class Case:
    generator: str
    kind: str
    payload: object
    options: dict = field(default_factory=dict)  # compile_json_schema keyword arguments
    walk_seed: int = 0

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=True)

    @classmethod
    def from_json(cls, text: str) -> Case:
        return cls(**json.loads(text))

    def _repr_pretty_(self, printer, cycle) -> None:
        # hypothesis prints the example a test stops on; payloads can be thousands of levels deep
        printer.text(f"Case({self.generator!r}, {self.kind!r}, walk_seed={self.walk_seed})")

    def with_payload(self, payload) -> Case:
        return Case(self.generator, self.kind, payload, dict(self.options), self.walk_seed)


# ---- compiling -------------------------------------------------------------------------


def compile_case(compiler, case: Case):
    """The CompiledGrammar for a case (None: response_format text, unconstrained)."""
    kind, payload = case.kind, case.payload
    if kind == "ebnf":
        return compiler.compile_grammar(payload)
    if kind == "regex":
        return compiler.compile_regex(payload)
    if kind == "json_schema":
        return compiler.compile_json_schema(payload, **case.options)
    if kind == "ir":
        return compiler.compile_ir(build_ir(payload))
    if kind == "structural_tag":
        return compiler.compile_structural_tag(payload)
    if kind == "response_format":
        return compiler.compile_response_format(payload)[0]
    if kind == "selftest":
        return run_selftest(payload)
    raise ValueError(f"unknown case kind {kind!r}")


def build_ir(spec: dict):
    """An ir.Grammar from its list form, built with the node classes themselves (not the
    checking constructors) so that the core's own IR validation is what gets exercised:

        {"root": name, "rules": [[name, node], ...]}
        node: ["bytes", [b, ...]] | ["byteset", [[lo, hi], ...]] | ["seq", [node, ...]]
            | ["alt", [node, ...]] | ["repeat", node, min, max or None] | ["ref", name]
            | ["check", kind, [param, ...]] | ["region", node]
            | ["and", [[node, want], ...], escaped]   (wants and flag as given, unchecked here)
            | ["automaton", [[from, lo, hi, to], ...], [accepting, ...]]
            | ["machine", [[from, node, to], ...], [accepting, ...]]
    """
    from trellis.grammar import ir

    def node(n):
        tag = n[0]
        if tag == "bytes":
            return ir.Bytes(bytes(n[1]))
        if tag == "byteset":
            return ir.ByteSet(tuple(tuple(r) for r in n[1]))
        if tag == "seq":
            return ir.Seq(tuple(node(c) for c in n[1]))
        if tag == "alt":
            return ir.Alt(tuple(node(c) for c in n[1]))
        if tag == "repeat":
            return ir.Repeat(node(n[1]), n[2], n[3])
        if tag == "ref":
            return ir.Ref(n[1])
        if tag == "check":
            return ir.Check(n[1], tuple(n[2]))
        if tag == "region":
            return ir.Region(node(n[1]))
        if tag == "automaton":
            made = object.__new__(ir.Automaton)  # states and bytes as given: the core checks them
            made.runs, made.accept, made._hash = tuple(tuple(r) for r in n[1]), tuple(n[2]), None
            return made
        if tag == "machine":
            made = object.__new__(ir.Machine)
            made.edges = tuple((a, node(c), b) for a, c, b in n[1])
            made.accept, made._hash = tuple(n[2]), None
            return made
        if tag == "and":  # past ir.And's own check, so that the core's is what runs
            made = object.__new__(ir.And)
            made.items, made.wants = tuple(node(c) for c, _ in n[1]), tuple(w for _, w in n[1])
            made.escaped, made._hash = n[2], None
            return made
        raise ValueError(f"unknown IR spec node {tag!r}")

    rules = {name: node(body) for name, body in spec["rules"]}
    return ir.Grammar(rules, spec["root"])


def run_selftest(what: str):
    """Deliberate misbehaviour, so that tests can check the harness classifies each kind."""
    import os
    import signal
    import time

    from trellis.errors import GrammarError

    if what == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    if what == "hang":
        time.sleep(3600)
    if what == "memory":
        return bytearray(64 << 30)  # past any RLIMIT_AS the pool sets
    if what == "typed":
        raise GrammarError("selftest")
    if what == "untyped":
        raise ZeroDivisionError("selftest")
    raise ValueError(f"unknown selftest {what!r}")


# ---- reproducers -----------------------------------------------------------------------

_CALLS = {
    "ebnf": "compiler.compile_grammar({})",
    "regex": "compiler.compile_regex({})",
    "json_schema": "compiler.compile_json_schema({}{})",
    "ir": "compiler.compile_ir(build_ir({}))",
    "structural_tag": "compiler.compile_structural_tag({})",
    "response_format": "compiler.compile_response_format({})",
    "selftest": "run_selftest({})",
}


def _smollm2():
    from trellis.grammar import Vocabulary

    return Vocabulary.smollm2()


def _gemma3():
    from tests.model.gemma3 import gemma3_gguf_path
    from trellis.grammar import Vocabulary

    return Vocabulary.from_gguf(gemma3_gguf_path())


# The vocabularies a fuzz run can use ($TRELLIS_FUZZ_VOCAB; the worker loads it): SmolLM2's 49,152
# byte-level tokens, or Gemma 3's 262,144 SentencePiece ones (multilingual text, byte fallbacks).
# Per name: a description, the loader, and the reproducer's lines that do what the loader does.
VOCABULARIES = {
    "smollm2": ("SmolLM2-135M-Instruct (49152 ids, byte-level BPE)", _smollm2,
                ["compiler = GrammarCompiler(Vocabulary.smollm2())"]),
    "gemma3": ("Gemma 3 270M (262144 ids, SentencePiece)", _gemma3,
               ["from tests.model.gemma3 import gemma3_gguf_path",
                "compiler = GrammarCompiler(Vocabulary.from_gguf(gemma3_gguf_path()))"]),
}


def vocabulary_name() -> str:
    name = os.environ.get("TRELLIS_FUZZ_VOCAB", "smollm2")
    if name not in VOCABULARIES:
        raise ValueError(f"TRELLIS_FUZZ_VOCAB={name!r}: not one of {', '.join(VOCABULARIES)}")
    return name


def load_vocabulary():
    return VOCABULARIES[vocabulary_name()][1]()


def reproducer(case: Case, *, walk: bool = False) -> str:
    """A Python snippet that compiles the case; with `walk`, also the replay command that
    repeats the mask walk (its checks need the harness)."""
    lines = ["import json" if not isinstance(case.payload, str) and _needs_json(case.payload) else None,
             "from trellis.grammar import GrammarCompiler, Vocabulary",
             "from tests.grammar.fuzz.cases import build_ir" if case.kind == "ir" else None,
             "from tests.grammar.fuzz.cases import run_selftest" if case.kind == "selftest" else None,
             *VOCABULARIES[vocabulary_name()][2]]
    expr = payload_expr(case.payload)
    options = "".join(f", {k}={v!r}" for k, v in case.options.items())
    call = _CALLS[case.kind]
    lines.append(call.format(expr, options) if case.kind == "json_schema" else call.format(expr))
    if walk:
        lines.append(f"# the mask walk: python -m tests.grammar.fuzz.replay {_shell_quote(case.to_json())}")
    return "\n".join(line for line in lines if line)


def payload_expr(payload) -> str:
    """A Python expression for the payload: a literal when short, else long runs written as
    repetitions (a 3000-deep nesting prints in one line)."""
    if isinstance(payload, str):
        return compact_repr(payload)
    if not _needs_json(payload):
        return repr(payload)
    return f"json.loads({compact_repr(json.dumps(payload, ensure_ascii=True))})"


def _needs_json(payload) -> bool:
    text = repr(payload)
    if len(text) > 240:
        return True
    try:
        return ast.literal_eval(text) != payload
    except (ValueError, SyntaxError, RecursionError, MemoryError):
        return True


def compact_repr(text: str, min_run: int = 24) -> str:
    """repr(text), with every stretch of one unit (1-40 characters) repeated into at least
    `min_run` characters written as `unit * n`."""
    pieces: list[str] = []
    literal_start, i = 0, 0
    while i < len(text):
        best = None
        for period in range(1, 41):
            unit = text[i : i + period]
            if len(unit) < period:
                break
            count = 1
            while text.startswith(unit, i + count * period):
                count += 1
            if count >= 3 and count * period >= min_run and (best is None or count * period > best[0] * best[1]):
                best = (count, period)
        if best is None:
            i += 1
            continue
        count, period = best
        if literal_start < i:
            pieces.append(repr(text[literal_start:i]))
        pieces.append(f"{text[i:i + period]!r} * {count}")
        i += count * period
        literal_start = i
    if literal_start < len(text) or not pieces:
        pieces.append(repr(text[literal_start:]))
    return " + ".join(pieces)


def _shell_quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"
