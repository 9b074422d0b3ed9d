"""The token vocabulary a grammar is matched against: the bytes each token id produces.

Invariant every loader keeps: `token_bytes[i] == b""` exactly when `i` is in `special_ids`
(control tokens, unknown/unused tokens, padded ids past the tokenizer, empty tokens), and
`stop_ids` is a subset of `special_ids`. A grammar engine therefore never has to look at
token text to tell control tokens from text, and a zero-length token can never loop.

Stop ids (default rule, both loaders): the GGUF eos/eot/eom ids, plus every special token
whose text is one of STOP_TOKEN_NAMES (llama.cpp's end-of-generation rule, trimmed).

SentencePiece note: `token_bytes` of "▁Hello" is b" Hello". Decoders that strip the leading
space of a whole output (Metaspace `prepend_scheme`, add_space_prefix) are not modelled here.

This module runs in Pyodide: no numpy, and GGUF metadata is read with `struct` (the `gguf`
package's reader parses every field and takes ~3 s on SmolLM2; this reader ~0.1 s).
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterable, Sequence

from trellis.bytelevel import bytelevel_to_bytes, sentencepiece_to_bytes
from trellis.errors import VocabularyError

KINDS = ("byte_level", "sentencepiece", "raw")
STOP_TOKEN_NAMES = frozenset({
    "</s>", "<|endoftext|>", "<|end_of_text|>", "<|im_end|>", "<|eot_id|>", "<|eom_id|>",
    "<|end|>", "<end_of_turn>",
})
# GGUF tokenizer.ggml.token_type values.
_NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED, _UNUSED, _BYTE = 1, 2, 3, 4, 5, 6
_GGUF_KINDS = {"gpt2": "byte_level", "llama": "sentencepiece", "t5": "sentencepiece"}
_GGUF_STOP_KEYS = ("eos_token_id", "eot_token_id", "eom_token_id")


class Vocabulary:
    """Token id -> bytes, with the ids that are never text and those that end generation."""

    __slots__ = ("token_bytes", "vocab_size", "special_ids", "stop_ids", "kind")

    def __init__(
        self,
        token_bytes: Sequence[bytes],
        special_ids: Iterable[int] = (),
        stop_ids: Iterable[int] = (),
        vocab_size: int | None = None,
        kind: str = "raw",
    ):
        if kind not in KINDS:
            raise VocabularyError(f"unknown vocabulary kind {kind!r}; expected one of {KINDS}")
        token_bytes = list(token_bytes)
        for i, b in enumerate(token_bytes):
            if not isinstance(b, bytes):
                raise VocabularyError(f"token {i}: expected bytes, got {type(b).__name__}")
        size = len(token_bytes) if vocab_size is None else vocab_size
        if not isinstance(size, int) or isinstance(size, bool) or size < len(token_bytes):
            raise VocabularyError(
                f"vocab_size {vocab_size!r} must be an int >= the {len(token_bytes)} token strings"
            )
        if size == 0:
            raise VocabularyError("empty vocabulary")
        special = set(_checked_ids(special_ids, size, "special id"))
        stops = set(_checked_ids(stop_ids, size, "stop id"))
        token_bytes.extend([b""] * (size - len(token_bytes)))  # padded embedding rows
        # Stop tokens are control tokens; empty tokens could be emitted forever: both special.
        special |= stops | {i for i, b in enumerate(token_bytes) if not b}
        for i in special:
            token_bytes[i] = b""
        self.token_bytes: list[bytes] = token_bytes
        self.vocab_size: int = size
        self.special_ids: tuple[int, ...] = tuple(sorted(special))
        self.stop_ids: tuple[int, ...] = tuple(sorted(stops))
        self.kind: str = kind

    def __len__(self) -> int:
        return self.vocab_size

    def __repr__(self) -> str:
        return (f"Vocabulary(kind={self.kind!r}, vocab_size={self.vocab_size}, "
                f"special={len(self.special_ids)}, stop_ids={self.stop_ids})")

    @classmethod
    def from_token_bytes(cls, token_bytes, *, special_ids=(), stop_ids=(), vocab_size=None,
                         kind="raw") -> Vocabulary:
        """A vocabulary from explicit per-id bytes (tests, other front-ends)."""
        return cls(token_bytes, special_ids, stop_ids, vocab_size, kind)

    @classmethod
    def smollm2(cls) -> Vocabulary:
        """The embedded default model's vocabulary (49152 ids, stop ids 0 and 2)."""
        from trellis.model.embedded import smollm2_gguf_path

        return cls.from_gguf(smollm2_gguf_path())

    @classmethod
    def from_gguf(cls, path, vocab_size: int | None = None) -> Vocabulary:
        """Read a GGUF file's tokenizer (a path, or the file's bytes as loaded in a browser).

        vocab_size defaults to the row count of `token_embd.weight` when present (models pad
        their embedding past the tokenizer), else the number of tokens.
        """
        meta, embd_dims = read_gguf_metadata(path)
        model = meta.get("tokenizer.ggml.model")
        if model not in _GGUF_KINDS:
            raise VocabularyError(f"{_name(path)}: tokenizer.ggml.model {model!r} is not "
                                  f"supported (supported: {sorted(_GGUF_KINDS)})")
        tokens = meta.get("tokenizer.ggml.tokens")
        if not isinstance(tokens, list) or not tokens:
            raise VocabularyError(f"{_name(path)}: no tokenizer.ggml.tokens array")
        types = meta.get("tokenizer.ggml.token_type") or [_NORMAL] * len(tokens)
        if len(types) != len(tokens):
            raise VocabularyError(
                f"{_name(path)}: {len(types)} token types for {len(tokens)} tokens")
        kind = _GGUF_KINDS[model]
        # A normal SentencePiece piece is text with U+2581 for spaces; only byte-type tokens are <0xNN>.
        normal = _bytelevel_or_utf8 if kind == "byte_level" else _sentencepiece_text
        token_bytes, special = [], []
        for i, (text, ttype) in enumerate(zip(tokens, types)):
            if ttype == _NORMAL:
                token_bytes.append(normal(text))
            elif ttype == _USER_DEFINED:
                token_bytes.append(text.encode("utf-8"))  # literal text, as llama.cpp
            elif ttype == _BYTE:
                token_bytes.append(sentencepiece_to_bytes(text) if text.startswith("<0x")
                                   else normal(text))
            else:  # unknown, control, unused, and types we do not know
                token_bytes.append(b"")
                special.append(i)
        stops = {meta.get(f"tokenizer.ggml.{key}") for key in _GGUF_STOP_KEYS}
        stops = {i for i in stops if isinstance(i, int) and 0 <= i < len(tokens)}  # absent/bogus
        stops |= {i for i in special if tokens[i] in STOP_TOKEN_NAMES}
        if vocab_size is None and embd_dims and len(embd_dims) >= 2:
            vocab_size = embd_dims[1]  # GGUF lists dims innermost first: [hidden, rows]
        return cls(token_bytes, special, stops, vocab_size, kind)

    @classmethod
    def from_tokenizer_json(cls, source, vocab_size: int | None = None,
                            stop_tokens: Iterable[str] | None = None) -> Vocabulary:
        """A Hugging Face tokenizer.json: a dict, its JSON text, or a path to it.

        Added tokens with `special: true` are special; other added tokens are literal text.
        `stop_tokens` (token strings) replaces the default stop rule of the module docstring.
        """
        data = _load_json(source)
        model = data.get("model")
        if not isinstance(model, dict):
            raise VocabularyError("tokenizer.json has no `model` object")
        mtype, vocab = model.get("type"), model.get("vocab")
        if mtype == "Unigram" and isinstance(vocab, list):
            pieces = {entry[0]: i for i, entry in enumerate(vocab)}
        elif mtype in ("BPE", "WordLevel", None) and isinstance(vocab, dict):
            pieces = vocab
        else:
            raise VocabularyError(f"tokenizer.json model type {mtype!r} is not supported "
                                  "(supported: BPE, Unigram, WordLevel)")
        added = data.get("added_tokens") or []
        pieces = dict(pieces)
        for tok in added:
            if not isinstance(tok, dict) or not isinstance(tok.get("content"), str):
                raise VocabularyError(f"tokenizer.json added token {tok!r} has no content")
            pieces[tok["content"]] = tok.get("id")
        count = 1 + max(_checked_ids(pieces.values(), 1 << 31, "token id"), default=-1)
        kind = _detect_kind(data, pieces)
        normal = _bytelevel_or_utf8 if kind == "byte_level" else sentencepiece_to_bytes
        by_id: list[str | None] = [None] * count
        for text, i in pieces.items():
            by_id[i] = text
        token_bytes = [b"" if t is None else normal(t) for t in by_id]
        special = {i for i, t in enumerate(by_id) if t is None}
        for tok in added:  # added tokens are never split or byte-decoded
            if tok.get("special"):
                special.add(tok["id"])
            else:
                token_bytes[tok["id"]] = tok["content"].encode("utf-8")
        if stop_tokens is None:
            stops = {i for i in special if by_id[i] in STOP_TOKEN_NAMES}
        else:
            stops = set()
            for text in stop_tokens:
                if text not in pieces:
                    raise VocabularyError(f"stop token {text!r} is not in the vocabulary")
                stops.add(pieces[text])
        return cls(token_bytes, special, stops, vocab_size, kind)


    @classmethod
    def from_huggingface(cls, tokenizer, vocab_size: int | None = None,
                         stop_tokens: Iterable[str] | None = None) -> Vocabulary:
        """A Hugging Face tokenizer object, as xgrammar's TokenizerInfo.from_huggingface takes it: a
        `tokenizers.Tokenizer`, or a `transformers` fast tokenizer (its backend). Neither package
        is imported here. `vocab_size`: the model's (its logits' width) when it pads past the
        tokenizer. The tokenizer's eos token ends generation, beside the default stop rule."""
        backend = getattr(tokenizer, "backend_tokenizer", tokenizer)
        to_str = getattr(backend, "to_str", None)
        if not callable(to_str):
            raise VocabularyError(f"{type(tokenizer).__name__} is not a Hugging Face tokenizers object or fast "
                                  "tokenizer (load it with use_fast=True, or pass its tokenizer.json to "
                                  "Vocabulary.from_tokenizer_json)")
        vocab = cls.from_tokenizer_json(json.loads(to_str()), vocab_size, stop_tokens)
        eos = getattr(tokenizer, "eos_token_id", None)
        if stop_tokens is None and isinstance(eos, int) and eos in vocab.special_ids:
            vocab.stop_ids = tuple(sorted({*vocab.stop_ids, eos}))
        return vocab


