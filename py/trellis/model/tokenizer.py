"""Byte-level BPE tokenizer in pure Python (runs under Pyodide: no numpy, no Rust).

It loads the data the model build writes (`tokenizer.json` in the artifacts folder, taken from the
GGUF's `tokenizer.ggml.*` fields): tokens, merges, token types, special ids, pre-tokenizer name.
"""

import codecs
import json

from trellis.bytelevel import BYTE_TO_CHAR, CHAR_TO_BYTE
from trellis.errors import ModelError
from trellis.model.pretokenize import PRETOKENIZERS

# GGUF token types (llama.cpp's llama_token_type).
TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_USER_DEFINED, TOKEN_UNUSED, TOKEN_BYTE = 1, 2, 3, 4, 5, 6


class Tokenizer:
    def __init__(self, data: dict):
        if data.get("model") != "gpt2":
            raise ModelError(f"tokenizer model {data.get('model')!r} is not supported (only byte-level BPE 'gpt2')")
        pre = data.get("pre", "gpt2")
        if pre not in PRETOKENIZERS:
            raise ModelError(f"pre-tokenizer {pre!r} is not supported (known: {', '.join(sorted(PRETOKENIZERS))})")
        self._split = PRETOKENIZERS[pre]
        self.tokens: list[str] = list(data["tokens"])
        self.token_types: list[int] = list(data.get("token_types") or [TOKEN_NORMAL] * len(self.tokens))
        self.bos_token_id: int | None = data.get("bos_token_id")
        self.eos_token_id: int | None = data.get("eos_token_id")
        self._ids = {tok: i for i, tok in enumerate(self.tokens)}
        self._ranks = {}
        for rank, merge in enumerate(data["merges"]):
            left, sep, right = merge.partition(" ")
            if not sep:
                raise ModelError(f"tokenizer merge {rank} {merge!r} is not two space-separated symbols")
            self._ranks[(left, right)] = rank
        # Control and user-defined tokens are matched verbatim in the input, before pre-tokenization.
        self.special_ids = {
            i for i, t in enumerate(self.token_types) if t in (TOKEN_CONTROL, TOKEN_USER_DEFINED)
        }
        self._specials = sorted((self.tokens[i] for i in self.special_ids), key=len, reverse=True)
        self._token_bytes = [self._bytes_of(i) for i in range(len(self.tokens))]
        self._cache: dict[str, list[int]] = {}

    @classmethod
    def from_file(cls, path: str) -> "Tokenizer":
        with open(path, encoding="utf-8") as f:
            return cls(json.load(f))

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    def token_to_id(self, token: str) -> int | None:
        return self._ids.get(token)

    def encode(self, text: str, special: bool = True) -> list[int]:
        """Token ids of `text`; with `special`, control-token strings in `text` become their ids."""
        ids: list[int] = []
        for chunk, is_special in self._split_specials(text) if special else [(text, False)]:
            if is_special:
                ids.append(self._ids[chunk])
            else:
                for word in self._split(chunk):
                    ids.extend(self._encode_word(word))
        return ids

    def encode_bytes(self, data: bytes) -> list[int]:
        """Token ids whose bytes concatenate to `data` (no special tokens); bytes that are not
        whole UTF-8 characters (a grammar may stop mid-character) get one byte token each."""
        try:
            return self.encode(data.decode("utf-8"), special=False)
        except UnicodeDecodeError as e:
            head, bad, rest = data[:e.start], data[e.start:e.end], data[e.end:]
        ids = self.encode_bytes(head) if head else []
        for b in bad:
            token = self._ids.get(BYTE_TO_CHAR[b])
            if token is None:
                raise ModelError(f"the vocabulary has no token for byte 0x{b:02x}")
            ids.append(token)
        return ids + (self.encode_bytes(rest) if rest else [])

    def token_bytes(self, token_id: int) -> bytes:
        return self._token_bytes[token_id]

    def decode(self, ids, skip_special: bool = False) -> str:
        data = b"".join(
            self._token_bytes[i] for i in ids if not (skip_special and i in self.special_ids)
        )
        return data.decode("utf-8", errors="replace")

    def stream_decoder(self, skip_special: bool = False) -> "StreamDecoder":
        return StreamDecoder(self, skip_special)

    def _split_specials(self, text: str):
        """(chunk, is_special) pieces; the longest special token wins at each position."""
        if not self._specials:
            return [(text, False)]
        out, start, i = [], 0, 0
        while i < len(text):
            if text[i] == "<" or not text[i].isascii():
                match = next((s for s in self._specials if text.startswith(s, i)), None)
            else:
                match = next((s for s in self._specials if s[0] == text[i] and text.startswith(s, i)), None)
            if match:
                if start < i:
                    out.append((text[start:i], False))
                out.append((match, True))
                i = start = i + len(match)
            else:
                i += 1
        if start < len(text):
            out.append((text[start:], False))
        return out

    def _encode_word(self, word: str) -> list[int]:
        cached = self._cache.get(word)
        if cached is not None:
            return cached
        symbols = [BYTE_TO_CHAR[b] for b in word.encode("utf-8")]
        ranks = self._ranks
        while len(symbols) > 1:
            best, best_rank = -1, None
            for j in range(len(symbols) - 1):
                rank = ranks.get((symbols[j], symbols[j + 1]))
                if rank is not None and (best_rank is None or rank < best_rank):
                    best, best_rank = j, rank
            if best < 0:
                break
            pair = (symbols[best], symbols[best + 1])
            # Merge every non-overlapping occurrence of the winning pair, left to right.
            out, j = [], best
            out.extend(symbols[:best])
            while j < len(symbols):
                if j < len(symbols) - 1 and (symbols[j], symbols[j + 1]) == pair:
                    out.append(pair[0] + pair[1])
                    j += 2
                else:
                    out.append(symbols[j])
                    j += 1
            symbols = out
        # A byte with no token of its own (SmolLM2 lacks a few control bytes) is dropped, as
        # llama.cpp and `tokenizers` without an unknown token do.
        ids = [self._ids[sym] for sym in symbols if sym in self._ids]
        if len(self._cache) < 100_000:
            self._cache[word] = ids
        return ids

    def _bytes_of(self, token_id: int) -> bytes:
        text = self.tokens[token_id]
        if token_id in self.special_ids:
            return text.encode("utf-8")
        try:
            return bytes(CHAR_TO_BYTE[c] for c in text)
        except KeyError:
            # Not byte-level encoded (an unusual vocabulary entry): use its UTF-8 text.
            return text.encode("utf-8")


class StreamDecoder:
    """Turns token ids into text as they arrive, holding back an incomplete UTF-8 sequence."""

    def __init__(self, tokenizer: Tokenizer, skip_special: bool = False):
        self._tokenizer, self._skip_special = tokenizer, skip_special
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, token_id: int) -> str:
        if self._skip_special and token_id in self._tokenizer.special_ids:
            return ""
        return self._utf8.decode(self._tokenizer.token_bytes(token_id))

    def flush(self) -> str:
        """Whatever is left; an incomplete sequence at the end becomes U+FFFD."""
        return self._utf8.decode(b"", final=True)
