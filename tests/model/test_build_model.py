"""The model build on the tiny GGUF: manifest, WGSL, shards with sha256, skipping up-to-date outputs."""

import hashlib
import json

import numpy as np
import pytest

from trellis.kernels import build_model
from trellis.kernels.gguf_model import read_config
from tests.model.tiny_gguf import write_tiny_llama


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-build")
    write_tiny_llama(root / "tiny.gguf")
    assert build_model.main(["--gguf", str(root / "tiny.gguf"), "--out", str(root / "out")]) == 0
    return root


def _manifest(root):
    return json.loads((root / "out" / "manifest.json").read_text())


def test_manifest_describes_every_dispatch(built):
    m = _manifest(built)
    assert m["model"]["n_layers"] == 2 and m["model"]["vocab"] == 269
    arrays = m["weights"]["arrays"]
    for plan in ("prefill", "decode"):
        dispatches = m["plans"][plan]["dispatches"]
        # embed, the first norm's input, 5 per layer, final norm and head
        assert len(dispatches) == 1 + 1 + 5 * 2 + 2
        for d in dispatches:
            kernel = m["kernels"][d["kernel"]]
            source = (built / "out" / kernel["wgsl"]).read_text()
            assert f"fn {kernel['entry_point']}(" in source
            assert [b["binding"] for b in kernel["bindings"]] == list(range(len(kernel["bindings"])))
            assert kernel["uniform"]["binding"] == len(kernel["bindings"])
            # Every binding is fed by a declared buffer or a weight array, and nothing else is passed.
            assert sorted(d["args"]) == sorted(b["name"] for b in kernel["bindings"])
            for b in kernel["bindings"]:
                assert d["args"][b["name"]] in m["buffers"] or d["args"][b["name"]] in arrays
            assert "enable f16" not in source
            assert len(kernel["bindings"]) <= 8  # WebGPU's default storage-buffer limit


def test_adapter_variants_stand_in_for_plan_kernels(built):
    """Each variant replaces a kernel some plan runs by another of the same bindings."""
    m = _manifest(built)
    planned = {d["kernel"] for plan in m["plans"].values() for d in plan["dispatches"]}
    assert m["variants"], "the build names no kernel variants"
    for name, variant in m["variants"].items():
        assert variant["adapter"] == variant["adapter"].lower() and variant["kernels"]
        for default, swap in variant["kernels"].items():
            assert default in planned and swap not in planned and swap != default
            assert m["kernels"][swap]["bindings"] == m["kernels"][default]["bindings"]
            assert (built / "out" / m["kernels"][swap]["wgsl"]).exists()
            # Kernels that shuffle across lanes say so, for the device (the browser's Tint needs both lines).
            source = (built / "out" / m["kernels"][swap]["wgsl"]).read_text()
            lanes = variant.get("subgroup_size")
            assert ("subgroupShuffle" in source) == (m["kernels"][swap].get("features") == ["subgroups"])
            assert ("enable subgroups;\ndiagnostic(off, subgroup_uniformity);" in source) == ("subgroupShuffle" in source)
            if lanes is None:
                assert "subgroupShuffle" not in source
    for kernel in planned:
        assert "subgroup" not in (built / "out" / m["kernels"][kernel]["wgsl"]).read_text()
    assert any("subgroupShuffle" in (built / "out" / m["kernels"][swap]["wgsl"]).read_text()
               for variant in m["variants"].values() if variant.get("subgroup_size") for swap in variant["kernels"].values())


def test_shards_are_bounded_and_hashed(built):
    m = _manifest(built)
    total = 0
    for shard in m["weights"]["shards"]:
        data = (built / "out" / shard["file"]).read_bytes()
        assert len(data) == shard["bytes"] <= build_model.SHARD_LIMIT
        assert hashlib.sha256(data).hexdigest() == shard["sha256"]
        total += len(data)
    assert total == sum(a["bytes"] for a in m["weights"]["arrays"].values())