def _checked_ids(ids: Iterable[int], size: int, what: str) -> list[int]:
    out = []
    for i in ids:
        if not isinstance(i, int) or isinstance(i, bool):
            raise VocabularyError(f"{what} {i!r} is not an int")
        if not 0 <= i < size:
            raise VocabularyError(f"{what} {i} is out of range [0, {size})")
        out.append(i)
    return out


def _bytelevel_or_utf8(text: str) -> bytes:
    # Like the HF ByteLevel decoder: a token with a char outside the byte map is literal UTF-8.
    data = bytelevel_to_bytes(text)
    return text.encode("utf-8") if data is None else data


def _sentencepiece_text(piece: str) -> bytes:
    return piece.replace("\u2581", " ").encode("utf-8")


def _name(source) -> str:
    return os.fspath(source) if isinstance(source, (str, os.PathLike)) else "<GGUF bytes>"


def _load_json(source) -> dict:
    if isinstance(source, dict):
        return source
    try:
        if isinstance(source, str) and source.lstrip().startswith(("{", "[")):
            data = json.loads(source)
        else:
            with open(source, encoding="utf-8") as f:
                data = json.load(f)
    except (OSError, ValueError) as exc:
        raise VocabularyError(f"cannot read tokenizer.json: {exc}") from exc
    if not isinstance(data, dict):
        raise VocabularyError("tokenizer.json is not a JSON object")
    return data


