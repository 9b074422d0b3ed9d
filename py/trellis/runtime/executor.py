"""The plan executor: runs a built model's dispatch plans on a backend, holding the KV cache.

Pure Python (runs under Pyodide): step values go to the GPU as little-endian words via `struct`,
logits come back as an `array('f')`.
"""

import struct
from array import array

from trellis.errors import ModelError, RuntimeBackendError, SequenceLengthError
from trellis.runtime.abi import MASKED_LOGIT, STEP_WORDS
from trellis.runtime.artifacts import Artifacts

# Token-by-token prefill (the prefill kernels still compiling) checks for them this often.
TOKENS_BETWEEN_CHECKS = 4


class Executor:
    def __init__(self, artifacts: Artifacts, backend, context: int | None = None, prepare: bool = True,
                 variants: bool | str = True):
        """Allocates the buffers and uploads the weights; with `prepare`, also builds the plans (else call
        `prepare()` before running: the browser uploads weights while its kernels still compile).
        With `variants`, runs the kernel variants the model has for the backend's adapter (or those the
        backend's `kernel_variant` names, chosen before the engine existed), or with a variant's name
        that one (`variant` names them; None: the default kernels)."""
        m = artifacts.manifest
        if m.get("masked_logit") != MASKED_LOGIT:
            raise ModelError(f"the manifest's masked_logit (a disallowed token's logit) is {m.get('masked_logit')!r},"
                             f" not this runtime's {MASKED_LOGIT}: rebuild the model")
        info = getattr(backend, "adapter_info", {})
        if variants is True:  # a choice already made: the browser's worker compiled that variant's kernels
            variants = getattr(backend, "kernel_variant", True)
        if isinstance(variants, str):
            self.variant, self._swaps = variants, artifacts.variant_named(variants, info)
        else:
            self.variant, self._swaps = artifacts.variant_for(info) if variants else (None, {})
        self.backend, self.model = backend, artifacts.model
        self.vocab_size = self.model["vocab"]
        limit = self.model["context"]
        self.context = context or limit
        if not 0 < self.context <= limit:
            raise ModelError(f"context {self.context} is outside 1..{limit}, the model's context length")
        self.chunk = m["plans"]["prefill"]["tokens"]
        self._check_bindings(m)  # before hundreds of megabytes go up
        self.buffers = {name: backend.create_buffer(name, spec["bytes"] + spec.get("per_context", 0) * self.context)
                        for name, spec in m["buffers"].items()}
        self.weight_bytes = 0
        for name, parts in artifacts.weight_arrays():
            size = sum(len(part) for part in parts)
            buffer = self.buffers[name] = backend.create_buffer(name, size)
            at = 0
            for part in parts:
                backend.write_buffer(buffer, at, part)
                at += len(part)
            self.weight_bytes += size
        self._manifest, self._read_text = m, artifacts.read_text
        self._kernels, self._pipelines, self._plans = m["kernels"], {}, {}
        self._token_upload = backend.create_buffer("token-upload", 4 * (STEP_WORDS + 1))
        self._upload, self._prefill_plans = None, {}  # created with the first chunked prefill
        self.position = 0
        if prepare:
            self.prepare()

    def _check_bindings(self, m: dict) -> None:
        """RuntimeBackendError naming the first weight array larger than the adapter can bind: the build
        splits the embedding and head at its own limit (the manifest's), which may be above this one."""
        limit = getattr(self.backend, "limits", {}).get("max-storage-buffer-binding-size")
        too_big = [(a["offset"], name, a["bytes"]) for name, a in m["weights"]["arrays"].items()
                   if limit is not None and a["bytes"] > limit]
        if not too_big:
            return
        _, name, size = min(too_big)
        built_for = m.get("max_binding_bytes")
        how = (f"the build split its embedding and head at {built_for} bytes; `build.py model"
               f" --max-binding-bytes {limit}` splits them to fit" if built_for else "a model built before"
               " weights were split: rebuild it")
        raise RuntimeBackendError(f"weight array {name!r} needs {size} bytes, above this adapter's storage binding"
                                  f" limit of {limit} bytes ({how})")

    def prepare(self) -> None:
        """Builds the decode and mask plans (their kernels compiled, or taken from the backend)."""
        if self._plans:
            return
        m, read_text = self._manifest, self._read_text
        plans = {name: self._prepare(plan["dispatches"], read_text)
                 for name, plan in m["plans"].items() if name != "prefill"}
        self.dispatches_per_token = len(plans["decode"])
        # Token-by-token prefill needs logits only for the last token: the decode plan without the head
        # (the final norm, then the matmuls into `logits`, one per row part of the head) serves the others.
        decode = m["plans"]["decode"]["dispatches"]
        head = 0
        while head < len(decode) and decode[-1 - head]["args"].get("y") == "logits":
            head += 1
        if head and head < len(decode) and decode[-1 - head]["args"].get("y") == decode[-1]["args"].get("x"):
            head += 1
        plans["decode_hidden"] = plans["decode"][:len(decode) - head]
        copy = self.backend.create_copy
        self._token_plans = {name: [copy(self._token_upload, 0, self.buffers["step"], 0, 4 * STEP_WORDS),
                                    copy(self._token_upload, 4 * STEP_WORDS, self.buffers["ids"], 0, 4),
                                    *plans[name]] for name in ("decode", "decode_hidden")}
        self._greedy_plans = {}  # (input from the host, masked) -> plan list
        # The prefill plan's kernels may still be compiling (the browser makes the engine ready without
        # them: on software adapters they take most of the start-up); until they are, prefill runs the
        # decode plan token by token.
        self._prefill_dispatches = m["plans"]["prefill"]["dispatches"]
        self._prefill_sources = {name: read_text(self._kernels[name]["wgsl"])
                                 for name in map(self.kernel_of, self._prefill_dispatches)
                                 if name not in self._pipelines}
        self._plans = plans
        self._prefill_ready()

    def _prepare(self, dispatches, read_text):
        """The backend's dispatches of a plan, compiling the kernels not compiled yet."""
        prepared = []
        for d in dispatches:
            name = self.kernel_of(d)
            info = self._kernels[name]
            if name not in self._pipelines:
                pipeline = self.backend.create_kernel(name, read_text(info["wgsl"]), info["entry_point"])
                self._pipelines[name] = (pipeline, self._uniform(info))
            pipeline, uniform = self._pipelines[name]
            try:
                bound = [self.buffers[d["args"][b["name"]]] for b in info["bindings"]]
            except KeyError as e:
                raise ModelError(f"dispatch of {name} names no buffer for {e}") from None
            prepared.append(self.backend.create_dispatch(pipeline, bound, uniform, info["uniform"]["binding"],
                                                         info["grid"]))
        return prepared

    def kernel_of(self, dispatch: dict) -> str:
        """The kernel a plan's dispatch runs on this adapter."""
        return self._swaps.get(dispatch["kernel"], dispatch["kernel"])

    def _prefill_ready(self) -> bool:
        """Whether prefill runs in chunks: prepares the prefill plan once the backend has its kernels
        (a backend without `kernel_ready` compiles them on demand)."""
        if "prefill" in self._plans:
            return True
        compiled = getattr(self.backend, "kernel_ready", None)
        if compiled is not None and not all(compiled(name) for name in self._prefill_sources):
            return False
        wgsl = {self._kernels[name]["wgsl"]: text for name, text in self._prefill_sources.items()}
        self._plans["prefill"] = self._prepare(self._prefill_dispatches, wgsl.__getitem__)
        self._prefill_sources = {}
        return True

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

    def rewind(self, position: int) -> None:
        """Keep only the first `position` tokens of the KV cache (a shared prompt prefix)."""
        if not 0 <= position <= self.position:
            raise ValueError(f"cannot rewind to {position}: the KV cache holds {self.position} tokens")
        self.position = position

    # Synchronous calls (desktop backends): run, wait, return the logits.

    def prefill(self, tokens, bitmask=None) -> array:
        """Append `tokens` (run in chunks); returns the logits after the last one.

        With `bitmask` (int32 words; bit i % 32 of word i // 32 set = token i allowed), the GPU sets
        the logits of disallowed tokens to MASKED_LOGIT before they come back.
        """
        mask = None if bitmask is None else self._mask_bytes(bitmask)  # checked before any work is queued
        tokens = list(tokens)
        queued = self.submit_prefill(tokens)
        while queued < len(tokens):
            self.backend.read_back(self.submit_read())
            queued += self.submit_prefill(tokens[queued:])
        return self._logits(self.backend.read_back(self.submit_read(mask)))

    def decode(self, token: int, bitmask=None) -> array:
        """Append one token; returns the logits for the next (masked on the GPU with `bitmask`)."""
        mask = None if bitmask is None else self._mask_bytes(bitmask)
        self.submit_decode(token)
        return self._logits(self.backend.read_back(self.submit_read(mask)))

    # Split calls: submit GPU work, do CPU work (grammar) meanwhile, then collect the logits.

    def submit_prefill(self, tokens) -> int:
        """Queue the prefill of `tokens` without waiting; returns how many it queued.

        All of them, in chunks, as one submission: every chunk's token ids and step words go up in
        one write, and copies placed between the chunks' dispatches move each chunk's share into the
        `ids` and `step` buffers. One submission matters: some drivers (lavapipe) make a submit wait
        for the previous one. While the prefill plan's kernels are still compiling, only the first
        few, token by token through the decode plan: the caller waits for them (`submit_read`) and
        queues the rest, which go in chunks once the kernels are in."""
        tokens = list(tokens)
        if not tokens:
            raise ValueError("prefill needs at least one token")
        self._check(tokens)
        if not self._prefill_ready():
            part = tokens[:TOKENS_BETWEEN_CHECKS]
            for i, token in enumerate(part):
                self._submit(self._token_plans["decode" if i == len(part) - 1 else "decode_hidden"], token)
            return len(part)
        chunks = (len(tokens) + self.chunk - 1) // self.chunk
        upload = bytearray(self._upload_bytes(chunks))
        for i in range(chunks):
            part = tokens[i * self.chunk:(i + 1) * self.chunk]
            struct.pack_into(f"<{STEP_WORDS}i", upload, 16 * i, len(part), self.position + i * self.chunk, 0, 0)
            struct.pack_into(f"<{len(part)}i", upload, 16 * chunks + 4 * self.chunk * i, *part)
        plan = self._prefill_plan(chunks)
        self.backend.write_buffer(self._upload, 0, bytes(upload))
        self.backend.submit(plan)
        self.position += len(tokens)
        return len(tokens)

    def _upload_bytes(self, chunks: int) -> int:
        return 16 * chunks + 4 * self.chunk * chunks

    def _prefill_plan(self, chunks: int) -> list:
        """Copies and dispatches of a `chunks`-chunk prefill (kept: backends cache plan lists)."""
        plan = self._prefill_plans.get(chunks)
        if plan is None:
            most = (self.context + self.chunk - 1) // self.chunk
            if self._upload is None:
                self._upload = self.backend.create_buffer("prefill-upload", self._upload_bytes(most))
            copy, plan = self.backend.create_copy, []
            for i in range(chunks):
                plan += [copy(self._upload, 16 * i, self.buffers["step"], 0, 16),
                         copy(self._upload, 16 * chunks + 4 * self.chunk * i, self.buffers["ids"], 0, 4 * self.chunk),
                         *self._plans["prefill"]]
            self._prefill_plans[chunks] = plan
        return plan

    def submit_decode(self, token: int, read: bool = False):
        """Queue one decode step, without waiting; with `read`, the read-back of its (unmasked) logits
        too, in the same submission (what `submit_read()` would return)."""
        self._check([token])
        return self._submit(self._token_plans["decode"], token,
                            (self.buffers["logits"], 4 * self.vocab_size) if read else None)

    def submit_read(self, bitmask=None):
        """Queue the read-back of the last logits (masked on the GPU first with `bitmask`)."""
        dispatches = []
        if bitmask is not None:
            self.load_bitmask(bitmask)
            dispatches = self._plans["mask"]
        return self.backend.submit(dispatches, read=(self.buffers["logits"], 4 * self.vocab_size))

    # Greedy decoding on the GPU (models built with the argmax plan): each step's argmax becomes the
    # next step's input on the GPU, so several steps can be in flight and the host reads back only
    # token ids, hiding the read-back's latency behind the GPU's work.

    @property
    def greedy_on_gpu(self) -> bool:
        """Whether the model has the argmax plan (models built before it decode greedily on the host)."""
        return "argmax" in self._plans

    def submit_greedy(self, token: int | None, masked: bool = False):
        """Queue one decode step and the argmax of its logits (masked first with the bitmask last
        loaded, when `masked`); its input is `token`, or with None the previous greedy step's pick,
        still on the GPU. Returns a handle for `collect_token`; several may be in flight."""
        self._check([0 if token is None else token])
        key = (token is not None, masked)
        plan = self._greedy_plans.get(key)
        if plan is None:
            copies = self._token_plans["decode"][:2 if token is not None else 1]
            plan = self._greedy_plans[key] = [*copies, *self._plans["decode"], *(self._plans["mask"] if masked else ()),
                                              *self._plans["argmax"]]
        return self._submit(plan, 0 if token is None else token, (self.buffers["ids"], 4))

    def load_bitmask(self, bitmask) -> None:
        """Upload a token bitmask for the mask plan (`submit_read` does it itself)."""
        self.backend.write_buffer(self.buffers["bitmask"], 0, self._mask_bytes(bitmask))

    async def collect_token(self, pending) -> int:
        """The token id a `submit_greedy` picked."""
        return struct.unpack_from("<i", bytes(await self._read(pending)))[0]

    def discard(self, pending) -> None:
        """Give up a read that will not be collected (a speculative step after the generation ended)."""
        release = getattr(self.backend, "discard", None)
        if release is not None:
            release(pending)

    async def collect(self, pending) -> array:
        """The logits of a `submit_read`; suspends only on asynchronous (browser) backends."""
        return self._logits(await self._read(pending))

    async def _read(self, pending):
        data = self.backend.read_back(pending)
        if hasattr(data, "__await__"):
            data = await data
        return data

    @staticmethod
    def _logits(data) -> array:
        logits = array("f")
        logits.frombytes(bytes(data))
        return logits

    def _check(self, tokens) -> None:
        if not self._plans:
            raise ModelError("the executor's plans are not built yet: call prepare() first")
        if self.position + len(tokens) > self.context:
            raise SequenceLengthError(
                f"sequence of {self.position + len(tokens)} tokens exceeds the context window of {self.context}"
                f" ({self.position} already in the KV cache)")
        for t in tokens:
            if not 0 <= t < self.vocab_size:
                raise ValueError(f"token id {t} is outside the vocabulary (0..{self.vocab_size - 1})")

    def _mask_bytes(self, bitmask) -> bytes:
        words = (self.vocab_size + 31) // 32
        if isinstance(bitmask, (bytes, bytearray, memoryview, array)):
            data = bytes(bitmask)
        else:
            data = struct.pack(f"<{len(bitmask)}I", *(int(w) & 0xFFFFFFFF for w in bitmask))
        if len(data) != 4 * words:
            raise ValueError(f"bitmask has {len(data) // 4} words; the vocabulary of {self.vocab_size} needs {words}")
        return data

    def _submit(self, plan: list, token: int, read=None):
        """One token through `plan` (a token plan: copies at its head move the step words, and the id
        unless the GPU placed it, into the `step` and `ids` buffers): the words and id go up in one
        write, as a write costs more than a copy; `read` as the backend's `submit` takes it."""
        words = struct.pack(f"<{STEP_WORDS + 1}i", 1, self.position, 0, 0, token)
        self.backend.write_buffer(self._token_upload, 0, words)
        self.position += 1
        return self.backend.submit(plan, read=read)