def test_packed_q4_1_keeps_gguf_values(built):
    """The packed (qs, sc) arrays decode, as the shader does, to gguf's own dequantization."""
    import gguf

    m = _manifest(built)
    blob = b"".join((built / "out" / s["file"]).read_bytes() for s in m["weights"]["shards"])

    def array(name):
        a = m["weights"]["arrays"][name]
        return np.frombuffer(blob[a["offset"]:a["offset"] + a["bytes"]], dtype=a["dtype"]).reshape(a["shape"])

    reader = gguf.GGUFReader(str(built / "tiny.gguf"))
    tensor = next(t for t in reader.tensors if t.name == "blk.0.attn_q.weight")
    expected = gguf.dequantize(tensor.data, tensor.tensor_type).reshape(64, 64)
    # Stored [tile, vector, row in tile, 4]; Q/K/V stacked by rows, Q first. Per row: 8 nibble words
    # (2 blocks), then (d, m) per block as f32 bits.
    tiled = array("blk.0.attn_qkv")
    packed = tiled.transpose(0, 2, 1, 3).reshape(-1, tiled.shape[1] * 4)[:64]
    qs, sc = packed[:, :8], packed[:, 8:].view(np.float32)
    k = np.arange(64)
    j = k % 32
    words = qs[:, (k // 32) * 4 + (j % 16) // 4]
    nibbles = (words >> ((j % 4) * 8 + (j // 16) * 4)) & 15
    got = sc[:, (k // 32) * 2] * nibbles + sc[:, (k // 32) * 2 + 1]
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)
    assert read_config(reader).rope_theta == 10000.0
    # The head's rows (the tied embedding's) fill whole tiles: the last one is padded with zeros.
    head = array("token_embd.weight")
    vocab = read_config(reader).vocab
    assert head.shape[0] * head.shape[2] >= vocab > (head.shape[0] - 1) * head.shape[2]
    rows = head.transpose(0, 2, 1, 3).reshape(-1, head.shape[1] * 4)
    assert rows[vocab:].size and not rows[vocab:].any() and rows[vocab - 1].any()


def test_rebuild_skips_up_to_date_outputs(built, capsys):
    """The same GGUF, options and sources: nothing is read or written (stale files go); other options
    (here a sampling default): the kernels and weights are still found up to date, the manifest is new."""
    before = {p.name: p.stat().st_mtime_ns for p in (built / "out").iterdir()}
    (built / "out" / "old_kernel.wgsl").write_text("// from an earlier build")
    build_model.main(["--gguf", str(built / "tiny.gguf"), "--out", str(built / "out")])
    assert not (built / "out" / "old_kernel.wgsl").exists()
    log = capsys.readouterr().out
    assert "up to date (same GGUF file" in log and "reading" not in log
    assert {p.name: p.stat().st_mtime_ns for p in (built / "out").iterdir()} == before
    build_model.main(["--gguf", str(built / "tiny.gguf"), "--out", str(built / "out"), "--sampling", "top_p=0.5"])
    log = capsys.readouterr().out
    assert "weights up to date" in log and "kernel " not in log
    after = {p.name: p.stat().st_mtime_ns for p in (built / "out").iterdir() if p.suffix != ".json"}
    assert all(after[name] == before[name] for name in after)
    assert json.loads((built / "out" / "manifest.json").read_text())["sampling"] == {"top_p": 0.5}
    build_model.main(["--gguf", str(built / "tiny.gguf"), "--out", str(built / "out")])  # as the other tests had it


def test_unsupported_tensor_type_is_named(tmp_path):
    import gguf

    from trellis.errors import ModelError

    w = gguf.GGUFWriter(str(tmp_path / "bad.gguf"), "llama")
    w.add_tensor("blk.0.attn_q.weight", np.zeros((32, 84), np.uint8), raw_dtype=gguf.GGMLQuantizationType.Q2_K)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    from trellis.kernels.gguf_model import tensors_by_name

    with pytest.raises(ModelError, match="blk.0.attn_q.weight.*Q2_K"):
        tensors_by_name(gguf.GGUFReader(str(tmp_path / "bad.gguf")))


def test_sampling_defaults_come_from_the_gguf_and_the_build(tmp_path):
    """llama.cpp's general.sampling.* keys are read into the manifest's request defaults; a
    malformed one is a ModelError naming the key."""
    import gguf

    from trellis.kernels.gguf_model import read_sampling
    from trellis.errors import ModelError

    def written(**fields):
        path = tmp_path / f"s{len(list(tmp_path.iterdir()))}.gguf"
        w = gguf.GGUFWriter(str(path), "llama")
        for key, value in fields.items():
            if isinstance(value, str):
                w.add_string(key, value)
            else:
                w.add_float32(key, value)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        return gguf.GGUFReader(str(path))

    assert read_sampling(written()) == {}
    got = read_sampling(written(**{"general.sampling.temp": 0.5, "general.sampling.top_p": 0.75}))
    assert got == {"temperature": 0.5, "top_p": 0.75}
    with pytest.raises(ModelError, match="general.sampling.temp"):
        read_sampling(written(**{"general.sampling.temp": "hot"}))
