"""The engine: OpenAI / web-llm chat completions over a built model, with grammar-constrained decoding.

    engine = Engine()                                   # the built embedded SmolLM2 on wgpu-native
    reply = engine.chat.completions.create(messages=[{"role": "user", "content": "Hi"}],
                                           response_format={"type": "json_object"})

One generation loop serves both faces. It is a coroutine that suspends only where an asynchronous
backend (the browser's WebGPU under Pyodide) makes it wait for the GPU; `Engine` drives it without
an event loop on synchronous backends, `AsyncEngine` awaits it.

Per request: the prompt's prefill is queued on the GPU first, the grammar is compiled (or taken
from the cache) while the GPU works, and the first sample waits for both. Each decode step queues
the model's step, fills the next token mask meanwhile, then lets the GPU mask the logits before
they come back.

Concurrency: the model's state (KV cache, executor) serves one job at a time. A job takes the
engine's turn when its run starts and gives it back when its last choice ends (before the final
Done event) or when its stream is closed. Another thread's job waits for the turn; the same
thread's raises EngineBusyError (waiting would never end: an open stream of that thread holds it).
The HTTP server (trellis/serve/worker.py) runs every job on one worker thread, in a bounded FIFO queue. Stops
are per job: `job.cancel()` (a client gone), and `interrupt_generate()` for every job made before
the call, so a stop asked between create() and the first token is not lost.
"""

from __future__ import annotations

import threading
import time
from array import array
from contextlib import aclosing
from pathlib import Path

from trellis.errors import (EngineBusyError, InvalidRequestError, ModelNotFoundError, RuntimeBackendError,
                            SequenceLengthError)
from trellis.grammar.compiler import GrammarCompiler
from trellis.grammar.constraints import Constraint
from trellis.grammar.matcher import GrammarMatcher
from trellis.grammar.vocabulary import Vocabulary
from trellis.model.chat_template import ChatTemplate, template_messages
from trellis.model.tokenizer import Tokenizer
from trellis.runtime.artifacts import Artifacts
from trellis.runtime.executor import Executor

from .default_model import default_model_dir
from .faces import AsyncFace, ChatFace, TextFace
from .greedy import GreedyPipeline, greedy_on_gpu
from .job import Delta, Done, Job, Outcome
from .request import parse_chat_request, parse_completion_request
from .sampler import Sampled, Sampler
from .stop_strings import StopStrings
from .tool_syntax import syntax_for_template
from .tools import arguments_schema, parse_tool_calls, render_tool_messages, tool_response_format


