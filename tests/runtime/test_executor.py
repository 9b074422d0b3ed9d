"""The WebGPU executor (wgpu-py on lavapipe) against the numpy reference forward pass."""

import json
import random
import struct

import numpy as np
import pytest

from tests.model.reference import ReferenceLlama
from trellis.runtime.abi import MASKED_LOGIT
from trellis.errors import ModelError, SequenceLengthError

PROMPT = [1, 40, 41, 200, 7, 268, 3, 99, 100, 5, 17, 2, 0, 64, 128, 255] * 3  # 48 tokens: 1.5 chunks


def rel_err(got, want) -> float:
    return float(np.max(np.abs(np.asarray(got) - want)) / np.max(np.abs(want)))


@pytest.fixture(scope="module")
def reference(tiny_model):
    return ReferenceLlama(tiny_model[0])


def test_prefill_and_16_decode_steps_match_reference(tiny_executor, reference):
    tiny_executor.reset()
    assert len(_check_against_reference(tiny_executor, reference, 16)) == 269
    assert tiny_executor.position == len(PROMPT) + 16


def test_adapter_variant_is_chosen_by_adapter_name(tiny_model, tiny_executor, reference, wgpu_backend):
    """On lavapipe the executor runs the model's llvmpipe kernel variants (with subgroups, those
    that share x loads across 8 lanes; test_prefill_and_16_decode_steps_match_reference checks
    them); the default kernels (what other adapters run) give the same logits there."""
    from trellis.runtime import Artifacts, Executor

    artifacts = Artifacts.from_dir(tiny_model[1])
    assert artifacts.variant_for({"vendor": "Google", "device": "SwiftShader Device (Subzero)"}) == (None, {})
    assert artifacts.variant_for({"device": "LLVMPIPE (LLVM 15)"})[0] == "llvmpipe"
    assert artifacts.variant_for({"device": "LLVMPIPE (LLVM 15)", "subgroup_size": 8})[0] == "llvmpipe-subgroups-8"
    name, swaps = artifacts.variant_for(wgpu_backend.adapter_info)
    assert tiny_executor.variant == name
    decode = artifacts.manifest["plans"]["decode"]["dispatches"]
    assert all(tiny_executor.kernel_of(d) == swaps.get(d["kernel"], d["kernel"]) for d in decode)
    if "llvmpipe" in wgpu_backend.adapter_info.get("device", ""):  # the test machines' adapter
        assert wgpu_backend.adapter_info.get("subgroup_size") == 8 and name == "llvmpipe-subgroups-8"
        assert any(tiny_executor.kernel_of(d) != d["kernel"] for d in decode)

    plain = Executor(artifacts, wgpu_backend, context=64, variants=False)
    assert plain.variant is None and all(plain.kernel_of(d) == d["kernel"] for d in decode)
    _check_against_reference(plain, reference, 4)


class _JsBytes(bytes):
    """A fetched file as web/worker.py sees it (a Uint8Array's to_bytes)."""

    def to_bytes(self) -> bytes:
        return bytes(self)


SWIFTSHADER = {"vendor": "google", "architecture": "swiftshader", "device": "", "description": ""}


def _probe(size: int, lanes=None) -> list[int]:
    """The subgroup probe's output when every subgroup has `size` lanes (`lanes`: another lane order)."""
    return [size] * 64 + list(lanes if lanes is not None else (i % size for i in range(64)))


def test_probe_output_means_one_subgroup_size_or_none():
    from trellis.runtime.backend import subgroup_size_of

    assert subgroup_size_of(_probe(4)) == 4 and subgroup_size_of(_probe(32)) == 32
    assert subgroup_size_of([8] * 32 + [16] * 32 + [i % 8 for i in range(64)]) is None  # two sizes
    assert subgroup_size_of(_probe(8, [(i + 1) % 8 for i in range(64)])) is None  # lanes not in local order
    assert subgroup_size_of([0] * 128) is None and subgroup_size_of(None) is None and subgroup_size_of([4] * 64) is None


