"""The model's tokenizer in pure Python (runs under Pyodide: no numpy, no Rust).

It loads the data the model build writes (`tokenizer.json` in the artifacts folder, made from the
GGUF's `tokenizer.ggml.*` fields by trellis.model.tokenizer_data) and handles the two GGUF kinds:
byte-level BPE (`gpt2`: a pre-tokenizer, then merges by rank, trellis.model.bpe) and
SentencePiece-style pieces (`llama`: U+2581 for spaces, merges by score, byte fallback,
trellis.model.spm). Either way control and user-defined tokens are matched verbatim first.
"""

import codecs
import json

from trellis.bytelevel import BYTE_TO_CHAR, CHAR_TO_BYTE, sentencepiece_to_bytes
from trellis.errors import ModelError
from trellis.model.bpe import BytePairModel
from trellis.model.pretokenize import IGNORE_MERGES, PRETOKENIZERS
from trellis.model.spm import SPACE, SentencePieceModel
from trellis.model.tokenizer_data import MODELS, default_flags

# GGUF token types (llama.cpp's llama_token_type).
TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_USER_DEFINED, TOKEN_UNUSED, TOKEN_BYTE = 1, 2, 3, 4, 5, 6
_NOT_TEXT = (TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_UNUSED)
# What defuse() puts around a control token's text: two Unicode noncharacters (kept for a
# program's internal use), so encode() reads the token as text.
_DEFUSED = ("\ufdd0", "\ufdd1")


