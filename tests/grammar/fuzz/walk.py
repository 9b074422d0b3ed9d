"""A short random walk through a compiled grammar's masks, checking the matcher against itself.

Each step fills the mask and checks it against the other verbs: a token the mask allows is
accepted, a few it refuses are refused (and leave the state alone), a stop token is allowed
exactly when can_terminate() says so, special tokens never are. Along the way: rollback returns
the mask seen at that depth, reset the first mask, accept_string of the walked bytes the last
one; at the end the shortest completion is accepted and completes the text, which for a JSON
Schema must then be valid JSON that the `jsonschema` package validates against the schema.

Walk modes bias the token choice: "repeat" keeps taking the same token (a parse state that
grows with each repetition shows up as a hang), "short" prefers one-byte tokens, "stop" ends
early through a stop token, "random" takes any allowed token.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from decimal import Decimal, InvalidOperation

import numpy as np

from trellis.grammar.json_values import NotJson, walk_json

MODES = ("random", "repeat", "repeat", "short", "stop")
PROBES = 3  # refused tokens tried per step


class Disagreement(Exception):
    """Two verbs of the matcher contradict each other; `check` names the property."""

    def __init__(self, check: str, detail: str):
        self.check, self.detail = check, detail
        super().__init__(f"{check}: {detail}")


class Walker:
    """Walks for one vocabulary (its token lengths and special ids computed once)."""

    def __init__(self, vocab):
        self.vocab = vocab
        self.stop_ids = set(vocab.stop_ids)
        self.special = np.zeros(vocab.vocab_size, dtype=bool)
        self.special[list(vocab.special_ids)] = True
        self.special[len(vocab.token_bytes):] = True  # padding ids have no bytes either
        lengths = [len(t) for t in vocab.token_bytes] + [0] * (vocab.vocab_size - len(vocab.token_bytes))
        self.lengths = np.array(lengths)
        # Bytes a token of one byte writes (byte-level BPE vocabularies may lack some: SmolLM2 has no 0xF1, 0xF2)
        self.one_byte = sorted({t[0] for t in vocab.token_bytes if len(t) == 1})

    def walk(self, compiled, seed: int, max_steps: int, kind: str, schema=None, options=None) -> dict:
        from trellis.grammar import GrammarMatcher

        return _Walk(self, compiled, GrammarMatcher, random.Random(seed), kind, schema, options or {}).run(max_steps)


class _Walk:
    def __init__(self, walker: Walker, compiled, matcher_class, rng: random.Random, kind: str, schema, options):
        self.w, self.compiled, self.rng, self.kind = walker, compiled, rng, kind
        self.schema, self.options = schema, options
        self.m = matcher_class(compiled)
        self.mode = rng.choice(MODES)
        self.tokens: list[int] = []  # accepted, stop tokens included
        self.mask_at: list[str] = []  # digest of the mask at each depth of the current path

    # -- the mask --
    def mask(self) -> tuple[np.ndarray, str]:
        buf = self.m.new_bitmask()
        self.m.fill_next_token_bitmask(buf)
        raw = bytes(buf)
        self.bits = np.unpackbits(np.frombuffer(raw, dtype=np.uint8), bitorder="little")[: self.w.vocab.vocab_size]
        return np.flatnonzero(self.bits), hashlib.blake2b(raw, digest_size=12).hexdigest()

    def record(self, digest: str, what: str) -> None:
        """The mask at the current depth equals the one seen there before (after a rollback)."""
        depth = len(self.tokens)
        if depth < len(self.mask_at):
            if self.mask_at[depth] != digest:
                raise Disagreement(what, f"the mask at depth {depth} differs from before ({self.describe()})")
            del self.mask_at[depth + 1 :]
        else:
            self.mask_at.append(digest)

    def describe(self) -> str:
        text = b"".join(self.w.vocab.token_bytes[t] for t in self.tokens)
        return f"mode {self.mode}, tokens {self.tokens[-12:]}, text {text[-80:]!r}"

    # -- one walk --
    def run(self, max_steps: int) -> dict:
        steps, dead_end, terminated, stuck = 0, False, False, False
        while steps < max_steps:
            allowed, digest = self.mask()
            self.record(digest, "rollback-mask")
            self.check_stop_bits(allowed)
            self.probe_refusals(allowed, digest)
            if len(allowed) == 0:
                stuck, dead_end = True, not self.compiled.is_empty
                break
            token = self.choose(allowed)
            steps += 1
            if token in self.w.stop_ids:
                self.take_stop(token)
                terminated = True
                break
            self.take(token)
            if self.tokens and self.rng.random() < 0.08:
                self.roll_back(self.rng.randint(1, min(4, len(self.tokens))))
        if not terminated:
            _, digest = self.mask()
            self.record(digest, "rollback-mask")
            self.check_replay(digest)
            if dead_end and self.kind in ("regex", "json_schema") and self.tokens and self.writable_next():
                raise Disagreement("dead-end", f"the mask is empty but the text cannot end ({self.describe()})")
            if not stuck:  # an empty mask: no completion to check (dead ends are judged above)
                self.check_completion()
        return {"steps": steps, "mode": self.mode, "terminated": terminated, "dead_end": dead_end}

    def writable_next(self) -> bool:
        """Whether the grammar takes next a byte that a one-byte token writes. If it takes none, no
        token continues the text (the character it needs starts with a byte the vocabulary cannot
        write) and an empty mask is exact, not a dead end."""
        for b in self.w.one_byte:
            if self.m.accept_string(bytes([b])):
                self.m.rollback(1)
                return True
        return False

    def check_stop_bits(self, allowed: np.ndarray) -> None:
        specials = allowed[self.w.special[allowed]].tolist()
        stops = [t for t in specials if t in self.w.stop_ids]
        if len(stops) != len(specials):
            raise Disagreement("special-in-mask", f"non-stop special ids {specials} allowed ({self.describe()})")
        if bool(stops) != self.m.can_terminate():
            raise Disagreement("stop-vs-can_terminate", f"stop allowed {bool(stops)} but can_terminate "
                                                        f"{not stops} ({self.describe()})")
        if self.m.is_terminated():
            raise Disagreement("terminated-state", f"is_terminated before any stop token ({self.describe()})")

    def probe_refusals(self, allowed: np.ndarray, digest: str) -> None:
        size, bits = self.w.vocab.vocab_size, self.bits
        probes = {self.rng.randrange(size) for _ in range(PROBES)} | set(self.w.stop_ids)
        probes = sorted(t for t in probes if not bits[t])
        history = self.m.history_length
        for token in probes:
            if self.m.accept_token(token):
                raise Disagreement("accept-outside-mask", f"token {token} "
                                   f"({self.w.vocab.token_bytes[token][:20]!r}) accepted though the mask "
                                   f"refuses it ({self.describe()})")
        if probes and (self.m.history_length != history or self.mask()[1] != digest):
            raise Disagreement("refusal-changed-state", f"a refused token changed the matcher ({self.describe()})")

    def choose(self, allowed: np.ndarray) -> int:
        rng, stops = self.rng, [t for t in sorted(self.w.stop_ids) if self.bits[t]]
        if stops and (self.mode == "stop" and rng.random() < 0.5 or len(allowed) == len(stops)
                      or rng.random() < 0.02):
            return stops[0]
        ordinary = allowed[~self.w.special[allowed]]
        if len(ordinary) == 0:
            return int(allowed[0])
        if self.mode == "repeat" and self.tokens and self.bits[self.tokens[-1]] and rng.random() < 0.97:
            return self.tokens[-1]
        if self.mode == "short" and rng.random() < 0.8:
            short = ordinary[self.w.lengths[ordinary] == 1]
            if len(short):
                return int(short[rng.randrange(len(short))])
        return int(ordinary[rng.randrange(len(ordinary))])

    def take(self, token: int) -> None:
        if not self.m.accept_token(token):
            raise Disagreement("mask-refused-by-accept", f"token {token} "
                               f"({self.w.vocab.token_bytes[token][:20]!r}) is in the mask but "
                               f"accept_token refuses it ({self.describe()})")
        self.tokens.append(token)
        if self.m.history_length != len(self.tokens):
            raise Disagreement("history-length", f"history_length {self.m.history_length} after "
                               f"{len(self.tokens)} tokens ({self.describe()})")

    def take_stop(self, token: int) -> None:
        self.take(token)
        if not self.m.is_terminated():
            raise Disagreement("terminated-state", f"not terminated after stop token {token} ({self.describe()})")
        allowed, _ = self.mask()
        if len(allowed) or self.m.accept_token(self.rng.randrange(self.w.vocab.vocab_size)):
            raise Disagreement("terminated-state", f"a terminated matcher allows more tokens ({self.describe()})")
        self.roll_back(1)
        if self.m.is_terminated() or not self.m.can_terminate():
            raise Disagreement("terminated-state", f"rolling back the stop token does not return to a "
                                                   f"complete text ({self.describe()})")
        _, digest = self.mask()
        self.record(digest, "rollback-mask")

    def roll_back(self, n: int) -> None:
        self.m.rollback(n)
        del self.tokens[-n:]
        if self.m.history_length != len(self.tokens):
            raise Disagreement("history-length", f"history_length {self.m.history_length} after rolling "
                               f"back to {len(self.tokens)} tokens ({self.describe()})")

    def check_replay(self, digest: str) -> None:
        """reset gives the first mask again; accept_string of the walked bytes the last mask."""
        self.m.reset()
        if self.mask()[1] != self.mask_at[0]:
            raise Disagreement("reset-mask", f"the mask after reset differs from the first ({self.describe()})")
        text = b"".join(self.w.vocab.token_bytes[t] for t in self.tokens)
        if text and not self.m.accept_string(text):
            raise Disagreement("accept_string", f"accept_string refuses the walked text ({self.describe()})")
        if self.mask()[1] != digest:
            raise Disagreement("accept_string", f"the mask after accept_string of the walked text differs "
                                                f"from the one after its tokens ({self.describe()})")

    def check_completion(self) -> None:
        completion = self.m.shortest_completion()
        if completion is None:
            if self.kind in ("regex", "json_schema"):
                raise Disagreement("completion", f"no completion for a text the mask led to ({self.describe()})")
            return
        if not self.m.accept_string(completion) or not self.m.can_terminate():
            raise Disagreement("completion", f"the shortest completion {completion[:60]!r} does not complete "
                                             f"the text ({self.describe()})")
        if self.kind == "json_schema":
            text = b"".join(self.w.vocab.token_bytes[t] for t in self.tokens) + completion
            check_schema_oracle(self.schema, self.options, text, self.describe())


def check_schema_oracle(schema, options: dict, text: bytes, where: str) -> None:
    """A text the grammar completes must be a JSON instance of the schema (independent oracle:
    the `jsonschema` package). Skipped where the oracle cannot judge: a schema it rejects,
    remote references, duplicate keys (json.loads keeps the last), a forced draft, or a number
    with more digits than a float holds where the oracle would do float arithmetic on it (the
    grammar's checks are exact: 4444...4.1, 55 digits, is no multiple of 0.5, but as a float it
    is), or a pattern that writes a surrogate pair as two escapes (ECMA-262 reads `\\uD83D\\uDE00`
    as one character, 😀; Python's re, which the oracle uses, as two code points no text holds), or a
    `format` where its answer turns the outcome around (under `not`, `if`, `oneOf`, `contains`):
    the grammar asserts formats, the oracle only annotates with them (it holds every string there)."""
    import jsonschema

    if options.get("draft") or isinstance(schema, str) or _surrogate_escapes(schema) or _format_turned(schema):
        return
    try:
        value = json.loads(text.decode("utf-8"), object_pairs_hook=_no_duplicates, parse_float=_exact_float)
    except _CannotJudge:
        return
    except (UnicodeDecodeError, ValueError) as e:
        raise Disagreement("schema-oracle", f"the completed text is not JSON ({e}): {text[:200]!r} ({where})")
    try:
        validator_class = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        validator_class.check_schema(schema)
        exact = jsonschema.validators.extend(  # a Decimal with no fraction is an integer too
            validator_class, type_checker=validator_class.TYPE_CHECKER.redefine("integer", _is_integer))
        error = jsonschema.exceptions.best_match(exact(schema).iter_errors(value))
    except Exception:  # the oracle itself cannot handle this schema
        return
    if error is not None:
        raise Disagreement("schema-oracle", f"the completed text {text[:200]!r} is not valid: "
                                            f"{error.message[:200]} ({where})")


class _CannotJudge(Exception):
    """A text the oracle cannot judge: duplicate keys, or a number no Decimal holds."""


def _is_integer(checker, instance) -> bool:
    """JSON Schema's integer: no fraction, in whatever type holds it (a bool is none)."""
    if isinstance(instance, bool):
        return False
    if isinstance(instance, float):
        return instance.is_integer()
    if isinstance(instance, Decimal):
        return instance == instance.to_integral_value()
    return isinstance(instance, int)


def _exact_float(literal: str):
    """A float, or a Decimal past 15 significant digits: comparisons with it stay exact, and
    float arithmetic on it (jsonschema's multipleOf) raises TypeError, which the oracle takes
    for "cannot judge"; an exponent no Decimal holds is not judged at all. A float's own
    shortest spelling (repr) is that float: a schema's float const is written so."""
    digits = literal.lower().split("e")[0].replace("-", "").replace(".", "").lstrip("0")
    if len(digits) <= 15 or repr(float(literal)) == literal:
        return float(literal)
    try:
        return Decimal(literal)
    except InvalidOperation:  # an exponent past what a Decimal holds: the oracle cannot judge
        raise _CannotJudge from None


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _surrogate_escapes(schema) -> bool:
    """Whether a `pattern` or a `patternProperties` key anywhere in the schema escapes a surrogate."""
    try:
        objects = [v for v, _, _ in walk_json(schema) if isinstance(v, dict)]
    except NotJson:
        return False  # not JSON: the oracle's own checks say so
    for o in objects:
        patterns = list(o["patternProperties"]) if isinstance(o.get("patternProperties"), dict) else []
        if isinstance(o.get("pattern"), str):
            patterns.append(o["pattern"])
        if any(_SURROGATE_ESCAPE.search(p) for p in patterns):
            return True
    return False


_TURNING = ("not", "if", "oneOf", "contains")  # keywords whose subschemas failing can make a value valid


def _format_turned(schema) -> bool:
    """Whether a `format` keyword sits in a subschema of a _TURNING keyword."""
    try:
        objects = [v for v, _, _ in walk_json(schema) if isinstance(v, dict)]
        return any("format" in x for o in objects for k in _TURNING if k in o
                   for x, _, _ in walk_json(o[k]) if isinstance(x, dict))
    except NotJson:
        return False  # not JSON: the oracle's own checks say so


def _no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise _CannotJudge
    return dict(pairs)
