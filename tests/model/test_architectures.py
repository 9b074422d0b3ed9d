"""Architectures beyond Llama, on the CPU: the config each GGUF's metadata gives, the errors for models
the build cannot place, the numpy reference's per-architecture semantics, and the GPU plan's options."""

import gguf
import numpy as np
import pytest

from trellis.kernels import graph
from trellis.kernels.gguf_model import read_config, tensors_by_name
from tests.model.reference import ReferenceModel, causal_attention
from tests.model.tiny_gguf import TINY, write_tiny
from trellis.errors import ModelError

TOKENS = [1, 40, 41, 200, 7, 268, 3, 99, 100, 5, 17, 2, 0, 64]


@pytest.fixture(scope="module")
def tiny_paths(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-archs")
    paths = {}
    for name in TINY:
        paths[name] = root / f"{name}.gguf"
        write_tiny(paths[name], name)
    return paths


def _config(path):
    return read_config(gguf.GGUFReader(str(path)))


def test_features_follow_the_architecture(tiny_paths):
    c = {name: _config(path) for name, path in tiny_paths.items()}
    assert c["llama3"].architecture == "llama" and c["llama3"].rope_freq_factors
    assert c["llama3"].rope_style == "interleaved" and c["mistral"].rope_style == "interleaved"
    assert [c["mistral"].sliding(i) for i in range(2)] == [True, True] and c["mistral"].sliding_window == 7
    assert c["qwen2"].qkv_bias and not c["qwen2"].qk_norm and c["qwen2"].rope_style == "neox"
    assert c["qwen3"].qk_norm and c["qwen3"].head_dim == 32 != c["qwen3"].hidden // c["qwen3"].n_heads
    g2 = c["gemma2"]
    assert (g2.attn_softcap, g2.final_softcap, g2.activation, g2.embed_scale) == (2.0, 3.0, "gelu_tanh", 8.0)
    assert [g2.sliding(i) for i in range(2)] == [True, False] and g2.post_norms
    g3 = c["gemma3"]
    assert [g3.sliding(i) for i in range(6)] == [True] * 5 + [False]
    assert (g3.rope_theta, g3.rope_theta_local, g3.attn_softcap, g3.scale) == (1e6, 1e4, 0.0, 1 / 16)
    assert graph.rope_tables(g3) == {"rope": (1e6, 1.0), "rope_local": (1e4, 1.0)}
    assert [graph.rope_of(g3, i) for i in (0, 4, 5)] == ["rope_local", "rope_local", "rope"]
    assert c["phi3"].fused_qkv and c["phi3"].fused_gate_up
    # A Llama's manifest description has only the Llama fields (SmolLM2's manifest is unchanged).
    assert set(c["llama3"].to_dict()) == {"n_layers", "hidden", "n_heads", "n_kv_heads", "head_dim", "ffn", "vocab",
                                          "context", "rope_theta", "rms_eps", "rope_freq_factors"}


def test_plans_take_each_feature_as_an_option(tiny_paths):
    def kernels_of(name):
        c = _config(tiny_paths[name])
        groups = graph.linear_groups(c, tensors_by_name(gguf.GGUFReader(str(tiny_paths[name]))))
        steps = graph.plan(c, {g: "q8_0" for g in groups}, 1, 1, {})
        return [d["kernel"] for d in steps], steps

    llama, _ = kernels_of("llama3")
    assert not any(k.startswith(("qk_finish", "post_norm_add")) for k in llama)
    g3, steps = kernels_of("gemma3")
    assert sum(k.startswith("qk_finish_norm") for k in g3) == 6 and sum(k.startswith("post_norm_add") for k in g3) == 12
    assert sum("_win6" in k for k in g3 if k.startswith("attention")) == 5  # the sixth layer is global
    assert [d["args"]["rope"] for d in steps if d["kernel"].startswith("qk_finish")] == ["rope_local"] * 5 + ["rope"]
    assert any(k.startswith("gate_up_gelu") for k in g3) and any(k.startswith("embed_") and "_x" in k for k in g3)
    g2, _ = kernels_of("gemma2")
    assert g2[-1].endswith("_c3") and any(k.startswith("attention") and "_c2" in k for k in g2)
    q2, steps = kernels_of("qwen2")
    assert [set(d["args"]) for d in steps if d["kernel"].startswith("qk_finish")][0] == {
        "q", "k_cache", "v_cache", "b", "rope", "step"}


@pytest.mark.parametrize("name", list(TINY))
def test_reference_decodes_incrementally_as_one_pass(tiny_paths, name):
    model = ReferenceModel(tiny_paths[name])
    full = model.forward(TOKENS)
    model.reset()
    parts = [model.forward(TOKENS[:5]), model.forward(TOKENS[5:9])] + [model.forward([t]) for t in TOKENS[9:]]
    np.testing.assert_allclose(np.concatenate(parts), full, rtol=1e-5, atol=1e-5)


def test_neox_rope_rotates_halves(tiny_paths):
    model = ReferenceModel(tiny_paths["qwen3"])
    x = np.zeros((1, 1, 32), np.float32)
    x[0, 0, 1] = 1.0  # pair 1 is (x1, x17), frequency theta^(-2/32)
    out = model._rope(x, np.array([3]))
    angle = 3 * 1e6 ** (-2 / 32)
    np.testing.assert_allclose(out[0, 0, [1, 17]], [np.cos(angle), np.sin(angle)], rtol=1e-6)
    assert np.count_nonzero(out) == 2


def test_head_order_makes_neox_pairs_interleaved(tiny_paths):
    """The GPU's reordered Q/K rows rotated as interleaved pairs are NeoX's rotation, reordered alike:
    the same scores, as attention sums over the head dimension in any order."""
    model = ReferenceModel(tiny_paths["qwen3"])
    order = graph.head_order(model.config)
    rng = np.random.default_rng(1)
    q, k = rng.standard_normal((2, 5, 1, 32)).astype(np.float32)
    positions = np.arange(7, 12)
    neox_q, neox_k = model._rope(q, positions), model._rope(k, positions)
    object.__setattr__(model.config, "rope_style", "interleaved")
    try:
        inter_q, inter_k = model._rope(q[..., order], positions), model._rope(k[..., order], positions)
    finally:
        object.__setattr__(model.config, "rope_style", "neox")
    np.testing.assert_allclose(inter_q, neox_q[..., order], atol=1e-6)
    np.testing.assert_allclose(np.einsum("nhd,nhd->n", inter_q, inter_k), np.einsum("nhd,nhd->n", neox_q, neox_k),
                               rtol=1e-5)
    rows = graph.qk_row_order(model.config)
    c = model.config
    assert sorted(rows) == list(range((c.n_heads + 2 * c.n_kv_heads) * c.head_dim)) and rows[:2] == [0, 16]


def test_attention_window_softcap_and_scale():
    rng = np.random.default_rng(2)
    q, k, v = rng.standard_normal((3, 9, 2, 8)).astype(np.float64)
    got = causal_attention(q[6:], k, v, 6, scale=0.3, softcap=1.5, window=4)
    for n in range(3):
        pos = 6 + n
        keys = range(pos - 3, pos + 1)
        for h in range(2):
            s = np.array([1.5 * np.tanh(q[pos, h] @ k[j, h] * 0.3 / 1.5) for j in keys])
            p = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
            np.testing.assert_allclose(got[n, h], p @ v[list(keys), h], rtol=1e-12)


def test_features_change_the_logits(tiny_paths):
    """Each feature the reference applies matters on its tiny model (the GPU comparisons would not
    notice a feature both sides ignore)."""
    base = {}
    for name, change in [("gemma2", {"final_softcap": 0.0}), ("gemma2", {"attn_softcap": 0.0}),
                         ("gemma2", {"sliding_window": 0}), ("gemma3", {"rope_theta_local": 0.0}),
                         ("mistral", {"sliding_window": 0}), ("qwen3", {"rope_style": "interleaved"})]:
        model = ReferenceModel(tiny_paths[name])
        if name not in base:
            base[name] = model.forward(TOKENS * 3)[-1]
        model.reset()
        for key, value in change.items():
            object.__setattr__(model.config, key, value)
        assert not np.allclose(model.forward(TOKENS * 3)[-1], base[name], atol=1e-4), (name, change)
    model = ReferenceModel(tiny_paths["llama3"])
    want = model.forward(TOKENS * 3)[-1]
    model.reset()
    del model.w["rope_freqs.weight"]
    assert not np.allclose(model.forward(TOKENS * 3)[-1], want, atol=1e-4)


def _rewrite(src, dst, arch=None, drop=(), add=None):
    """Copy a GGUF with another architecture name, tensors dropped or one added."""
    reader = gguf.GGUFReader(str(src))
    old_arch = reader.fields["general.architecture"].contents()
    arch = arch or old_arch
    w = gguf.GGUFWriter(str(dst), arch)
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        value = field.contents()
        name = key.replace(f"{old_arch}.", f"{arch}.", 1)
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(name, value, vtype, sub_type=sub)
    for t in reader.tensors:
        if t.name not in drop:
            w.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
    if add:
        w.add_tensor(*add)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dst


def test_unknown_architecture_missing_and_unexpected_tensors_are_named(tiny_paths, tmp_path):
    from trellis.kernels import build_model

    bad = _rewrite(tiny_paths["llama3"], tmp_path / "falcon.gguf", arch="falcon")
    with pytest.raises(ModelError, match="'falcon'"):
        _config(bad)
    missing = _rewrite(tiny_paths["qwen3"], tmp_path / "missing.gguf", drop=("blk.1.attn_k_norm.weight",))
    with pytest.raises(ModelError, match=r"lacks tensors blk\.1\.attn_k_norm\.weight"):
        build_model.build(str(missing), tmp_path / "out-missing")
    extra = _rewrite(tiny_paths["mistral"], tmp_path / "extra.gguf",
                     add=("blk.0.attn_q.bias", np.zeros(64, np.float32)))
    with pytest.raises(ModelError, match=r"blk\.0\.attn_q\.bias have no place in a mistral model"):
        build_model.build(str(extra), tmp_path / "out-extra")
