"""A built model folder: manifest, WGSL files, weight shards (read through a `read_file` callable,
so that the browser can fetch what the desktop reads from disk)."""

import hashlib
import json
from pathlib import Path

from trellis import paths
from trellis.errors import ModelError

MANIFEST_VERSION = 2  # 2: variants name their adapter and subgroup size
# Where the embedded SmolLM2 is built (`python3 build.py model` in a checkout; on first use when installed).
DEFAULT_MODEL_DIR = paths.default_model_dir()


class Artifacts:
    def __init__(self, read_file, verify: bool = True, id: str | None = None, read_shard=None):
        """`read_file(name) -> bytes` reads a file of the model folder; `verify` checks shard sha256;
        `id` names the model in requests and responses (the folder's name; default: the GGUF's name);
        `read_shard(name)` reads a weight shard as anything with len() and zero-copy slicing (default:
        a memoryview of `read_file`'s bytes)."""
        self._read, self.verify = read_file, verify
        self._read_shard = read_shard or (lambda name: memoryview(read_file(name)))
        try:
            self.manifest = json.loads(read_file("manifest.json"))
        except (OSError, ValueError) as e:
            raise ModelError(f"cannot read the model manifest: {e}") from e
        if self.manifest.get("version") != MANIFEST_VERSION:
            raise ModelError(f"manifest version {self.manifest.get('version')} is not {MANIFEST_VERSION}: rebuild the model")
        self.model = self.manifest["model"]
        self.id = id or self.model["name"]

    @classmethod
    def from_dir(cls, path=None, verify: bool = True) -> "Artifacts":
        folder = Path(path) if path else DEFAULT_MODEL_DIR
        if not (folder / "manifest.json").exists():
            command = "python3 build.py model" if paths.CHECKOUT is not None else "trellis build-model"
            hint = f" (run `{command}`)" if path is None else ""
            raise ModelError(f"no built model in {folder}{hint}")
        return cls(lambda name: (folder / name).read_bytes(), verify, folder.resolve().name)

    def variant_for(self, adapter_info: dict) -> tuple[str | None, dict]:
        """(name, {kernel: its replacement}) of the kernel variant the manifest has for this adapter:
        the first whose adapter name occurs in the adapter's vendor, architecture, device or
        description (lower case) and whose subgroup size, if it needs one, is the adapter's
        (`adapter_info["subgroup_size"]`, which the backend measured); or (None, {}).
        The one rule: the browser's worker asks it (web/worker.py kernel_variant) which kernels to compile."""
        text = " ".join(str(adapter_info.get(k) or "")
                        for k in ("vendor", "architecture", "device", "description")).lower()
        for name, variant in self.manifest.get("variants", {}).items():
            needs = variant.get("subgroup_size")
            if variant["adapter"] in text and needs in (None, adapter_info.get("subgroup_size")):
                return name, self._checked(name, variant)
        return None, {}

    def variant_named(self, name: str, adapter_info: dict) -> dict:
        """{kernel: its replacement} of the variant `name`, whatever the adapter's name, if the adapter
        can run it: its lane groups must tile the adapter's subgroups."""
        variants = self.manifest.get("variants", {})
        if name not in variants:
            raise ModelError(f"the model has no kernel variant {name!r} (it has {sorted(variants)})")
        variant = variants[name]
        needs, has = variant.get("subgroup_size"), adapter_info.get("subgroup_size")
        if needs and not (has and has % needs == 0):
            raise ModelError(f"variant {name} needs subgroups of a multiple of {needs} lanes; this adapter's: {has}")
        return self._checked(name, variant)

    def _checked(self, name: str, variant: dict) -> dict:
        kernels = self.manifest.get("kernels", {})
        unknown = [k for pair in variant["kernels"].items() for k in pair if k not in kernels]
        if unknown:
            raise ModelError(f"the manifest's {name} variant names unknown kernels {unknown[:3]}: rebuild")
        return variant["kernels"]

    def read_text(self, name: str) -> str:
        return self._read(name).decode("utf-8")

    def tokenizer_data(self) -> dict:
        return json.loads(self.read_text(self.manifest["tokenizer"]["file"]))

    def weight_arrays(self):
        """(name, parts) of every weight array in offset order: `parts` are slices of the shards
        (an array may straddle a shard boundary), taken without copying: the browser's shards stay
        JS arrays that go to the GPU as they are. Each shard is read (and verified) once."""
        weights = self.manifest["weights"]
        pending = sorted(weights["arrays"].items(), key=lambda kv: kv[1]["offset"])
        shards = iter(weights["shards"])
        loaded = []  # (start offset, data) of the shards the next arrays may still need
        end_of_loaded = 0
        for name, info in pending:
            start, end = info["offset"], info["offset"] + info["bytes"]
            while end_of_loaded < end:
                loaded.append((end_of_loaded, self._shard(next(shards, None), name)))
                end_of_loaded += len(loaded[-1][1])
            while len(loaded) > 1 and loaded[0][0] + len(loaded[0][1]) <= start:
                loaded.pop(0)  # arrays come in offset order: no later one needs it
            yield name, [data[max(start - at, 0):min(end - at, len(data))]
                         for at, data in loaded if at < end and at + len(data) > start]

    def _shard(self, shard, array: str):
        if shard is None:
            raise ModelError(f"weight array {array!r} runs past the last shard")
        data = self._read_shard(shard["file"])
        if len(data) != shard["bytes"] or (
                self.verify and hashlib.sha256(data).hexdigest() != shard["sha256"]):
            raise ModelError(f"weight shard {shard['file']} is corrupt (size or sha256 differs): rebuild")
        return data
