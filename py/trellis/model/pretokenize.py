"""Pre-tokenizers of byte-level BPE models, written as scanners (no `regex` module in Pyodide).

`split_gpt2` reproduces the GPT-2 pattern
    's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+
and `split_smollm` first isolates every numeric character (llama.cpp's `smollm`, Hugging Face's
`Digits(individual_digits=True)`), then applies the GPT-2 pattern to the pieces in between.
`split_llama3` (llama.cpp's `llama-bpe`) and `split_qwen2` reproduce
    (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*
    |\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+
where Qwen2 takes `\\p{N}` one at a time instead of up to three. We follow llama.cpp where the
model families' tokenizer.json files differ from it: contractions match ASCII letters of either case
only, and no NFC normalization runs first (Qwen2's tokenizer.json has one; a GGUF does not record it).
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


def _llama3_pattern(max_digits: int):
    def split(text: str) -> list[str]:
        kinds = [_kind(c) for c in text]
        pieces, i, n = [], 0, len(text)
        while i < n:
            ch, kind = text[i], kinds[i]
            if ch == "'" and i + 1 < n:
                # Case-insensitive contractions, ASCII letters only (as llama.cpp's scanner).
                two = text[i + 1:i + 3].lower()
                end = i + 2 if two[:1] in ("s", "t", "m", "d") else i + 3 if two in ("re", "ve", "ll") else 0
                if end:
                    pieces.append(text[i:end])
                    i = end
                    continue
            # [^\r\n\p{L}\p{N}]?\p{L}+ : a letter run, optionally led by one char that is no newline,
            # letter or number (a space, punctuation, a tab).
            start = i + 1 if kind in "sP" and ch not in "\r\n" and i + 1 < n and kinds[i + 1] == "L" else i
            if kinds[start] == "L":
                end = start + 1
                while end < n and kinds[end] == "L":
                    end += 1
                pieces.append(text[i:end])
                i = end
                continue
            if kind == "N":
                end = i + 1
                while end < n and end - i < max_digits and kinds[end] == "N":
                    end += 1
                pieces.append(text[i:end])
                i = end
                continue
            # " ?[^\s\p{L}\p{N}]+[\r\n]*"
            start = i + 1 if ch == " " and i + 1 < n and kinds[i + 1] == "P" else i
            if kinds[start] == "P":
                end = start + 1
                while end < n and kinds[end] == "P":
                    end += 1
                while end < n and text[end] in "\r\n":
                    end += 1
                pieces.append(text[i:end])
                i = end
                continue
            # Whitespace run from i: "\s*[\r\n]+" ends it after its last newline; else as GPT-2.
            end = i + 1
            while end < n and kinds[end] == "s":
                end += 1
            last_newline = max(text.rfind("\r", i, end), text.rfind("\n", i, end))
            if last_newline >= 0:
                end = last_newline + 1
            elif end < n and end - i > 1:
                end -= 1
            pieces.append(text[i:end])
            i = end
        return pieces

    return split


split_llama3 = _llama3_pattern(3)
split_qwen2 = _llama3_pattern(1)

# llama.cpp's `tokenizer.ggml.pre` names -> splitter. Every name listed is one llama.cpp gives the
# same pattern; other names are refused rather than approximated.
LLAMA3_NAMES = frozenset({"llama-bpe", "llama3", "llama-v3"})
PRETOKENIZERS = {
    "gpt2": split_gpt2, "smollm": split_smollm,
    **dict.fromkeys(LLAMA3_NAMES, split_llama3),
    "qwen2": split_qwen2, "deepseek-r1-qwen": split_qwen2,
}
# Pre-tokenizers whose models take a word that is itself a token whole, before any merge
# (llama.cpp's `ignore_merges`, Hugging Face BPE's `ignore_merges: true` in Llama 3's tokenizer.json).
IGNORE_MERGES = LLAMA3_NAMES