def _component_types(node) -> set[str]:
    """Every `type` in a pre_tokenizer/decoder/normalizer tree (Sequence nests them)."""
    if isinstance(node, list):
        return set().union(*map(_component_types, node)) if node else set()
    if not isinstance(node, dict):
        return set()
    found = {node["type"]} if isinstance(node.get("type"), str) else set()
    for key in ("pretokenizers", "decoders", "normalizers"):
        found |= _component_types(node.get(key))
    # Llama-style: normalizer Replace(" " -> "▁"), decoder Replace("▁" -> " ").
    pattern = node.get("pattern") if isinstance(node.get("pattern"), dict) else {}
    if node.get("type") == "Replace" and "\u2581" in (node.get("content"), pattern.get("String")):
        found.add("ReplaceMetaspace")
    return found


def _detect_kind(data: dict, pieces: dict) -> str:
    parts = set().union(*(_component_types(data.get(key))
                          for key in ("pre_tokenizer", "decoder", "normalizer")))
    model = data["model"]
    if "ByteLevel" in parts:
        return "byte_level"
    if parts & {"Metaspace", "ByteFallback", "ReplaceMetaspace"} or model.get("byte_fallback") \
            or model.get("type") == "Unigram":
        return "sentencepiece"
    # No telling component: fall back on the space marker most tokens use.
    metaspace = sum(t.startswith("\u2581") for t in pieces)
    gpt2_space = sum(t.startswith("\u0120") for t in pieces)
    if metaspace or gpt2_space:
        return "sentencepiece" if metaspace > gpt2_space else "byte_level"
    raise VocabularyError(
        "cannot tell whether tokenizer.json is byte-level or SentencePiece: no ByteLevel, "
        "Metaspace or ByteFallback component and no space-marked tokens")


# --- GGUF metadata: just the key/value section and tensor shapes, no tensor data. ---

_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?",
            10: "Q", 11: "q", 12: "d"}  # GGUF value type -> struct format
_STRING, _ARRAY = 8, 9
_CHUNK = 1 << 20
_MAX_LEN = 1 << 31  # a longer string or array means a corrupt header, not a real vocabulary


