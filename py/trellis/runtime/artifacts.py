"""A built model folder: manifest, WGSL files, weight shards (read through a `read_file` callable,
so that the browser can fetch what the desktop reads from disk)."""

import hashlib
import json
from pathlib import Path

from trellis.errors import ModelError

MANIFEST_VERSION = 1
# Where `python3 build.py model` puts the embedded SmolLM2 (inside the checkout's build output).
DEFAULT_MODEL_DIR = Path(__file__).resolve().parents[3] / "build" / "models" / "smollm2-135m-instruct"


class Artifacts:
    def __init__(self, read_file, verify: bool = True, id: str | None = None):
        """`read_file(name) -> bytes` reads a file of the model folder; `verify` checks shard sha256;
        `id` names the model in requests and responses (the folder's name; default: the GGUF's name)."""
        self._read, self.verify = read_file, verify
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
            hint = " (run `python3 build.py model`)" if path is None else ""
            raise ModelError(f"no built model in {folder}{hint}")
        return cls(lambda name: (folder / name).read_bytes(), verify, folder.resolve().name)

    def read_text(self, name: str) -> str:
        return self._read(name).decode("utf-8")

    def tokenizer_data(self) -> dict:
        return json.loads(self.read_text(self.manifest["tokenizer"]["file"]))

    def weight_arrays(self):
        """(name, bytes) of every weight array, reading each shard once, in offset order."""
        weights = self.manifest["weights"]
        pending = sorted(weights["arrays"].items(), key=lambda kv: kv[1]["offset"])
        buffered, shard_start = bytearray(), 0  # bytes of the shards from offset shard_start on
        shards = iter(weights["shards"])
        for name, info in pending:
            end = info["offset"] + info["bytes"]
            while shard_start + len(buffered) < end:
                shard = next(shards, None)
                if shard is None:
                    raise ModelError(f"weight array {name!r} runs past the last shard")
                data = self._read(shard["file"])
                if len(data) != shard["bytes"] or (
                        self.verify and hashlib.sha256(data).hexdigest() != shard["sha256"]):
                    raise ModelError(f"weight shard {shard['file']} is corrupt (size or sha256 differs): rebuild")
                buffered += data
            start = info["offset"] - shard_start
            yield name, bytes(buffered[start:start + info["bytes"]])
            # Drop what no later array needs (arrays come in offset order).
            del buffered[:end - shard_start]
            shard_start = end
