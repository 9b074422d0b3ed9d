"""Pre-tokenizers of byte-level BPE models, written as scanners (no `regex` module in Pyodide).

`split_gpt2` reproduces the GPT-2 pattern
    's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+
and `split_smollm` first isolates every numeric character (llama.cpp's `smollm`, Hugging Face's
`Digits(individual_digits=True)`), then applies the GPT-2 pattern to the pieces in between.
"""

import unicodedata

# Unicode White_Space, which is what `\s` means in the regex engines of llama.cpp and `tokenizers`
# (str.isspace also accepts U+001C..U+001F, which they do not).
_WHITESPACE = frozenset(
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000"
)
_CONTRACTIONS = ("'s", "'t", "'re", "'ve", "'m", "'ll", "'d")


def _kind(ch: str) -> str:
    """'s' whitespace, 'L' letter, 'N' number, 'P' anything else."""
    if ch in _WHITESPACE:
        return "s"
    major = unicodedata.category(ch)[0]
    return major if major in "LN" else "P"


def split_gpt2(text: str) -> list[str]:
    kinds = [_kind(c) for c in text]
    pieces, i, n = [], 0, len(text)
    while i < n:
        if text[i] == "'":
            match = next((c for c in _CONTRACTIONS if text.startswith(c, i)), None)
            if match:
                pieces.append(match)
                i += len(match)
                continue
        # " ?X+" for X in letters, numbers, other: an optional single space, then a run of one kind.
        start = i + 1 if text[i] == " " and i + 1 < n and kinds[i + 1] != "s" else i
        kind = kinds[start]
        if kind != "s":
            end = start + 1
            while end < n and kinds[end] == kind:
                end += 1
            pieces.append(text[i:end])
            i = end
            continue
        # Whitespace run: "\s+(?!\S)" leaves the last space to prefix the next word; "\s+" otherwise.
        end = i + 1
        while end < n and kinds[end] == "s":
            end += 1
        if end < n and end - i > 1:
            end -= 1
        pieces.append(text[i:end])
        i = end
    return pieces


def split_smollm(text: str) -> list[str]:
    pieces, start = [], 0
    for i, ch in enumerate(text):
        if unicodedata.category(ch)[0] == "N":
            if start < i:
                pieces.extend(split_gpt2(text[start:i]))
            pieces.append(ch)
            start = i + 1
    if start < len(text):
        pieces.extend(split_gpt2(text[start:]))
    return pieces


PRETOKENIZERS = {"gpt2": split_gpt2, "smollm": split_smollm}
