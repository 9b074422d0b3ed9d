"""The plan executor: runs a built model's dispatch plans on a backend, holding the KV cache.

Pure Python (runs under Pyodide): step values go to the GPU as little-endian words via `struct`,
logits come back as an `array('f')`.
"""

import struct
from array import array

from trellis.errors import ModelError, SequenceLengthError
from trellis.runtime.artifacts import Artifacts

STEP_WORDS = 4  # [tokens in this run, position of the first one, unused, unused]
MASKED_LOGIT = -3.0e38  # the logit of a token the bitmask disallows (as kernels/llm writes it)


class Executor:
    def __init__(self, artifacts: Artifacts, backend, context: int | None = None):
        m = artifacts.manifest
        self.backend, self.model = backend, artifacts.model
        self.vocab_size = self.model["vocab"]
        limit = self.model["context"]
        self.context = context or limit
        if not 0 < self.context <= limit:
            raise ModelError(f"context {self.context} is outside 1..{limit}, the model's context length")
        self.chunk = m["plans"]["prefill"]["tokens"]
        self.buffers = {name: backend.create_buffer(name, spec["bytes"] + spec.get("per_context", 0) * self.context)
                        for name, spec in m["buffers"].items()}
        self.weight_bytes = 0
        for name, data in artifacts.weight_arrays():
            self.buffers[name] = backend.create_buffer(name, len(data), data)
            self.weight_bytes += len(data)
        self._plans = {name: self._prepare(artifacts, m["kernels"], plan["dispatches"])
                       for name, plan in m["plans"].items()}
        self.dispatches_per_token = len(self._plans["decode"])
        self.position = 0

    def _prepare(self, artifacts, kernels, dispatches):
        pipelines = getattr(self, "_pipelines", {})
        self._pipelines = pipelines
        prepared = []
        for d in dispatches:
            info = kernels[d["kernel"]]
            if d["kernel"] not in pipelines:
                pipelines[d["kernel"]] = (
                    self.backend.create_kernel(d["kernel"], artifacts.read_text(info["wgsl"]), info["entry_point"]),
                    self._uniform(info))
            pipeline, uniform = pipelines[d["kernel"]]
            try:
                bound = [self.buffers[d["args"][b["name"]]] for b in info["bindings"]]
            except KeyError as e:
                raise ModelError(f"dispatch of {d['kernel']} names no buffer for {e}") from None
            prepared.append(self.backend.create_dispatch(pipeline, bound, uniform, info["uniform"]["binding"],
                                                         info["grid"]))
        return prepared

    @staticmethod
    def _uniform(info) -> bytes:
        """The uniform block: TVM's WGSL returns early for workgroups whose flat x index > packGridDimX."""
        data = bytearray(info["uniform"]["size"])
        for field in info["uniform"]["fields"]:
            if field["name"] != "packGridDimX":
                raise ModelError(f"kernel {info['entry_point']} has an unknown uniform field {field['name']!r}")
            struct.pack_into("<I", data, field["offset"], info["grid"][0] - 1)
        return bytes(data)

    def reset(self) -> None:
        """Forget the sequence; the KV cache is overwritten from position 0 on."""
        self.position = 0

    def prefill(self, tokens, bitmask=None) -> array:
        """Append `tokens` (run in chunks); returns the logits after the last one.

        With `bitmask` (int32 words; bit i % 32 of word i // 32 set = token i allowed), the GPU sets
        the logits of disallowed tokens to MASKED_LOGIT before they come back.
        """
        tokens = list(tokens)
        if not tokens:
            raise ValueError("prefill needs at least one token")
        self._check(tokens)
        mask = None if bitmask is None else self._mask_bytes(bitmask)
        logits = None
        for start in range(0, len(tokens), self.chunk):
            part = tokens[start:start + self.chunk]
            last = start + self.chunk >= len(tokens)
            logits = self._run("prefill", part, read=last, mask=mask if last else None)
        return logits

    def decode(self, token: int, bitmask=None) -> array:
        """Append one token; returns the logits for the next (masked on the GPU with `bitmask`)."""
        self._check([token])
        return self._run("decode", [token], read=True, mask=None if bitmask is None else self._mask_bytes(bitmask))

    def _check(self, tokens) -> None:
        if self.position + len(tokens) > self.context:
            raise SequenceLengthError(
                f"sequence of {self.position + len(tokens)} tokens exceeds the context window of {self.context}"
                f" ({self.position} already in the KV cache)")
        for t in tokens:
            if not 0 <= t < self.vocab_size:
                raise ValueError(f"token id {t} is outside the vocabulary (0..{self.vocab_size - 1})")

    def _mask_bytes(self, bitmask) -> bytes:
        words = (self.vocab_size + 31) // 32
        if isinstance(bitmask, (bytes, bytearray, memoryview)):
            data = bytes(bitmask)
        else:
            data = struct.pack(f"<{len(bitmask)}I", *(int(w) & 0xFFFFFFFF for w in bitmask))
        if len(data) != 4 * words:
            raise ValueError(f"bitmask has {len(data) // 4} words; the vocabulary of {self.vocab_size} needs {words}")
        return data

    def _run(self, plan: str, tokens, read: bool, mask: bytes | None = None):
        dispatches = self._plans[plan]
        if mask is not None:
            self.backend.write_buffer(self.buffers["bitmask"], 0, mask)
            dispatches = dispatches + self._plans["mask"]
        self.backend.write_buffer(self.buffers["ids"], 0, struct.pack(f"<{len(tokens)}i", *tokens))
        self.backend.write_buffer(self.buffers["step"], 0,
                                  struct.pack(f"<{STEP_WORDS}i", len(tokens), self.position, 0, 0))
        out = self.backend.run(dispatches, read=(self.buffers["logits"], 4 * self.vocab_size) if read else None)
        self.position += len(tokens)
        if out is None:
            return None
        logits = array("f")
        logits.frombytes(out)
        return logits