def test_the_workers_kernel_choice_is_what_the_executor_runs(tiny_model, reference, wgpu_backend):
    """The browser's worker compiles the kernels web/worker.py's kernel_variant chooses (from the
    adapter's facts and the raw probe output), and the executor runs that choice rather than its own:
    here on lavapipe, whose own choice is the llvmpipe variant, with SwiftShader's facts."""
    from trellis.runtime import Artifacts, Executor
    from web import worker

    files = {"manifest.json": _JsBytes((tiny_model[1] / "manifest.json").read_bytes())}
    artifacts = Artifacts.from_dir(tiny_model[1])
    decode = artifacts.manifest["plans"]["decode"]["dispatches"]
    own = artifacts.variant_for(wgpu_backend.adapter_info)[0]
    for probe, want in ((_probe(4), "swiftshader-subgroups-4"), (_probe(4, [0] * 64), None)):
        choice = json.loads(worker.kernel_variant(files, json.dumps({"adapter": SWIFTSHADER, "probe": probe})))
        choice = choice["value"]
        assert choice["variant"] == want and choice["adapter"].get("subgroup_size") == (want and 4)
        assert choice["kernels"] == (artifacts.manifest["variants"][want]["kernels"] if want else {})
        wgpu_backend.kernel_variant = choice["variant"]
        try:
            ex = Executor(artifacts, wgpu_backend, context=64)
        finally:
            del wgpu_backend.kernel_variant
        assert ex.variant == want != own
        assert all(ex.kernel_of(d) == choice["kernels"].get(d["kernel"], d["kernel"]) for d in decode)
    _check_against_reference(ex, reference, 2)
    answer = json.loads(worker.kernel_variant({}, json.dumps({"adapter": SWIFTSHADER, "probe": None})))
    assert answer["error"]["name"] == "ModelError" and "manifest" in answer["error"]["message"]


def test_a_model_built_with_another_masked_logit_is_refused(tiny_model):
    from trellis.runtime import Artifacts, Executor

    manifest = json.loads((tiny_model[1] / "manifest.json").read_text())
    assert manifest["masked_logit"] == MASKED_LOGIT
    for value in (-1.0e30, None):
        manifest["masked_logit"] = value
        artifacts = Artifacts(lambda name: json.dumps(manifest).encode())
        with pytest.raises(ModelError, match=r"masked_logit .* is (-1e\+30|None), not this runtime's -3e\+38"):
            Executor(artifacts, backend=None)


def test_four_lane_variant_matches_reference(tiny_model, reference, wgpu_backend):
    """SwiftShader's variant (x loads shared across groups of 4 lanes) is right wherever its lane
    groups tile the subgroups: here lavapipe's 8 lanes (the browser tests run it on SwiftShader)."""
    from trellis.runtime import Artifacts, Executor

    artifacts = Artifacts.from_dir(tiny_model[1])
    if wgpu_backend.adapter_info.get("subgroup_size", 1) % 4:
        pytest.fail(f"this adapter has no subgroups of a multiple of 4 lanes: {wgpu_backend.adapter_info}")
    ex = Executor(artifacts, wgpu_backend, context=64, variants="swiftshader-subgroups-4")
    decode = artifacts.manifest["plans"]["decode"]["dispatches"]
    assert sum(ex.kernel_of(d).endswith("_l4") for d in decode) >= 5
    _check_against_reference(ex, reference, 16)


def _check_against_reference(ex, reference, steps):
    """Prefill PROMPT and decode `steps` greedy tokens, each step's logits within 1e-3 of the
    reference's; returns the prefill's logits."""
    reference.reset()
    first, want = ex.prefill(PROMPT), reference.forward(PROMPT)[-1]
    assert rel_err(first, want) <= 1e-3
    for _ in range(steps):
        token = int(np.argmax(want))
        got, want = ex.decode(token), reference.forward([token])[-1]
        assert rel_err(got, want) <= 1e-3
    return first


def test_prefill_in_pieces_matches_one_piece(tiny_executor, reference):
    """A full chunk, a one-token prefill and a decode continue the same sequence."""
    tiny_executor.reset()
    reference.reset()
    tiny_executor.prefill(PROMPT[:32])
    got = tiny_executor.prefill(PROMPT[32:33])
    assert rel_err(got, reference.forward(PROMPT[:33])[-1]) <= 1e-3
    assert rel_err(tiny_executor.decode(PROMPT[33]), reference.forward([PROMPT[33]])[-1]) <= 1e-3


def test_reset_starts_over(tiny_executor):
    tiny_executor.reset()
    first = list(tiny_executor.prefill(PROMPT[:10]))
    tiny_executor.decode(3)
    tiny_executor.reset()
    assert list(tiny_executor.prefill(PROMPT[:10])) == first


