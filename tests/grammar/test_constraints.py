"""The constraint service (grammar/constraints.py): one cache of compiled grammars per compiler,
bounded by count and bytes, shared by threads; validation against a format's whole language."""

from __future__ import annotations

import threading

import pytest

from trellis.errors import InvalidRequestError
from trellis.grammar import GrammarCompiler, GrammarMatcher, Vocabulary
from trellis.grammar.constraints import ConstraintService


def regex(pattern: str) -> dict:
    return {"type": "regex", "regex": pattern}


def test_equal_requests_in_any_dialect_are_one_entry(compiler):
    service = ConstraintService(compiler)
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}}
    first, key = service.compile({"type": "json_object", "schema": schema})
    again, key2 = service.compile({"type": "json_schema", "json_schema": {"name": "x", "strict": True,
                                                                          "schema": dict(reversed(schema.items()))}})
    assert first is again and key == key2 and len(service) == 1
    assert (service.hits, service.misses) == (1, 1)


def test_bounded_by_count_and_bytes(compiler):
    service = ConstraintService(compiler, max_entries=2)
    keys = [service.compile(regex(p))[1] for p in ("a+", "b+", "c+")]
    assert len(service) == 2 and service.evictions == 1 and keys[0] not in service and keys[2] in service
    service.compile(regex("b+"))  # a hit makes b+ the most recent: c+ goes next
    service.compile(regex("d+"))
    assert keys[1] in service and keys[2] not in service
    service = ConstraintService(compiler, max_bytes=1)  # always over: keeps only the newest
    for p in ("a+", "b+"):
        service.compile(regex(p))
    assert len(service) == 1 and service.stats()["bytes"] > 1


def test_bytes_follow_growing_mask_caches(compiler):
    """An entry's size is read afresh: the mask caches its matchers build count."""
    service = ConstraintService(compiler)
    grammar, _ = service.compile({"type": "json_object"})
    before = service.bytes
    matcher = GrammarMatcher(grammar)
    assert matcher.accept_string('{"key": [1, 2, {"x": "y"}]')
    matcher.fill_next_token_bitmask(matcher.new_bitmask())
    assert service.bytes > before


def test_an_empty_language_is_refused_and_not_kept(compiler):
    service = ConstraintService(compiler)
    with pytest.raises(InvalidRequestError) as info:
        service.compile({"type": "json_object", "schema": {"type": "integer", "minimum": 3, "maximum": 2}})
    assert info.value.field == "response_format" and "no JSON value" in str(info.value)
    assert len(service) == 0


def test_validate_takes_the_whole_language_and_counts_no_request(compiler):
    service = ConstraintService(compiler)
    rf = {"type": "json_object", "schema": {"type": "object", "properties": {"n": {"type": "integer"}}}}
    generated, _ = service.compile(rf)
    m = GrammarMatcher(generated)
    assert not (m.accept_string('{"n": 1.0, "extra": 2}') and m.can_terminate())  # strict, canonical
    counters = (service.hits, service.misses)
    result = service.validate('{"n": 1.0, "extra": 2}', rf)
    assert result == {"kind": "json_schema", "accepted": True, "complete": True, "valid": True,
                      "grammar": "compiled"}
    assert service.validate('{"n": 1.5}', rf)["valid"] is False
    assert service.validate('{"n": 1', rf) == {"kind": "json_schema", "accepted": True, "complete": False,
                                                "valid": False, "grammar": "cached"}
    assert (service.hits, service.misses) == counters and len(service) == 2
    assert service.validate("anything", {"type": "text"}) == {"kind": None, "valid": None}


def test_front_end_errors_name_the_source_field(compiler):
    service = ConstraintService(compiler)
    cases = [({"type": "regex", "value": "(a"}, "response_format.value"),
             ({"type": "grammar", "grammar": "root ::= (("}, "response_format.grammar"),
             ({"type": "structural_tag", "format": {"type": "regex", "pattern": "[z-a]"}}, "response_format.format.pattern")]
    for rf, field in cases:
        with pytest.raises(InvalidRequestError) as info:
            service.compile(rf)
        assert info.value.field == field, str(info.value)


def test_threads_share_one_service(compiler):
    """Eight threads asking for four formats at once: every answer is the format's grammar, and
    the cache ends with one entry per format."""
    service = ConstraintService(compiler)
    formats = [regex(f"{c}+[0-9]") for c in "abcd"]
    errors, grammars = [], {}

    def work(i: int) -> None:
        try:
            for round_ in range(20):
                rf = formats[(i + round_) % 4]
                grammar, key = service.compile(rf)
                m = GrammarMatcher(grammar)
                assert m.accept_string(rf["regex"][0] * 2 + "7") and m.can_terminate()
                grammars.setdefault(key, set()).add(id(grammar))
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(service) == 4 and service.hits + service.misses == 160
