"""The native port's reference walk (kernels/grammar/src/schema/refs.cpp) against the Python
Resolver it ports (py/trellis/grammar/json_schema/_refs.py), on every MaskBench dev schema: where
the port does not decline, the same subschemas walked, the same references' targets, and the same
subschemas found to say the same thing (Resolver.canonical's numbers)."""

from __future__ import annotations

import json

import pytest

from trellis.errors import TrellisError
from trellis.grammar.json_schema._refs import Resolver

from .dev_corpus import dev_schemas
from .probes import Probes

def python_walk(schema):
    """What probe_refs reports, from the Python Resolver; None where it raises."""
    try:
        r = Resolver(schema, draft7=False)
        nodes = list(r.by_pointer.values())
        refs = {}
        i = 0
        while i < len(r.by_pointer):  # grows as references reach folders of definitions
            if i >= len(nodes):
                nodes = list(r.by_pointer.values())
            n = nodes[i]
            i += 1
            if isinstance(n.schema, dict) and "$ref" in n.schema:
                refs[n.pointer] = r.follow(n, "$ref").pointer
        return {p: r.content.get(p, 0) for p in r.by_pointer}, refs
    except TrellisError:
        return None


def partition(numbers: dict) -> dict:
    """pointer -> the first pointer with its number (0: its own)."""
    first = {}
    return {p: (first.setdefault(n, p) if n else p) for p, n in numbers.items()}


@pytest.fixture(scope="module")
def probes():
    return Probes()


def test_dev_schemas_walk_as_python(probes):
    covered = declined = 0
    for sid, schema in dev_schemas():
        native = probes.refs(json.dumps(schema))
        expected = python_walk(schema)
        if "declined" in native:
            declined += 1
            continue
        assert expected is not None, f"{sid}: the port walked what Python refuses"
        numbers, refs = expected
        assert native["refs"] == refs, sid
        assert set(native["walked"]) >= set(numbers), sid
        walked = {p: native["walked"][p] for p in numbers}
        assert partition(walked) == partition(numbers), sid
        covered += 1
    print(f"covered {covered}, declined {declined}")
    assert covered > 3000
