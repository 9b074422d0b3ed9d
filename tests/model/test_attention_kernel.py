"""The fused attention kernel in each of its forms against numpy: every split of the query heads over
workgroups, with and without subgroup lanes, for a chunk of tokens whose keys end mid-tile."""

import struct

import numpy as np
import pytest

from trellis.kernels import kernels as K
from trellis.kernels import wgsl
from tests.model.reference import causal_attention
from trellis.runtime.executor import Executor

HEADS, KV_HEADS, HEAD_DIM, CONTEXT, TOKENS = 4, 2, 16, 40, 3


@pytest.mark.parametrize("lanes,heads", [(1, 1), (1, 2), (4, 1), (4, 2)])
def test_attention_matches_numpy(wgpu_backend, lanes, heads):
    if lanes > 1 and (wgpu_backend.adapter_info.get("subgroup_size") or 0) % lanes:
        pytest.fail(f"this adapter's subgroups do not hold a multiple of {lanes} lanes")
    kernel = K.attention(HEADS, KV_HEADS, HEAD_DIM, CONTEXT, TOKENS, lanes, heads)
    source, info = wgsl.lower(kernel)
    rng = np.random.default_rng(5 + lanes + heads)
    q = rng.standard_normal((TOKENS, HEADS, HEAD_DIM)).astype(np.float32)
    k = rng.standard_normal((CONTEXT, KV_HEADS, HEAD_DIM)).astype(np.float32)
    v = rng.standard_normal((CONTEXT, KV_HEADS, HEAD_DIM)).astype(np.float32)
    k[30:], v[30:] = np.nan, np.nan  # past the last token's position: must never be read into the sums
    start, count = 26, 2  # tokens at positions 26 and 27; the chunk's third slot is unused
    data = {"q": q.tobytes(), "k_cache": k.tobytes(), "v_cache": v.tobytes(),
            "out": bytes(4 * TOKENS * HEADS * HEAD_DIM), "step": struct.pack("<4i", count, start, 0, 0)}
    backend = wgpu_backend
    buffers = {name: backend.create_buffer(name, len(data[name]), data[name]) for name in data}
    pipeline = backend.create_kernel(kernel.name, source, info["entry_point"])
    dispatch = backend.create_dispatch(pipeline, [buffers[b["name"]] for b in info["bindings"]],
                                       Executor._uniform(info), info["uniform"]["binding"], info["grid"])
    got = np.frombuffer(backend.run([dispatch], read=(buffers["out"], len(data["out"]))), np.float32)
    got = got.reshape(TOKENS, HEADS, HEAD_DIM)
    want = causal_attention(q[:count].astype(np.float64), k[:start + count], v[:start + count], start)
    assert np.abs(got[:count] - want).max() <= 1e-5 * np.abs(want).max()
    assert not got[count:].any()  # the unused slot is left as it was