class _Stream:
    """Sequential little-endian reads over a file (read in chunks) or an in-memory buffer."""

    def __init__(self, source):
        if isinstance(source, (bytes, bytearray, memoryview)):
            self.file, self.buf = None, memoryview(source)
        else:
            self.file, self.buf = open(source, "rb"), b""
        self.pos, self.name = 0, _name(source)

    def close(self):
        if self.file:
            self.file.close()

    def need(self, n: int):
        if self.pos + n <= len(self.buf):
            return
        if n > _MAX_LEN:
            raise VocabularyError(f"{self.name}: GGUF header claims {n} bytes; corrupt file?")
        more = self.file.read(max(n, _CHUNK)) if self.file else b""
        self.buf, self.pos = bytes(self.buf[self.pos:]) + more, 0  # drop what was consumed
        if len(self.buf) < n:
            raise VocabularyError(f"{self.name}: GGUF file is truncated")

    def scalar(self, fmt: str):
        size = struct.calcsize(fmt)
        self.need(size)
        (value,) = struct.unpack_from("<" + fmt, self.buf, self.pos)
        self.pos += size
        return value

    def string(self, keep: bool = True):
        n = self.scalar("Q")
        self.need(n)
        text = str(self.buf[self.pos:self.pos + n], "utf-8", "replace") if keep else None
        self.pos += n
        return text

    def strings(self, count: int, keep: bool):
        # Token and merge arrays hold ~1e5 strings: one inlined loop, refilling only at the end.
        out, unpack = [], struct.Struct("<Q").unpack_from
        buf, pos = self.buf, self.pos
        for _ in range(count):
            if pos + 8 > len(buf):
                self.pos = pos
                self.need(8)
                buf, pos = self.buf, self.pos
            n = unpack(buf, pos)[0]
            if pos + 8 + n > len(buf):
                self.pos = pos
                self.need(8 + n)
                buf, pos = self.buf, self.pos
            pos += 8
            if keep:
                out.append(str(buf[pos:pos + n], "utf-8", "replace"))
            pos += n
        self.pos = pos
        return out if keep else None

    def value(self, vtype: int, keep: bool):
        if vtype == _STRING:
            return self.string(keep)
        if vtype == _ARRAY:
            etype, count = self.scalar("I"), self.scalar("Q")
            if count > _MAX_LEN:
                raise VocabularyError(f"{self.name}: GGUF array of {count} items; corrupt file?")
            if etype in _SCALARS:  # one unpack for the whole array
                fmt = f"<{count}{_SCALARS[etype]}"
                self.need(struct.calcsize(fmt))
                items = struct.unpack_from(fmt, self.buf, self.pos)
                self.pos += struct.calcsize(fmt)
                return list(items) if keep else None
            if etype == _STRING:
                return self.strings(count, keep)
            items = [self.value(etype, keep) for _ in range(count)]
            return items if keep else None
        if vtype in _SCALARS:
            return self.scalar(_SCALARS[vtype])
        raise VocabularyError(f"GGUF value type {vtype} is unknown")


_VOCAB_KEYS = frozenset(  # merges are skipped: ~50k more strings to decode, unused here
    [f"tokenizer.ggml.{key}" for key in ("model", "tokens", "token_type", *_GGUF_STOP_KEYS)])


def read_gguf_metadata(source, want=_VOCAB_KEYS.__contains__):
    """(metadata, token_embd dims) of a GGUF file; only keys `want` accepts are decoded."""
    try:
        stream = _Stream(source)
    except OSError as exc:
        raise VocabularyError(f"cannot open GGUF file {_name(source)}: {exc}") from exc
    try:
        stream.need(4)
        if bytes(stream.buf[:4]) != b"GGUF":
            raise VocabularyError(f"{_name(source)} is not a GGUF file (bad magic)")
        stream.pos = 4
        version = stream.scalar("I")
        if version not in (2, 3):
            raise VocabularyError(f"{_name(source)}: GGUF version {version} is not supported "
                                  "(2 and 3 little-endian are)")
        n_tensors, n_kv = stream.scalar("Q"), stream.scalar("Q")
        meta = {}
        for _ in range(n_kv):
            key = stream.string()
            keep = want(key)
            value = stream.value(stream.scalar("I"), keep)
            if keep:
                meta[key] = value
        embd_dims = None
        for _ in range(n_tensors):
            name = stream.string()
            dims = [stream.scalar("Q") for _ in range(stream.scalar("I"))]
            stream.scalar("I")  # tensor type
            stream.scalar("Q")  # data offset
            if name == "token_embd.weight":
                embd_dims = dims
                break
        return meta, embd_dims
    finally:
        stream.close()