def test_sequence_limit_is_enforced(tiny_executor):
    tiny_executor.reset()
    tiny_executor.prefill(PROMPT[:40])
    with pytest.raises(SequenceLengthError, match="context window of 96"):
        tiny_executor.prefill(PROMPT * 2)
    assert tiny_executor.position == 40
    tiny_executor.prefill(PROMPT[:48])
    tiny_executor.decode(5)
    tiny_executor.decode(6)
    assert tiny_executor.position == 90
    tiny_executor.prefill(PROMPT[:6])  # exactly fills the window
    with pytest.raises(SequenceLengthError):
        tiny_executor.decode(7)


def test_bad_inputs_are_refused(tiny_model, tiny_executor, wgpu_backend):
    from trellis.runtime import Artifacts, Executor

    tiny_executor.reset()
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tiny_executor.prefill([1, 269])
    with pytest.raises(ValueError):
        tiny_executor.prefill([])
    with pytest.raises(ModelError, match="context 99999"):
        Executor(Artifacts.from_dir(tiny_model[1]), wgpu_backend, context=99999)


def test_corrupt_shard_is_detected(tiny_model, tmp_path):
    import shutil

    from trellis.runtime import Artifacts

    copy = tmp_path / "model"
    shutil.copytree(tiny_model[1], copy)
    shard = next(copy.glob("weights-*.bin"))
    data = bytearray(shard.read_bytes())
    data[100] ^= 1
    shard.write_bytes(bytes(data))
    with pytest.raises(ModelError, match="corrupt"):
        list(Artifacts.from_dir(copy).weight_arrays())
    with pytest.raises(ModelError, match="no built model"):
        Artifacts.from_dir(tmp_path / "missing")


