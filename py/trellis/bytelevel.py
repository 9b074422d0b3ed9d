"""Token text <-> bytes for the two tokenizer families the vocabularies use.

Byte-level BPE (GPT-2 family) stores each byte as a printable code point; SentencePiece
stores spaces as U+2581 and unencodable bytes as `<0xNN>` pieces.
"""

import re


def _gpt2_byte_to_char() -> dict[int, str]:
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


BYTE_TO_CHAR = _gpt2_byte_to_char()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def bytes_to_bytelevel(data: bytes) -> str:
    return "".join(BYTE_TO_CHAR[b] for b in data)


def bytelevel_to_bytes(text: str) -> bytes | None:
    """Bytes of a byte-level BPE token, or None when `text` is not byte-level encoded."""
    try:
        return bytes(CHAR_TO_BYTE[c] for c in text)
    except KeyError:
        return None


def sentencepiece_to_bytes(piece: str) -> bytes:
    """Bytes of a SentencePiece token: `<0xNN>` byte fallback, U+2581 as a space."""
    match = _BYTE_PIECE.fullmatch(piece)
    if match:
        return bytes([int(match.group(1), 16)])
    return piece.replace("\u2581", " ").encode("utf-8")