class Engine:
    """Chat and text completions over one built model (synchronous API; see AsyncEngine)."""

    def __init__(self, model_dir=None, *, backend=None, context: int | None = 2048, grammar_core="native",
                 artifacts: Artifacts | None = None, max_cached_grammars: int = 32,
                 max_grammar_cache_bytes: int = 256 << 20, prepare: bool = True, models: dict | None = None):
        """`prepare=False` leaves the executor's plans to `executor.prepare()` (the browser builds the
        rest of the engine while the kernels compile). `models`: {id: built model folder}, the models
        `reload` may switch to (web-llm's appConfig.model_list); `model_dir` may be one of its ids."""
        # What reload() keeps: the backend (below), these options and the model list.
        self._options = {"context": context, "grammar_core": grammar_core, "max_cached_grammars": max_cached_grammars,
                         "max_grammar_cache_bytes": max_grammar_cache_bytes}
        self.models = {str(k): Path(v) for k, v in (models or {}).items()}
        if artifacts is None and model_dir is not None and str(model_dir) in self.models:
            artifacts = Artifacts.from_dir(self.models[str(model_dir)])
            artifacts.id = str(model_dir)  # requests and responses name it by its id in the list
        if artifacts is None and model_dir is None:
            model_dir = default_model_dir()  # built on first use
        artifacts = artifacts or Artifacts.from_dir(model_dir)
        if backend is None:
            from trellis.runtime.wgpu_backend import WgpuBackend

            backend = WgpuBackend()
        limit = artifacts.model["context"]
        self.executor = Executor(artifacts, backend, min(context or limit, limit), prepare=prepare)
        self.tokenizer = Tokenizer(artifacts.tokenizer_data())
        self.model_id = artifacts.id
        self.template = ChatTemplate.from_manifest(artifacts.manifest, self.tokenizer.tokens)
        # Request defaults from the model (its generation config), as web-llm takes them from mlc-chat-config.
        self.sampling_defaults = dict(artifacts.manifest.get("sampling") or {})
        # The family's own tool-call syntax when its template writes tools; else Trellis's (tools.py).
        self.tool_syntax = syntax_for_template(self.template.source) if self.template.supports_tools else None
        self.stop_ids = self._stop_ids()
        self.tool_markers = marker_ids(self.tokenizer, self.tool_syntax)
        vocab = grammar_vocabulary(self.tokenizer, self.stop_ids, self.executor.vocab_size, self.tool_markers)
        self.compiler = GrammarCompiler(vocab, core=grammar_core, max_cached_grammars=max_cached_grammars,
                                        max_cache_bytes=max_grammar_cache_bytes)
        self.constraints = self.compiler.constraints  # the one cache of compiled grammars
        self._stop_words = {}  # bitmask word -> bits of stop tokens in it
        for t in self.stop_ids:
            self._stop_words[t // 32] = self._stop_words.get(t // 32, 0) | 1 << (t % 32)
        self._kv_ids: list[int] = []  # the tokens whose keys and values the KV cache holds
        self._interrupts = 0  # interrupt_generate calls so far; jobs made before the last one stop
        self._turn = threading.Lock()  # held by the job using the model's state
        self._turn_thread: int | None = None
        self._last: dict = {}
        self.chat = _Namespace(completions=ChatFace(self))
        self.completions = TextFace(self)

    def reload(self, model) -> None:
        """Loads `model` (an id of `models`, or a built model folder) in place of the current one, on
        the same backend with the same options; the conversation and the grammar cache start empty
        (another vocabulary). An id that is neither raises ModelNotFoundError naming the ids there are."""
        if str(model) not in self.models and not (Path(model) / "manifest.json").exists():
            available = ", ".join(self.models) or "none"
            raise ModelNotFoundError(f"model {str(model)!r} is neither in the engine's models (available: {available}) "
                                     "nor a built model folder (`python3 build.py model --out DIR` makes one)")
        self._take_turn()  # the running job ends first: the model's state changes under no job
        turn = self._turn
        try:
            self.__init__(model, backend=self.executor.backend, models=self.models, **self._options)
        finally:
            self._turn = turn  # the one lock stays, so jobs waiting on it wake to the new model
            self._give_turn()

    def _stop_ids(self) -> tuple[int, ...]:
        ids = {self.tokenizer.eos_token_id} if self.tokenizer.eos_token_id is not None else set()
        ids |= {self.tokenizer.token_to_id(t) for t in self.template.stop_tokens} - {None}
        return tuple(sorted(ids))

    # ---- public verbs -------------------------------------------------------------------

    def reset_chat(self) -> None:
        """Forget the conversation held in the KV cache (the next request prefills from scratch)."""
        self._kv_ids = []
        self.executor.reset()

    def interrupt_generate(self) -> None:
        """Stop the generation in progress after its current token, and every job already made but not
        yet run (an open stream not yet read); they end with finish_reason "abort". Later jobs run."""
        self._interrupts += 1

    def check_turn(self) -> None:
        """Raise EngineBusyError if this thread's earlier job (an open stream) holds the model's state:
        a new request would wait for it forever. Faces call it before starting a request."""
        if self._turn.locked() and self._turn_thread == threading.get_ident():
            raise EngineBusyError("a stream from this thread is still open on this engine: read it to the end "
                                  "or close() it before the next request (requests never interleave on the "
                                  "model's state)")

    def _take_turn(self) -> None:
        self.check_turn()
        self._turn.acquire()
        self._turn_thread = threading.get_ident()

    def _give_turn(self) -> None:
        self._turn_thread = None
        self._turn.release()

    def _stopped(self, job: Job) -> bool:
        return job.cancellation.requested or job.epoch < self._interrupts

    def runtime_stats(self) -> dict:
        """The last request's speeds and grammar costs, and the grammar cache's counters."""
        return {**self._last, "grammar_cache": self.constraints.stats(), "adapter": self.executor.backend.adapter_info}

    def runtime_stats_text(self) -> str:
        s = self._last
        if not s:
            return "no request yet"
        return (f"prefill: {s['prefill_tokens_per_s']:.1f} tok/s, decode: {s['decode_tokens_per_s']:.1f} tok/s, "
                f"grammar init: {1000 * s['grammar_init_s']:.1f} ms, cache hits: {self.constraints.hits}")

    # ---- requests -> jobs -> events ---------------------------------------------------------

    async def run(self, job: Job):
        """Runs a job's choices: yields a Delta per piece of text, then one Done. A coroutine that
        suspends only on asynchronous backends (the browser's WebGPU). Holds the engine's turn from
        its first step to its last choice's end (see the module's docstring)."""
        self._take_turn()
        try:
            outcomes = []
            for index in range(job.config.n):
                out = Outcome()
                outcomes.append(out)
                seed = None if job.config.seed is None else job.config.seed + index
                async with aclosing(self._choice(job, seed, out)) as deltas:  # closed now, not at GC
                    async for text, logprobs in deltas:
                        yield Delta(index, text, logprobs)
            done = Done(outcomes, self._record(outcomes))
        finally:
            self._give_turn()
        yield done

    def chat_job(self, request: dict) -> Job:
        """A chat request (OpenAI / web-llm) validated, rendered with the model's template and
        tokenized; InvalidRequestError names a bad field."""
        req = parse_chat_request(request, vocab_size=self.executor.vocab_size, defaults=self.sampling_defaults)
        self._check_model(req.model)
        tools_on = bool(req.tools) and req.tool_choice != "none"
        variables = {} if req.enable_thinking is None else {"enable_thinking": req.enable_thinking}
        # What the request writes is text: a control token in it is read as text, never as a turn
        # (only the template writes control tokens).
        defuse = self.tokenizer.defuse
        if self.tool_syntax is not None:  # the template writes the tools and the calls' history itself
            tools = [_template_tool(t) for t in req.tools] if tools_on else None
            text = self.template.render(_strings_mapped(template_messages(req.messages), defuse),
                                        tools=_strings_mapped(tools, defuse), **variables)
            rf = self.tool_syntax.response_format(req.tools, req.tool_choice, parallel_tool_calls=req.parallel_tool_calls)
        else:  # Trellis's tool prompt and syntax, through the template's system message (SmolLM2)
            messages = render_tool_messages(req.messages, req.tools, req.tool_choice or "auto",
                                            parallel_tool_calls=req.parallel_tool_calls,
                                            default_system=self.template.default_system)
            text = self.template.render(_strings_mapped(messages, defuse), **variables)
            rf = tool_response_format(req.tools, req.tool_choice or "auto", parallel_tool_calls=req.parallel_tool_calls)
        if tools_on:
            constraint = self.constraints.read(rf, "tools")
        elif req.response_format is not None:
            constraint = self.constraints.read(req.response_format)
        else:
            constraint = None
        prompt = self.tokenizer.encode(text, add_special=True)  # BOS as the model asks, once
        return Job(req, prompt, constraint, epoch=self._interrupts)

    def parse_tool_calls(self, text: str, tools) -> tuple[str | None, list[dict]]:
        """(content, tool_calls) of a generated answer, in the syntax the request's calls were enforced in."""
        if self.tool_syntax is not None:
            return self.tool_syntax.parse(text, tools)
        return parse_tool_calls(text, tools)

    def completion_job(self, request: dict) -> Job:
        """A text-completion request validated and tokenized."""
        req = parse_completion_request(request, vocab_size=self.executor.vocab_size,
                                       defaults=self.sampling_defaults)
        self._check_model(req.model)
        constraint = self.constraints.read(req.response_format) if req.response_format is not None else None
        prompt = self.tokenizer.encode(req.prompt, add_special=True)
        if not prompt:
            raise InvalidRequestError("must not be empty", "prompt")
        return Job(req, prompt, constraint, epoch=self._interrupts)

    def _check_model(self, model) -> None:
        if model is not None and model != self.model_id:
            raise InvalidRequestError(f"this engine serves {self.model_id!r}, not {model!r}", "model")

    async def _choice(self, job: Job, seed, out: Outcome):
        """Generate one choice; yields (text, logprob entries) deltas and fills `out`."""
        prompt, config, constraint = job.prompt, job.config, job.constraint
        ex = self.executor
        started = time.perf_counter()
        budget = self._budget(len(prompt), config.max_tokens)
        out.prompt_tokens = len(prompt)
        # Keep the KV cache's shared prefix (multi-turn chat, n > 1); at least one token is prefilled
        # because its logits are needed.
        keep = _common_prefix(self._kv_ids, prompt, len(prompt) - 1)
        ex.rewind(keep) if keep <= ex.position else ex.reset()
        self._kv_ids = prompt[:keep]
        out.prefill_tokens = len(prompt) - keep

        # The whole prefill goes to the GPU in one submission (or its first part, while the prefill
        # kernels compile); the grammar is made ready meanwhile.
        # _kv_ids follows what was submitted, so that a request refused meanwhile (the grammar's
        # checks) leaves no claim on keys and values never computed.
        queued = keep + ex.submit_prefill(prompt[keep:])
        self._kv_ids = prompt[:queued]
        matcher = mask = None
        if constraint is not None:
            matcher, mask = self._ready_grammar(constraint, config, budget, out)
        while queued < len(prompt):
            await ex.collect(ex.submit_read())
            queued += ex.submit_prefill(prompt[queued:])
            self._kv_ids = prompt[:queued]
        logits = await ex.collect(ex.submit_read(mask))
        out.prefill_s = time.perf_counter() - started

        sampler = Sampler(config, seed)
        calls = constraint is not None and constraint.field == "tools"  # the tool syntax's constraint (chat_job)
        decoder = self.tokenizer.stream_decoder(skip_special=True, keep=self.tool_markers if calls else frozenset())
        stops = StopStrings(config.stop)
        banned = self.stop_ids if config.ignore_eos else ()
        out.logprobs = [] if config.logprobs else None
        greedy = None  # the GPU picks the tokens after the first (greedy.py)
        if budget > 1 and greedy_on_gpu(config, constraint, ex):
            greedy = GreedyPipeline(ex, budget - 1, self._all_but_stops() if banned else None)
        decode_started = time.perf_counter()
        try:
            async with aclosing(self._decode(job, logits, matcher, mask, sampler, decoder, stops, banned, greedy,
                                             budget, started, out)) as deltas:
                async for delta in deltas:
                    yield delta
        finally:  # also when the stream is closed mid-way: steps queued past the end are dropped
            if greedy is not None:
                greedy.close()
                ex.rewind(len(self._kv_ids))
                out.wait_s += greedy.wait_s
        tail = stops.push(decoder.flush()) + stops.flush()
        if tail:
            out.text += tail
            yield tail, None
        out.decode_s = time.perf_counter() - decode_started

    async def _decode(self, job, logits, matcher, mask, sampler, decoder, stops, banned, greedy, budget, started,
                      out):
        """The token loop of one choice (see _choice)."""
        ex, config = self.executor, job.config
        step = 0
        while True:
            if self._stopped(job):
                out.finish_reason = "abort"
                break
            if matcher is not None and self._only_stops(mask):  # the structure is complete
                out.finish_reason = "stop"
                break
            if greedy is not None and step:
                sampled = Sampled(await greedy.next())
            else:
                sampled = sampler.sample(logits, banned)
            token = sampled.token
            if step == 0:
                out.ttft_s = time.perf_counter() - started
            if token in self.stop_ids:
                out.finish_reason = "stop"
                break
            closing = None
            if matcher is not None:
                g0 = time.perf_counter()
                if not matcher.accept_token(token):
                    raise RuntimeBackendError(f"the grammar refused token {token}, which its own mask allowed")
                if config.complete_on_length:
                    closing = self._closing_if_needed(matcher, budget - step - 1)
                out.grammar_s += time.perf_counter() - g0
            if closing is not None:  # the token is rolled back; the structure is closed instead
                async with aclosing(self._emit(closing, matcher, decoder, stops, out)) as deltas:
                    async for delta in deltas:
                        yield delta
                out.finish_reason = "length"
                break
            sampler.accept(token)
            step += 1
            out.tokens.append(token)
            if out.logprobs is not None:
                out.logprobs.append((token, sampled.logprob, sampled.top))
            text = stops.push(decoder.push(token))
            if text:
                out.text += text
                yield text, out.logprobs[-1:] if out.logprobs is not None else None
            if stops.stopped:
                out.finish_reason = "stop"
                break
            if step >= budget:
                out.finish_reason = "length"
                break
            out.decode_steps += 1
            self._kv_ids.append(token)
            if greedy is not None:
                greedy.feed(token) if step == 1 else greedy.advance()
                continue
            if matcher is None:
                pending = ex.submit_decode(token, read=True)
            else:  # the next mask is filled while the GPU runs the step
                ex.submit_decode(token)
                g0 = time.perf_counter()
                matcher.fill_next_token_bitmask(mask)
                out.grammar_s += time.perf_counter() - g0
                pending = ex.submit_read(mask)
            w0 = time.perf_counter()
            logits = await ex.collect(pending)
            out.wait_s += time.perf_counter() - w0

    def _all_but_stops(self) -> array:
        """A bitmask allowing every token but the stop tokens (`ignore_eos` bans them)."""
        words = array("I", [0xFFFFFFFF]) * ((self.executor.vocab_size + 31) // 32)
        for w, bits in self._stop_words.items():
            words[w] &= ~bits & 0xFFFFFFFF
        return words

    def _ready_grammar(self, constraint: Constraint, config, budget: int, out: Outcome):
        """(matcher, first mask) for the request: compiled or taken from the cache."""
        g0 = time.perf_counter()
        grammar, out.grammar_hit = self.constraints.grammar(constraint)
        matcher = GrammarMatcher(grammar)
        mask = matcher.new_bitmask()
        matcher.fill_next_token_bitmask(mask)
        if not any(mask):
            raise InvalidRequestError("no text satisfies this format (the schema admits no value)", constraint.field)
        if config.complete_on_length:
            need = self._closing_cost(matcher, budget)
            if need is not None and need > budget:
                raise InvalidRequestError(f"the response format needs at least {need} tokens; max_tokens "
                                          f"allows {budget}", "max_tokens")
        out.grammar_init_s = time.perf_counter() - g0
        return matcher, mask

    def _budget(self, prompt_tokens: int, max_tokens: int | None) -> int:
        room = self.executor.context - prompt_tokens
        if room < 1:
            raise SequenceLengthError(f"the prompt has {prompt_tokens} tokens; the context window holds "
                                      f"{self.executor.context} (prompt plus output)")
        if max_tokens is None:
            return room
        if max_tokens > room:
            raise InvalidRequestError(f"{max_tokens} tokens do not fit: the prompt has {prompt_tokens} of the "
                                      f"{self.executor.context}-token context window", "max_tokens")
        return max_tokens

    def _only_stops(self, mask) -> bool:
        """Whether the mask allows nothing but stop tokens (the grammar is complete)."""
        if mask.count(0) < len(mask) - len(self._stop_words):
            return False
        return all(not (word & 0xFFFFFFFF & ~self._stop_words.get(w, 0)) for w, word in enumerate(mask) if word)

    # ---- complete_on_length ---------------------------------------------------------------

    def _closing_cost(self, matcher, room: int) -> int | None:
        """Tokens needed to complete the structure from here (None: it cannot be completed).
        Exact when above `room`; at or below it, the byte count stands in (byte-level BPE spends
        at most one token per byte), which spares tokenizing at every step."""
        data = matcher.shortest_completion()
        if data is None:
            return None
        return len(data) if len(data) <= room else len(self.tokenizer.encode_bytes(data))

    def _closing_if_needed(self, matcher, remaining: int) -> list[int] | None:
        """None while sampling may go on after the token just accepted; else, with that token rolled
        back, the tokens that close the structure. They fit: before the token they did (checked
        at the start and kept true at every step)."""
        need = self._closing_cost(matcher, remaining)
        if need is None or need <= remaining:
            return None
        matcher.rollback(1)
        return self.tokenizer.encode_bytes(matcher.shortest_completion() or b"")

    async def _emit(self, tokens, matcher, decoder, stops, out):
        for token in tokens:
            matcher.accept_token(token)
            out.tokens.append(token)
            text = stops.push(decoder.push(token))
            if text:
                out.text += text
                yield text, None

    # ---- statistics -----------------------------------------------------------------------

    def _record(self, outcomes: list[Outcome]) -> dict:
        first = outcomes[0]
        decoded = sum(len(o.tokens) for o in outcomes)
        steps = sum(o.decode_steps for o in outcomes)
        decode_s = sum(o.decode_s for o in outcomes)
        grammar_tokens = decoded if first.grammar_hit is not None else 0
        self._last = {
            "prefill_tokens_per_s": first.prefill_tokens / first.prefill_s if first.prefill_s else 0.0,
            "decode_tokens_per_s": steps / decode_s if decode_s else 0.0,
            "time_to_first_token_s": first.ttft_s,
            "time_per_output_token_s": decode_s / decoded if decoded else 0.0,
            "e2e_latency_s": sum(o.prefill_s + o.decode_s for o in outcomes),
            "prefill_tokens": first.prefill_tokens,
            "gpu_wait_per_step_s": sum(o.wait_s for o in outcomes) / steps if steps else 0.0,
            "grammar_init_s": first.grammar_init_s,
            "grammar_per_token_s": sum(o.grammar_s for o in outcomes) / grammar_tokens if grammar_tokens else 0.0,
            "grammar_cache_hit": first.grammar_hit,
        }
        return self._last


def marker_ids(tokenizer: Tokenizer, syntax) -> frozenset:
    """Ids of the control tokens a tool syntax writes (Mistral's [TOOL_CALLS]): the model writes
    them as one token, so they are text to the grammar (which allows them only where the syntax has
    them) and to a tool call's decoder."""
    texts = syntax.markers if syntax is not None else ()
    return frozenset(i for t in texts if (i := tokenizer.token_to_id(t)) is not None and i in tokenizer.special_ids)


def grammar_vocabulary(tokenizer: Tokenizer, stop_ids, vocab_size: int, markers=frozenset()) -> Vocabulary:
    """The grammar's view of the model's tokens: control tokens are never text, but `markers`."""
    return Vocabulary([tokenizer.token_bytes(i) for i in range(tokenizer.vocab_size)],
                      special_ids=set(tokenizer.special_ids) - markers, stop_ids=stop_ids, vocab_size=vocab_size)


def _template_tool(tool: dict) -> dict:
    """A request's tool as templates read it: `parameters` always an object schema (templates such as
    Hermes 3's read `parameters.properties`), no Trellis-only fields."""
    fn = tool["function"]
    out = {"name": fn["name"]}
    if "description" in fn:
        out["description"] = fn["description"]
    out["parameters"] = arguments_schema(fn)
    return {"type": "function", "function": out}


def _strings_mapped(value, fn):
    """`value` (JSON-like: dicts, lists, strings; nested as deep as requests allow) with `fn`
    applied to every string but dict keys."""
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {k: _strings_mapped(v, fn) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strings_mapped(v, fn) for v in value]
    return value


def _common_prefix(a: list[int], b: list[int], limit: int) -> int:
    n = min(len(a), len(b), limit)
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class _Namespace:
    def __init__(self, **kw):
        self.__dict__.update(kw)


class AsyncEngine(Engine):
    """The same engine for asynchronous backends (the browser): `await ...create(...)`, and with
    `stream=True` an async iterator of chunks."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.chat = _Namespace(completions=AsyncFace(ChatFace(self)))
        self.completions = AsyncFace(TextFace(self))
