"""Byte-level BPE merges by rank (GGUF `tokenizer.ggml.model = gpt2`), one pre-tokenized word at a time."""

from trellis.bytelevel import BYTE_TO_CHAR
from trellis.errors import ModelError


class BytePairModel:
    def __init__(self, ids: dict[str, int], merges: list[str], ignore_merges: bool = False):
        self._ids = ids
        self._ignore_merges = ignore_merges
        self._ranks = {}
        for rank, merge in enumerate(merges):
            left, sep, right = merge.partition(" ")
            if not sep:
                raise ModelError(f"tokenizer merge {rank} {merge!r} is not two space-separated symbols")
            self._ranks[(left, right)] = rank
        self._cache: dict[str, list[int]] = {}

    def encode(self, word: str) -> list[int]:
        cached = self._cache.get(word)
        if cached is not None:
            return cached
        symbols = [BYTE_TO_CHAR[b] for b in word.encode("utf-8")]
        whole = "".join(symbols)
        if self._ignore_merges and whole in self._ids:
            symbols = [whole]
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
