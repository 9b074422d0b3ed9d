"""Weight arrays come out of the shards whole, also across shard boundaries, and without copies."""

import hashlib
import json

import pytest

from trellis.errors import ModelError
from trellis.runtime import Artifacts


def folder(data: bytes, cuts: list[int], arrays: dict) -> dict:
    """A model folder in memory: `data` cut into shards at `cuts`, with `arrays` name -> (offset, bytes)."""
    bounds = [0, *cuts, len(data)]
    shards = {f"weights-{i}.bin": data[a:b] for i, (a, b) in enumerate(zip(bounds, bounds[1:]))}
    manifest = {"version": 2, "model": {"name": "m"}, "weights": {
        "shards": [{"file": f, "bytes": len(d), "sha256": hashlib.sha256(d).hexdigest()} for f, d in shards.items()],
        "arrays": {name: {"offset": o, "bytes": n} for name, (o, n) in arrays.items()}}}
    return {"manifest.json": json.dumps(manifest).encode(), **shards}


@pytest.mark.parametrize("cuts", [[], [4], [6], [8, 12], [2, 3, 5, 7, 11, 13, 17]])
def test_arrays_straddling_shards_are_whole(cuts):
    data = bytes(range(24))
    arrays = {"b": (8, 12), "a": (0, 8), "c": (20, 4)}
    files = folder(data, cuts, arrays)
    reads = []
    artifacts = Artifacts(lambda name: reads.append(name) or files[name])
    got = {name: b"".join(bytes(p) for p in parts) for name, parts in artifacts.weight_arrays()}
    assert got == {name: data[o:o + n] for name, (o, n) in arrays.items()}
    shards = [n for n in reads if n != "manifest.json"]
    assert len(shards) == len(set(shards)) == len(cuts) + 1  # each shard read once
    one = next(iter(Artifacts(files.__getitem__).weight_arrays()))[1][0]
    assert isinstance(one, memoryview)  # a view of the shard, not a copy


def test_missing_bytes_and_damaged_shards_are_named():
    files = folder(bytes(16), [8], {"a": (0, 16)})
    files["weights-1.bin"] = bytes(4)
    with pytest.raises(ModelError, match="weights-1.bin is corrupt"):
        list(Artifacts(files.__getitem__).weight_arrays())
    files = folder(bytes(16), [], {"a": (8, 16)})
    with pytest.raises(ModelError, match="'a' runs past the last shard"):
        list(Artifacts(files.__getitem__).weight_arrays())


def test_kernel_variants_are_matched_by_adapter_name_and_subgroup_size_and_checked():
    files = folder(bytes(4), [], {"a": (0, 4)})
    manifest = json.loads(files["manifest.json"])
    manifest["kernels"] = {"head_r8": {}, "head_r32": {}, "head_r32_l8": {}, "head_r8_l4": {}}
    manifest["variants"] = {
        "llvmpipe-subgroups-8": {"adapter": "llvmpipe", "subgroup_size": 8, "kernels": {"head_r8": "head_r32_l8"}},
        "llvmpipe": {"adapter": "llvmpipe", "kernels": {"head_r8": "head_r32"}},
        "swiftshader-subgroups-4": {"adapter": "swiftshader", "subgroup_size": 4, "kernels": {"head_r8": "head_r8_l4"}},
    }
    files["manifest.json"] = json.dumps(manifest).encode()
    artifacts = Artifacts(files.__getitem__)
    lavapipe = {"vendor": "llvmpipe", "device": "llvmpipe (LLVM 15.0.6, 256 bits)"}
    assert artifacts.variant_for(lavapipe) == ("llvmpipe", {"head_r8": "head_r32"})
    assert artifacts.variant_for({**lavapipe, "subgroup_size": 8}) == ("llvmpipe-subgroups-8", {"head_r8": "head_r32_l8"})
    assert artifacts.variant_for({**lavapipe, "subgroup_size": 4}) == ("llvmpipe", {"head_r8": "head_r32"})
    # The browser names SwiftShader only in its architecture.
    assert artifacts.variant_for({"vendor": "google", "architecture": "swiftshader", "subgroup_size": 4})[0] == (
        "swiftshader-subgroups-4")
    assert artifacts.variant_for({"device": "SwiftShader Device (Subzero)"}) == (None, {})
    assert artifacts.variant_for({}) == (None, {})
    # By name: any adapter whose subgroups the variant's lane groups tile.
    assert artifacts.variant_named("swiftshader-subgroups-4", {**lavapipe, "subgroup_size": 8}) == {"head_r8": "head_r8_l4"}
    with pytest.raises(ModelError, match="needs subgroups of a multiple of 8 lanes; this adapter's: 4"):
        artifacts.variant_named("llvmpipe-subgroups-8", {"subgroup_size": 4})
    with pytest.raises(ModelError, match="needs subgroups of a multiple of 4 lanes; this adapter's: None"):
        artifacts.variant_named("swiftshader-subgroups-4", lavapipe)
    with pytest.raises(ModelError, match="no kernel variant 'metal'"):
        artifacts.variant_named("metal", lavapipe)
    manifest["variants"]["llvmpipe"]["kernels"] = {"head_r8": "head_r64"}
    files["manifest.json"] = json.dumps(manifest).encode()
    with pytest.raises(ModelError, match="llvmpipe variant names unknown kernels \\['head_r64'\\]"):
        Artifacts(files.__getitem__).variant_for({"device": "llvmpipe"})
