"""A vocabulary-sized weight split into row parts (graph.vocab_parts), as Gemma 3's 180 MiB embedding is
at the 128 MiB binding limit: the tiny Gemma 3 built with the limit lowered so that its tied embedding
and head fall into 3 buffers (the last part's rows not filling its last tile), run on lavapipe against
the numpy reference; and an adapter whose limit a part still exceeds is refused before any upload."""

import numpy as np
import pytest

from tests.model.reference import ReferenceModel
from tests.model.tiny_gguf import write_tiny
from tests.runtime.reference_check import assert_greedy_matches

# The tiny Gemma 3's embedding as packed: q8_0, 269 rows of 320 (368 bytes a row), tiles of 32 rows,
# 9 tiles of 11,776 bytes. At most 4 tiles a part makes 3 parts of 3 tiles: rows 0-95, 96-191, 192-268.
TILE_BYTES = 368 * 32
LIMIT = 4 * TILE_BYTES
PARTS = ["token_embd.weight[0:96]", "token_embd.weight[96:192]", "token_embd.weight[192:269]"]
# Token ids from every part, the last part's last row (268) included.
PROMPTS = [[2, 40, 95, 96, 150, 191, 192, 230, 268, 7, 100, 200, 64, 128, 255, 3] * 2 + [5, 17], [2, 268, 96]]
STEPS = 6


@pytest.fixture(scope="module")
def split_model(tmp_path_factory):
    from trellis.kernels import build_model

    root = tmp_path_factory.mktemp("split-gemma3")
    write_tiny(root / "tiny.gguf", "gemma3")
    # With the adapter variants: on lavapipe the head runs llvmpipe's form, as the real model's does.
    manifest = build_model.build(str(root / "tiny.gguf"), root / "out", max_binding_bytes=LIMIT)
    return root, manifest


def test_the_embedding_is_split_into_row_parts(split_model):
    _, m = split_model
    arrays = m["weights"]["arrays"]
    assert m["max_binding_bytes"] == LIMIT
    assert "token_embd.weight" not in arrays
    assert [arrays[p]["bytes"] for p in PARTS] == [3 * TILE_BYTES] * 3
    for plan in ("prefill", "decode"):
        dispatches = m["plans"][plan]["dispatches"]
        assert [d["args"]["w"] for d in dispatches[:3]] == PARTS  # one embedding lookup per part
        assert [d["args"]["w"] for d in dispatches[-3:]] == PARTS  # one head matmul per part
        assert all(d["args"]["y"] == "logits" for d in dispatches[-3:])


def test_split_model_matches_reference(split_model, wgpu_backend):
    from trellis.runtime import Artifacts, Executor

    root, _ = split_model
    ex = Executor(Artifacts.from_dir(root / "out"), wgpu_backend, context=64)
    assert ex.variant is not None or "llvmpipe" not in wgpu_backend.adapter_info.get("device", "").lower()
    ref = ReferenceModel(root / "tiny.gguf")
    assert_greedy_matches(ex, ref, PROMPTS, STEPS, "split")


class _Adapter:
    """The lavapipe backend as another adapter: one whose prefill kernels are still compiling (the
    browser's start-up: prefill goes token by token through the decode plan), or whose storage
    binding limit is lower."""

    def __init__(self, backend, limit=None):
        self._backend = backend
        self.limits = {**backend.limits, "max-storage-buffer-binding-size": limit or backend.limits[
            "max-storage-buffer-binding-size"]}

    def kernel_ready(self, name):
        return False

    def __getattr__(self, name):
        return getattr(self._backend, name)


def test_token_by_token_prefill_leaves_out_every_head_part(split_model, wgpu_backend):
    """The decode plan without its head (the final norm and the 3 head parts) runs all but the last token."""
    from trellis.runtime import Artifacts, Executor

    root, _ = split_model
    ex = Executor(Artifacts.from_dir(root / "out"), _Adapter(wgpu_backend), context=64)
    assert len(ex._plans["decode"]) - len(ex._plans["decode_hidden"]) == 1 + len(PARTS)
    ref = ReferenceModel(root / "tiny.gguf")
    got, want = np.asarray(ex.prefill(PROMPTS[0][:9])), ref.forward(PROMPTS[0][:9])[-1]
    assert "prefill" not in ex._plans and np.abs(got - want).max() <= 1e-3 * np.abs(want).max()


def test_a_part_above_the_adapters_limit_is_refused(split_model, wgpu_backend):
    from trellis.errors import RuntimeBackendError
    from trellis.runtime import Artifacts, Executor

    root, _ = split_model
    backend = _Adapter(wgpu_backend, 3 * TILE_BYTES - 4)
    before = wgpu_backend.allocated_bytes
    with pytest.raises(RuntimeBackendError, match=r"'token_embd\.weight\[0:96\]' needs 35328 bytes.*"
                                                  r"--max-binding-bytes 35324"):
        Executor(Artifacts.from_dir(root / "out"), backend, context=64)
    assert wgpu_backend.allocated_bytes == before  # refused before anything was allocated
