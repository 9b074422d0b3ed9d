"""The native port's conversion (kernels/grammar/src/schema/converter.cpp) against the Python
converter it ports: on every MaskBench dev schema it does not decline, the same words as
ir.serialize(json_schema_to_grammar(schema)); and how many it covers, and why not.

Rule names are compared as a count only: where two subschemas say the same thing, the Python names
the rule after the one it meets first, and it meets some of them in a set's order, which string
hashing makes differ from one process to the next (the words do not differ)."""

from __future__ import annotations

import collections
import pytest

from trellis.errors import TrellisError
from trellis.grammar import ir
from trellis.grammar.json_schema import json_schema_to_grammar, native

from .probes import Probes
from .dev_corpus import dev_schemas


@pytest.fixture(scope="module")
def probes():
    return Probes()


@pytest.mark.parametrize("strict", [False, True])
def test_dev_schemas_convert_as_python(probes, strict):
    covered, renamed, why = 0, 0, collections.Counter()
    for i, (sid, schema) in enumerate(dev_schemas()):
        if strict and i % 3:
            continue  # strict mode on every third schema: most of its words are the default mode's
        req = native.request(schema, any_whitespace=True, strict=strict)  # what the compiler hands the core
        if req is None:
            why["not requested"] += 1
            continue
        port = probes.convert(*req)
        if "declined" in port:
            why[port["declined"].split(" at ")[0]] += 1
            continue
        try:
            words, names = ir.serialize(json_schema_to_grammar(schema, any_whitespace=True, strict=strict))
        except TrellisError as e:
            pytest.fail(f"{sid}: the port converted what Python refuses ({e})")
        assert port["words"] == list(words), sid
        renamed += port["names"] != names
        covered += 1
    print(f"strict={strict}: covered {covered} ({renamed} with other rule names); declined: {why.most_common(12)}")