class Tokenizer:
    def __init__(self, data: dict):
        model = data.get("model")
        if model not in MODELS:
            raise ModelError(f"tokenizer.ggml.model {model!r} is not supported (supported: {', '.join(MODELS)})")
        self.model: str = model
        self.tokens: list[str] = list(data["tokens"])
        self.token_types: list[int] = list(data.get("token_types") or [TOKEN_NORMAL] * len(self.tokens))
        if len(self.token_types) != len(self.tokens):
            raise ModelError(f"tokenizer.ggml.token_type has {len(self.token_types)} entries "
                             f"for {len(self.tokens)} tokens")
        self.bos_token_id: int | None = data.get("bos_token_id")
        self.eos_token_id: int | None = data.get("eos_token_id")
        pre = data.get("pre", "gpt2" if model == "gpt2" else "default")
        flags = default_flags(model, pre)
        # Whether a prompt starts with BOS / ends with EOS (GGUF add_bos_token / add_eos_token).
        self.add_bos: bool = bool(data.get("add_bos", flags["add_bos"])) and self.bos_token_id is not None
        self.add_eos: bool = bool(data.get("add_eos", flags["add_eos"])) and self.eos_token_id is not None
        self.add_space_prefix: bool = bool(data.get("add_space_prefix", flags["add_space_prefix"]))
        n = len(self.tokens)
        # text -> id; a duplicate text keeps its first id (the reversed walk writes it last).
        self._ids: dict[str, int] = dict(zip(reversed(self.tokens), range(n - 1, -1, -1)))
        if model == "gpt2":
            if pre not in PRETOKENIZERS:
                raise ModelError(f"tokenizer.ggml.pre {pre!r} is not supported "
                                 f"(supported: {', '.join(sorted(PRETOKENIZERS))})")
            self._split = PRETOKENIZERS[pre]
            self._bpe = BytePairModel(self._ids, data["merges"], ignore_merges=pre in IGNORE_MERGES)
        else:  # SentencePiece has no pre-tokenizer: llama.cpp ignores `pre` ("default" in Gemma 3)
            if "scores" not in data:
                raise ModelError("tokenizer data has no 'scores' (tokenizer.ggml.scores), "
                                 "which a SentencePiece vocabulary needs")
            self._spm = SentencePieceModel(self.tokens, self.token_types, data["scores"],
                                           data.get("unknown_token_id"))
        types = self.token_types
        # Ids that are never text (control, unknown, unused): a grammar never emits them, and
        # `skip_special` drops them. User-defined tokens ("\n", "<table>" in Gemma 3) are text.
        self.special_ids = {i for i, t in enumerate(types) if t in _NOT_TEXT}
        # Verbatim matching: first char -> [(text, id, is_control)], longest first.
        self._verbatim: dict[str, list[tuple[str, int, bool]]] = {}
        for i, t in enumerate(types):
            if (t == TOKEN_CONTROL or t == TOKEN_USER_DEFINED) and self.tokens[i] and self._ids[self.tokens[i]] == i:
                text = self.tokens[i]
                self._verbatim.setdefault(text[0], []).append((text, i, t == TOKEN_CONTROL))
        for entries in self._verbatim.values():
            entries.sort(key=lambda e: len(e[0]), reverse=True)
        self._token_bytes = self._all_token_bytes()

    @classmethod
    def from_file(cls, path: str) -> "Tokenizer":
        with open(path, encoding="utf-8") as f:
            return cls(json.load(f))

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    def token_to_id(self, token: str) -> int | None:
        return self._ids.get(token)

    def encode(self, text: str, special: bool = True, add_special: bool = False) -> list[int]:
        """Token ids of `text`.

        With `special`, control-token strings in `text` become their ids (user-defined tokens always
        do, as in llama.cpp). With `add_special`, BOS/EOS are added as the model asks (`add_bos`,
        `add_eos`); BOS only when the text does not already begin with it (a chat template may write it).
        """
        ids = self._encode(text, special, self.add_space_prefix)
        if add_special:
            if self.add_bos and ids[:1] != [self.bos_token_id]:
                ids.insert(0, self.bos_token_id)
            if self.add_eos:
                ids.append(self.eos_token_id)
        return ids

    def encode_bytes(self, data: bytes) -> list[int]:
        """Token ids whose bytes concatenate to `data` (no control tokens, no space prefix); bytes
        that are not whole UTF-8 characters (a grammar may stop mid-character) get one byte token each."""
        try:
            return self._encode(data.decode("utf-8"), False, False)
        except UnicodeDecodeError as e:
            head, bad, rest = data[:e.start], data[e.start:e.end], data[e.end:]
        ids = self.encode_bytes(head) if head else []
        for b in bad:
            token = self._ids.get(BYTE_TO_CHAR[b] if self.model == "gpt2" else f"<0x{b:02X}>")
            if token is None:
                raise ModelError(f"the vocabulary has no token for byte 0x{b:02x}")
            ids.append(token)
        return ids + (self.encode_bytes(rest) if rest else [])

    def token_bytes(self, token_id: int) -> bytes:
        return self._token_bytes[token_id]

    def decode(self, ids, skip_special: bool = False) -> str:
        """Text of `ids`. A SentencePiece space prefix is kept (it is a real space in the stream)."""
        data = b"".join(
            self._token_bytes[i] for i in ids if not (skip_special and i in self.special_ids)
        )
        return data.decode("utf-8", errors="replace")

    def stream_decoder(self, skip_special: bool = False, keep=frozenset()) -> "StreamDecoder":
        """A decoder of ids as they come; `skip_special` drops control tokens but those in `keep`."""
        return StreamDecoder(self, skip_special, keep)

    def _encode(self, text: str, special: bool, space_prefix: bool) -> list[int]:
        ids: list[int] = []
        for chunk, token in self._split_verbatim(text, special):
            if token is not None:
                ids.append(token)
            elif self.model == "gpt2":
                for word in self._split(chunk):
                    ids.extend(self._bpe.encode(word))
            else:
                # llama.cpp prefixes every text fragment that follows a matched token (or starts the
                # text) with a space; Hugging Face's Prepend normalizer does the same per fragment.
                if space_prefix:
                    chunk = " " + chunk
                ids.extend(self._spm.encode(chunk.replace(" ", SPACE)))
        return ids

    def defuse(self, text: str) -> str:
        """`text` with every control-token string in it marked, so that encode() reads it as text:
        for what users write (message content), which must not forge a turn. Hugging Face's
        split_special_tokens, for the parts of a prompt that are not the chat template's."""
        if not self._verbatim or not text:
            return text
        return "".join(f"{_DEFUSED[0]}{piece}{_DEFUSED[1]}" if control else piece
                       for piece, control in self._pieces(text, True, marks=False))

    def _split_verbatim(self, text: str, control: bool):
        """(chunk, None) text pieces and (token text, id) matches; the longest token wins at each
        position, scanning left to right (Hugging Face's added-token rule; llama.cpp matches the
        longest token everywhere first, which differs only when two tokens overlap). A control
        token marked by defuse() is text."""
        out, run = [], []
        for piece, match in self._pieces(text, control, ids=True):
            if match is None:
                run.append(piece)
                continue
            if run:
                out.append(("".join(run), None))
                run = []
            out.append((piece, match))
        if run:
            out.append(("".join(run), None))
        return out

    def _pieces(self, text: str, control: bool, ids: bool = False, marks: bool = True):
        """(text, None) and verbatim tokens as (token text, id), or with ids=False (token text,
        is control); with `marks`, a control token marked by defuse() comes as text."""
        verbatim = self._verbatim
        if not verbatim or not text:
            if text:
                yield text, None if ids else False
            return
        start, i, n = 0, 0, len(text)
        while i < n:
            c, match = text[i], None
            if c == _DEFUSED[0] and control and marks and i + 1 < n:
                for tok, _, is_control in verbatim.get(text[i + 1], ()):
                    if is_control and text.startswith(tok + _DEFUSED[1], i + 1):
                        if start < i:
                            yield text[start:i], None if ids else False
                        yield tok, None if ids else False
                        i = start = i + len(tok) + 2
                        break
                else:
                    i += 1
                continue
            for tok, tid, is_control in verbatim.get(c, ()):
                if (control or not is_control) and text.startswith(tok, i):
                    match = (tok, tid if ids else is_control)
                    break
            if match:
                if start < i:
                    yield text[start:i], None if ids else False
                yield match
                i = start = i + len(match[0])
            else:
                i += 1
        if start < n:
            yield text[start:], None if ids else False

    def _all_token_bytes(self) -> list[bytes]:
        types = self.token_types
        if self.model == "gpt2":
            out = []
            for text in self.tokens:
                try:
                    out.append(bytes([CHAR_TO_BYTE[c] for c in text]))
                except KeyError:  # not byte-level encoded (an unusual entry): its UTF-8 text
                    out.append(text.encode("utf-8"))
        else:
            out = [text.replace(SPACE, " ").encode("utf-8") for text in self.tokens]
        for i in (i for i, t in enumerate(types) if t != TOKEN_NORMAL):
            if types[i] == TOKEN_BYTE and self.model == "llama":
                out[i] = sentencepiece_to_bytes(self.tokens[i])
            elif types[i] in _NOT_TEXT or types[i] == TOKEN_USER_DEFINED:  # literal text, as llama.cpp prints them
                out[i] = self.tokens[i].encode("utf-8")
        return out


class StreamDecoder:
    """Turns token ids into text as they arrive, holding back an incomplete UTF-8 sequence."""

    def __init__(self, tokenizer: Tokenizer, skip_special: bool = False, keep=frozenset()):
        self._tokenizer, self._keep = tokenizer, keep
        self._skip = tokenizer.special_ids if skip_special else frozenset()
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, token_id: int) -> str:
        if token_id in self._skip and token_id not in self._keep:
            return ""
        return self._utf8.decode(self._tokenizer.token_bytes(token_id))

    def flush(self) -> str:
        """Whatever is left; an incomplete sequence at the end becomes U+FFFD."""
        return self._utf8.decode(b"", final=True)
