"""SentencePiece-style segmentation by piece scores (GGUF `tokenizer.ggml.model = llama`).

The algorithm is llama.cpp's SPM tokenizer: start from the characters of a text fragment (spaces
already written as U+2581), repeatedly merge the adjacent pair whose concatenation is a piece with
the highest score (the leftmost pair on a tie), and write each remaining symbol that is no piece
as its UTF-8 bytes through the `<0xNN>` byte-fallback tokens.

Only normal pieces (GGUF token type 1) are merge targets, as in SentencePiece itself: llama.cpp
would also assemble a control token such as "<bos>" or a byte token such as "<0x41>" out of plain
text, giving ids whose bytes differ from the text. Pure Python with a heap: a fragment of n
characters costs O(n log n), independent of the vocabulary size.
"""

from heapq import heapify, heappop, heappush

from trellis.errors import ModelError

_NORMAL, _BYTE = 1, 6
SPACE = "\u2581"


class SentencePieceModel:
    def __init__(self, tokens: list[str], token_types: list[int], scores: list[float], unknown_id: int | None):
        if len(scores) != len(tokens):
            raise ModelError(f"tokenizer.ggml.scores has {len(scores)} entries for {len(tokens)} tokens")
        # piece -> (score, id); a duplicate piece keeps its first id, as llama.cpp's text_to_token
        # (built in reverse so that the lowest id is written last).
        n = len(tokens)
        self._pieces: dict[str, tuple[float, int]] = {
            tokens[i]: (scores[i], i) for i in range(n - 1, -1, -1) if token_types[i] == _NORMAL}
        self._byte_ids: list[int | None] = [None] * 256
        for i in (i for i in range(n) if token_types[i] == _BYTE):
            text = tokens[i]
            if len(text) == 6 and text.startswith("<0x") and text.endswith(">"):
                try:
                    b = int(text[3:5], 16)
                except ValueError:
                    continue
                if self._byte_ids[b] is None:
                    self._byte_ids[b] = i
        self._unknown_id = unknown_id

    def encode(self, text: str) -> list[int]:
        """Ids of one fragment whose spaces are already U+2581 (no special tokens inside)."""
        syms = list(text)
        n = len(syms)
        if n == 0:
            return []
        pieces = self._pieces
        nxt = list(range(1, n + 1))
        nxt[-1] = -1
        prev = list(range(-1, n - 1))
        # Heap entries: (-score, left, right, length of the merged text); an entry is stale when
        # either side was merged away or grew since it was pushed.
        heap = []
        for i in range(n - 1):
            hit = pieces.get(syms[i] + syms[i + 1])
            if hit is not None:
                heap.append((-hit[0], i, i + 1, len(syms[i]) + len(syms[i + 1])))
        heapify(heap)
        while heap:
            _, left, right, size = heappop(heap)
            a, b = syms[left], syms[right]
            if not a or not b or len(a) + len(b) != size:
                continue
            syms[left], syms[right] = a + b, ""
            after = nxt[right]
            nxt[left] = after
            if after >= 0:
                prev[after] = left
                hit = pieces.get(syms[left] + syms[after])
                if hit is not None:
                    heappush(heap, (-hit[0], left, after, size + len(syms[after])))
            before = prev[left]
            if before >= 0:
                hit = pieces.get(syms[before] + syms[left])
                if hit is not None:
                    heappush(heap, (-hit[0], before, left, len(syms[before]) + size))
        ids: list[int] = []
        i = 0
        while i >= 0:
            hit = pieces.get(syms[i])
            if hit is not None:
                ids.append(hit[1])
            else:  # only a single character can be no piece: merges always make pieces
                ids.extend(self._byte_token(b) for b in syms[i].encode("utf-8"))
            i = nxt[i]
        return ids

    def _byte_token(self, b: int) -> int:
        token = self._byte_ids[b]
        if token is None:
            token = self._unknown_id
            if token is None:
                raise ModelError(f"the vocabulary has no byte-fallback token <0x{b:02X}> and no unknown token")
        return token
