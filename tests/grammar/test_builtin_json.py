"""The built-in any-JSON grammar against json.loads (with NaN/Infinity refused)."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.grammar.reference import Reference
from trellis.grammar.builtin_json import builtin_json_grammar

JSON = Reference(builtin_json_grammar())
FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _refuse(name):
    raise ValueError(f"{name} is not JSON")


def oracle(data: bytes) -> bool:
    """RFC 8259 via Python: strict UTF-8, json.loads, and no NaN / Infinity."""
    try:
        text = data.decode("utf-8")  # refuses surrogates, overlong forms, stray bytes
        json.loads(text, parse_constant=_refuse)
    except ValueError:  # includes UnicodeDecodeError and JSONDecodeError
        return False
    return True


_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=6)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-10**20, 10**20)
    | st.floats(allow_nan=False, allow_infinity=False) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=10,
)
_layout = st.sampled_from([
    dict(separators=(",", ":")), dict(), dict(indent=2), dict(indent="\t"), dict(indent="\r\n"),
    dict(indent=0, ensure_ascii=False), dict(separators=(" ,\t", "\r: "), ensure_ascii=False),
])
_ws = st.text(" \t\n\r", max_size=3)


@FAST
@given(_json, _layout, _ws, _ws)
def test_serialized_values_are_accepted(value, layout, before, after):
    data = (before + json.dumps(value, **layout) + after).encode()
    assert oracle(data)
    assert JSON.accepts(data), data


_MUTATION_BYTES = (b'{}[]",:\\/ \t\r\n\x0b\x0c0123456789-+.eEtrufalsnbuINaIy'
                   b"\x00\x1f\x7f\xc3\xa9\xed\xa0\xff")


@FAST
@given(_json, st.booleans(), st.data())
def test_mutations_agree_with_json_loads(value, ascii_only, data):
    text = bytearray(json.dumps(value, ensure_ascii=ascii_only).encode())
    for _ in range(data.draw(st.integers(1, 3))):
        pos = data.draw(st.integers(0, len(text)))
        op = data.draw(st.sampled_from(["insert", "delete", "replace"]))
        byte = data.draw(st.sampled_from(_MUTATION_BYTES))
        if op == "insert":
            text[pos:pos] = bytes([byte])
        elif pos < len(text):
            text[pos:pos + 1] = b"" if op == "delete" else bytes([byte])
    assert JSON.accepts(bytes(text)) == oracle(bytes(text)), bytes(text)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=8) | st.text('{}[]",:\\ 0-1.eEtrunlfasu', max_size=10).map(str.encode))
def test_short_strings_agree_with_json_loads(data):
    assert JSON.accepts(data) == oracle(data), data


@pytest.mark.parametrize("doc", [
    b"NaN", b"Infinity", b"-Infinity", b"[NaN]", b'{"a": Infinity}', b"01", b"1.", b".5", b"+1",
    b"1e", b"1e+", b"-", b"--1", b"0x10", b"'a'", b'"\\x41"', b'"\\u12"', b'"a\tb"', b'"\x7f\x00"',
    b"[1,]", b'{"a":1,}', b"{1:2}", b"tru", b"nul", b"[] []", b"\x0b1", b"1\x0c", b"",
    b'"\xed\xa0\x80"', b'"\xc0\xaf"', b"\xef\xbb\xbf1",
])
def test_rejected_like_json_loads(doc):
    assert not JSON.accepts(doc), doc
    assert not oracle(doc), doc


@pytest.mark.parametrize("doc", [
    b"0", b"-0", b"-0.0e-0", b"1E+9", b'"\\ud83d\\ude00\\ud800"', b'"\\/\\b\\f\\n\\r\\t\\"\\\\"',
    '"é😀\u2028\x7f"'.encode(), b" \r\n\t[ ] ", b'{"":{"":[[],{}]}}', b"true", b"null",
])
def test_accepted_like_json_loads(doc):
    assert JSON.accepts(doc) and oracle(doc), doc


def test_every_prefix_of_a_document_is_a_prefix():
    doc = json.dumps({"a": [1, -2.5e-3, "é\\\"\u0001😀", {"n": None}], "t": [True, False]},
                     indent=1, ensure_ascii=False).encode()
    assert JSON.accepts(doc)
    for i in range(len(doc)):
        assert JSON.is_prefix(doc[:i]), doc[:i]
    # A number can end anywhere a digit did, so "1" is accepted as well as a prefix of "12".
    assert JSON.accepts(b"1") and JSON.is_prefix(b"1")


@pytest.mark.parametrize("data", [
    b"x", b"{x", b'{"a" x', b"[1 2", b"[1,]", b"tx", b"01", b'"\x01', b'"\\q', b'"\xff',
    b'"\xc3\x41',
    b"-a", b"1.e", b"{}}", b"\xef",
])
def test_impossible_bytes_end_the_prefix(data):
    assert JSON.is_prefix(data[:-1]) and not JSON.is_prefix(data), data
    # Nothing appended can repair it.
    for tail in (b"", b"0", b'"', b"}", b"]", b"}]}", b"e1"):
        assert not JSON.accepts(data + tail)


def test_next_bytes():
    assert JSON.next_bytes(b"[tr") == {ord("u")}
    assert JSON.next_bytes(b'"\\') == set(b'"\\/bfnrtu')
    after_zero = JSON.next_bytes(b"0")
    assert after_zero == set(b" \t\n\r.eE") and not after_zero & set(b"0123456789")
