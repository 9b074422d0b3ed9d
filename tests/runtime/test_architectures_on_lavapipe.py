"""Every architecture's tiny random model, built with the real model build (TVM kernels) and run on the
software adapter (wgpu-py + lavapipe), against the numpy reference: the logits of a prefill and of
each decode step, and the greedy tokens, for a few prompts."""

import pytest

from tests.model.reference import ReferenceModel
from tests.model.tiny_gguf import TINY, write_tiny
from tests.runtime.reference_check import assert_greedy_matches

PROMPTS = [
    [1, 40, 41, 200, 7, 268, 3, 99, 100, 5, 17, 2, 0, 64, 128, 255] * 3,  # 48 tokens: 1.5 prefill chunks
    [1, 72, 101, 108, 108, 111],
    [1, 259, 260, 261, 262, 263, 264, 265, 266, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21],
]
STEPS = 8
# Gemma 2 is also built with the adapter variants: on lavapipe it runs the subgroup forms (attention
# with a window and soft-capping across shuffled lanes); the others run the default kernels.
WITH_VARIANTS = {"gemma2"}


@pytest.fixture(scope="module", params=list(TINY))
def arch(request, tmp_path_factory, wgpu_backend):
    from trellis.kernels import build_model
    from trellis.runtime import Artifacts, Executor

    name = request.param
    root = tmp_path_factory.mktemp(f"arch-{name}")
    write_tiny(root / "tiny.gguf", name)
    build_model.build(str(root / "tiny.gguf"), root / "out", variants=name in WITH_VARIANTS)
    executor = Executor(Artifacts.from_dir(root / "out"), wgpu_backend, context=96)
    return name, executor, ReferenceModel(root / "tiny.gguf")


def test_greedy_tokens_and_logits_match_reference(arch):
    name, ex, ref = arch
    if name in WITH_VARIANTS:
        assert ex.variant is not None or "llvmpipe" not in ex.backend.adapter_info.get("device", "").lower()
    assert_greedy_matches(ex, ref, PROMPTS, STEPS, name)