def test_bitmask_is_applied_on_the_gpu(tiny_executor, reference):
    tiny_executor.reset()
    reference.reset()
    allowed = {3, 40, 64, 200, 268}
    words = [0] * 9  # 269 tokens
    for t in allowed:
        words[t // 32] |= 1 << (t % 32)
    words = [w - (1 << 32) if w >= 1 << 31 else w for w in words]  # int32 words, as the grammar writes them
    got = np.asarray(tiny_executor.prefill(PROMPT[:20], bitmask=words))
    want = reference.forward(PROMPT[:20])[-1]

    lowest = np.float32(MASKED_LOGIT)
    assert all(got[t] == lowest for t in range(269) if t not in allowed)
    kept = sorted(allowed)
    assert rel_err(got[kept], want[kept]) <= 1e-3
    unmasked = tiny_executor.decode(5)  # no mask: every logit is back
    assert min(unmasked) > lowest
    with pytest.raises(ValueError, match="needs 9"):
        tiny_executor.decode(5, bitmask=[0] * 8)
    assert tiny_executor.position == 21


def test_unquantized_weights_match_reference(tmp_path, wgpu_backend):
    """F16 and F32 linear weights (and an F32 embedding) take the unquantized kernel path."""
    import gguf

    from trellis.kernels import build_model
    from tests.model.tiny_gguf import write_tiny_llama
    from trellis.runtime import Artifacts, Executor

    floats = {"token_embd.weight": "F32", "blk.0.attn_q.weight": "F16", "blk.0.attn_k.weight": "F16",
              "blk.0.attn_v.weight": "F16", "blk.1.ffn_gate.weight": "F32", "blk.1.ffn_up.weight": "F32",
              "blk.0.attn_output.weight": "F32"}
    write_tiny_llama(tmp_path / "float.gguf", seed=1, float_tensors=floats)
    types = {t.name: t.tensor_type.name for t in gguf.GGUFReader(str(tmp_path / "float.gguf")).tensors}
    assert types["blk.0.attn_q.weight"] == "F16" and types["token_embd.weight"] == "F32"
    build_model.main(["--gguf", str(tmp_path / "float.gguf"), "--out", str(tmp_path / "out")])
    executor = Executor(Artifacts.from_dir(tmp_path / "out"), wgpu_backend, context=64)
    reference = ReferenceLlama(tmp_path / "float.gguf")
    assert rel_err(executor.prefill(PROMPT[:12]), reference.forward(PROMPT[:12])[-1]) <= 1e-3
    assert rel_err(executor.decode(7), reference.forward([7])[-1]) <= 1e-3


class LateKernels:
    """The desktop backend, with the prefill plan's kernels 'still compiling' for the first `checks`
    times the executor asks (as in the browser, where the engine is ready before they are)."""

    def __init__(self, backend, late, checks):
        self._backend, self._late, self.checks = backend, set(late), checks

    def kernel_ready(self, name):
        if name in self._late and self.checks > 0:
            self.checks -= 1
            return False
        return True

    def __getattr__(self, name):
        return getattr(self._backend, name)


@pytest.mark.parametrize("checks", [3, 100])
def test_prefill_runs_token_by_token_until_the_prefill_kernels_are_compiled(tiny_model, wgpu_backend, reference,
                                                                             checks):
    """Late kernels: the first (checks - 1) * 4 tokens go token by token (one check is at start-up),
    then the rest in chunks; or the whole prompt token by token when they never come."""
    from trellis.runtime import Artifacts, Executor

    artifacts = Artifacts.from_dir(tiny_model[1])
    plans = artifacts.manifest["plans"]
    decode_kernels = {d["kernel"] for name in ("decode", "mask") for d in plans[name]["dispatches"]}
    late = {d["kernel"] for d in plans["prefill"]["dispatches"]} - decode_kernels
    backend = LateKernels(wgpu_backend, late, checks)
    executor = Executor(artifacts, backend, context=96)
    reference.reset()
    got = executor.prefill(PROMPT[:20])
    assert ("prefill" in executor._plans) == (checks < 5)
    assert rel_err(got, reference.forward(PROMPT[:20])[-1]) <= 1e-3
    got = executor.prefill(PROMPT[20:48])  # the same sequence, continued
    assert rel_err(got, reference.forward(PROMPT[20:48])[-1]) <= 1e-3
    assert executor.position == 48


def test_plans_built_later_with_prepare(tiny_model, wgpu_backend, reference):
    from trellis.runtime import Artifacts, Executor

    executor = Executor(Artifacts.from_dir(tiny_model[1]), wgpu_backend, context=64, prepare=False)
    assert executor.weight_bytes > 0  # the weights are up; the plans are not
    with pytest.raises(ModelError, match="call prepare"):
        executor.prefill(PROMPT[:4])
    executor.prepare()
    executor.prepare()  # a second call changes nothing
    reference.reset()
    assert rel_err(executor.prefill(PROMPT[:20]), reference.forward(PROMPT[:20])[-1]) <= 1e-3
    assert executor.dispatches_per_token > 0


def test_argmax_plan_takes_the_first_of_equal_maxima(tiny_executor):
    """The two argmax kernels against list.index(max(...)), with ties within and across slices."""
    ex, backend = tiny_executor, tiny_executor.backend
    vocab = ex.vocab_size
    tie = [0.0] * vocab
    tie[vocab - 1] = tie[200] = tie[3] = 5.0
    rng = random.Random(0)
    cases = [[0.0] * vocab, [float(i % 7) for i in range(vocab)], [MASKED_LOGIT] * (vocab - 1) + [-1.0], tie,
             *([rng.choice((1.0, 2.0, 2.0000002)) for _ in range(vocab)] for _ in range(5))]
    for logits in cases:
        data = struct.pack(f"<{vocab}f", *logits)
        backend.write_buffer(ex.buffers["logits"], 0, data)
        got = backend.read_back(backend.submit(ex._plans["argmax"], read=(ex.buffers["ids"], 4)))
        as_f32 = list(struct.unpack(f"<{vocab}f", data))
        assert struct.unpack("<i", bytes(got))[0] == as_f32.index(max(as_f32))


def test_chained_greedy_steps_match_host_greedy(tiny_executor):
    """Eight greedy steps queued at once, each fed by the previous one's argmax on the GPU, give the
    tokens that host-side argmax over the read-back logits gives, step by step."""
    ex = tiny_executor
    ex.reset()
    logits = ex.prefill(PROMPT[:20])
    first = logits.index(max(logits))
    pending = [ex.submit_greedy(first)] + [ex.submit_greedy(None) for _ in range(7)]
    assert ex.position == 28
    chained = [struct.unpack("<i", bytes(ex.backend.read_back(p)))[0] for p in pending]
    ex.reset()
    ex.prefill(PROMPT[:20])
    token, host = first, []
    for _ in range(8):
        logits = ex.decode(token)
        token = logits.index(max(logits))
        host.append(token)
    assert chained == host

