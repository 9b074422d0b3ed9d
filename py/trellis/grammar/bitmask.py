"""Applying a token bitmask to logits on the CPU, as xgrammar's apply_token_bitmask_inplace does:
numpy arrays, or any CPU array that speaks DLPack (a torch tensor, a JAX array) through numpy,
without importing its library. (The engine masks on the GPU, in its kernels.)

    mask = matcher.new_bitmask(); matcher.fill_next_token_bitmask(mask)
    apply_token_bitmask_inplace(logits, mask)      # disallowed tokens' logits become -inf

numpy is imported when called (it is not a dependency of the grammar API, nor in the browser).
"""

from __future__ import annotations


def apply_token_bitmask_inplace(logits, bitmask, *, vocab_size: int | None = None, indices=None) -> None:
    """Sets logits[..., i] to -inf where bit i % 32 of word i // 32 of `bitmask` is clear.

    `logits`: (vocab,) or (batch, vocab) floats, written in place; `bitmask`: int32 words, (words,)
    or (batch, words) (one mask for every row, or one per row; any buffer of 4-byte items).
    `vocab_size`: the tokens masked (default: all the bitmask and the logits both cover; logits
    past it are left alone). `indices`: the batch rows to mask (default: all)."""
    import numpy as np

    arr = logits if isinstance(logits, np.ndarray) else _from_dlpack(np, logits)
    if not arr.flags.writeable:
        raise ValueError("logits must be writable (they are masked in place)")
    if arr.dtype.kind != "f":
        raise TypeError(f"logits must be floating point, got {arr.dtype}")
    if arr.ndim not in (1, 2):
        raise ValueError(f"logits must be (vocab,) or (batch, vocab), got shape {arr.shape}")
    words = np.asarray(bitmask)
    if words.dtype.itemsize != 4 or words.dtype.kind not in "iu":
        words = np.frombuffer(memoryview(bitmask).cast("B"), dtype=np.int32).reshape(words.shape[:-1] + (-1,))
    words = words.view(np.uint32)
    if words.ndim not in (1, 2) or (words.ndim == 2 and arr.ndim == 1):
        raise ValueError(f"bitmask must be (words,) or (batch, words) beside logits {arr.shape}, got {words.shape}")
    size = min(arr.shape[-1], 32 * words.shape[-1]) if vocab_size is None else vocab_size
    if not 0 <= size <= min(arr.shape[-1], 32 * words.shape[-1]):
        raise ValueError(f"vocab_size {size} is past the logits ({arr.shape[-1]}) or the bitmask "
                         f"({32 * words.shape[-1]} bits)")
    bits = np.unpackbits(words.astype("<u4").view(np.uint8), axis=-1, bitorder="little")[..., :size].astype(bool)
    if arr.ndim == 1:
        arr[:size][~bits] = -np.inf
        return
    rows = slice(None) if indices is None else np.asarray(indices)
    allowed = bits if bits.ndim == 1 else bits[rows]
    arr[rows, :size] = np.where(allowed, arr[rows, :size], -np.inf)


def _from_dlpack(np, array):
    if not hasattr(array, "__dlpack__"):
        raise TypeError(f"logits must be a numpy array or support DLPack, got {type(array).__name__}")
    try:
        return np.from_dlpack(array)
    except (BufferError, RuntimeError, TypeError) as e:
        raise TypeError(f"logits must be a CPU array numpy can share through DLPack ({e})") from e
