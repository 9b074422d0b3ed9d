// Trellis grammar core in the browser, a Web Worker or node 20: ES-module glue around
// build/grammar/wasm/trellis_grammar.wasm (the C++ core, C ABI in
// kernels/grammar/include/trellis_grammar.h).
//
//   import { loadGrammarCore, GrammarCompiler, GrammarMatcher } from './grammar.js';
//   const core = await loadGrammarCore('trellis_grammar.wasm');
//   const compiler = new GrammarCompiler(core, { tokenBytes, vocabSize, specialIds, stopIds });
//   const compiled = compiler.compileIR(words);   // Int32Array from trellis.grammar.ir.serialize
//   const matcher = new GrammarMatcher(compiled);
//   const mask = matcher.new_bitmask();
//   matcher.fill_next_token_bitmask(mask);        // bit i % 32 of word i / 32: token i allowed
//   matcher.accept_token(id);
//
// Loading also sets globalThis.trellisGrammarCore = {exports, memory}, which the Python binding
// under Pyodide (py/trellis/grammar/transport_wasm.py, PyodideTransport) drives directly: the
// Python front-ends (EBNF, regex, JSON) and these JS classes then share one core.
//
// Memory: every object owns a handle in the module's heap; call dispose() when done (a compiled
// grammar must outlive its matchers, a compiler its grammars). Method names follow the Python
// API (py/trellis/grammar/matcher.py), which follows xgrammar's matcher verbs.

export const ERR_ARGUMENT = 1;  // a bad argument (null handle, id out of range, short buffer)
export const ERR_IR = 2;        // malformed IR words
export const ERR_GRAMMAR = 3;   // well-formed IR that is not a usable grammar
export const ERR_LIMIT = 4;     // a size limit was exceeded
export const NO_COMPLETION = -100;  // tg_matcher_shortest_completion: the matcher has none

/** An error reported by the core: `code` is one of ERR_*, `rule` the rule index named (or -1). */
export class GrammarError extends Error {
  constructor(message, code = 0, rule = -1) {
    super(message);
    this.name = 'GrammarError';
    this.code = code;
    this.rule = rule;
  }
}

const utf8 = new TextEncoder();
const isNode = typeof process !== 'undefined' && !!(process.versions && process.versions.node);

// The module is a wasm32-wasi reactor that only links a few WASI functions (stdio it never uses
// on the happy path). Stub every WASI import it declares: fd_write goes to the console, anything
// else answers ENOSYS, proc_exit throws.
function wasiStubs(module, getMemory) {
  const ENOSYS = 52;
  const pending = { 1: '', 2: '' };
  const impl = {
    fd_write(fd, iovs, iovsLen, nwrittenPtr) {
      const mem = getMemory();
      const view = new DataView(mem.buffer);
      let total = 0;
      let text = '';
      for (let i = 0; i < iovsLen; i++) {
        const ptr = view.getUint32(iovs + 8 * i, true);
        const len = view.getUint32(iovs + 8 * i + 4, true);
        text += new TextDecoder().decode(new Uint8Array(mem.buffer, ptr, len));
        total += len;
      }
      if (fd === 1 || fd === 2) {  // line-buffered console output
        const lines = (pending[fd] + text).split('\n');
        pending[fd] = lines.pop();
        for (const line of lines) (fd === 2 ? console.error : console.log)(line);
      }
      view.setUint32(nwrittenPtr, total, true);
      return 0;
    },
    fd_close() { return 0; },
    fd_seek() { return 70; },  // ESPIPE: stdio is not seekable
    proc_exit(code) { throw new Error(`grammar core called proc_exit(${code})`); },
  };
  const wasi = {};
  for (const imp of WebAssembly.Module.imports(module)) {
    if (imp.module !== 'wasi_snapshot_preview1' || imp.kind !== 'function') {
      throw new Error(`grammar core imports ${imp.module}.${imp.name}, which this glue lacks`);
    }
    wasi[imp.name] = impl[imp.name] || (() => ENOSYS);
  }
  return { wasi_snapshot_preview1: wasi };
}

async function compileSource(source) {
  if (source instanceof WebAssembly.Module) return source;
  if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) {
    return WebAssembly.compile(source);
  }
  const url = String(source);
  // node 20's fetch has no file: URLs: read local files from disk.
  if (isNode && !/^(https?|data|blob):/i.test(url)) {
    const { readFile } = await import('node:fs/promises');
    const file = url.startsWith('file:') ? new URL(url) : url;
    return WebAssembly.compile(await readFile(file));
  }
  const response = await fetch(url);
  if (!response.ok) throw new Error(`grammar core: fetching ${url} failed: ${response.status}`);
  if (WebAssembly.compileStreaming &&
      (response.headers.get('content-type') || '').startsWith('application/wasm')) {
    return WebAssembly.compileStreaming(response);
  }
  return WebAssembly.compile(await response.arrayBuffer());
}

/**
 * Instantiate the grammar core. `source`: a URL or path string, URL object, ArrayBuffer /
 * Uint8Array of the .wasm file, or a compiled WebAssembly.Module (to share one between workers).
 */
export async function loadGrammarCore(source) {
  const module = await compileSource(source);
  let memory = null;
  const instance = await WebAssembly.instantiate(module, wasiStubs(module, () => memory));
  const exports = instance.exports;
  memory = exports.memory;
  exports._initialize();  // reactor: run C++ static constructors once
  globalThis.trellisGrammarCore = { exports, memory };
  return new GrammarCore(exports);
}

/** The instantiated module plus helpers to move bytes in and out of its heap. */
export class GrammarCore {
  constructor(exports) {
    this.exports = exports;
    this.memory = exports.memory;
  }

  // Fresh views each time: memory.grow() detaches the previous ArrayBuffer.
  get u8() { return new Uint8Array(this.memory.buffer); }

  /** Copy bytes into a new heap block; the caller frees it with free(). */
  alloc(bytes) {
    const ptr = this.exports.tg_alloc(Math.max(1, bytes.byteLength)) >>> 0;
    if (!ptr) throw new GrammarError('grammar core: out of wasm memory', ERR_LIMIT);
    this.u8.set(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength), ptr);
    return ptr;
  }

  free(ptr) { if (ptr) this.exports.tg_free(ptr); }

  /** Run fn(ptr0, ptr1, ...) with each typed array copied into the heap, then free them. */
  withBuffers(arrays, fn) {
    const ptrs = [];
    try {
      for (const a of arrays) ptrs.push(this.alloc(a));
      return fn(...ptrs);
    } finally {
      for (const p of ptrs) this.free(p);
    }
  }

  readCString(ptr) {
    ptr >>>= 0;
    if (!ptr) return '';
    const heap = this.u8;
    let end = ptr;
    while (end < heap.length && heap[end] !== 0) end++;
    return new TextDecoder().decode(heap.subarray(ptr, end));
  }

  /** The core's last error as a GrammarError (rule names, when given, prefix the message). */
  lastError(ruleNames) {
    const e = this.exports;
    const code = e.tg_last_error_code();
    const rule = e.tg_last_error_rule();
    let message = this.readCString(e.tg_last_error());
    if ((code === ERR_IR || code === ERR_GRAMMAR) && rule >= 0 && ruleNames && ruleNames[rule]) {
      message = `rule '${ruleNames[rule]}': ${message}`;
    }
    return new GrammarError(message, code, rule);
  }

  /** A non-negative result, or throw the core's error. */
  checked(result) {
    if (result < 0) throw this.lastError();
    return result;
  }
}

const asBytes = (t) => (typeof t === 'string' ? utf8.encode(t) : t);

/**
 * The Python front-ends running in a Pyodide instance where `trellis` is importable, as a
 * function (kind, source) -> {words, ruleNames}; Python's GrammarError becomes a JS GrammarError.
 */
export function pyodideFrontEnd(pyodide) {
  const toIr = pyodide.pyimport('trellis.grammar.frontends').to_ir;
  return (kind, source) => {
    let result;
    try {
      result = toIr(kind, source);
    } catch (e) {
      if (e.type === 'GrammarError' || e.type === 'GrammarLimitError') {
        // The traceback's last line is "trellis.errors.GrammarError: <message>".
        const last = String(e.message).trim().split('\n').pop();
        throw new GrammarError(last.slice(last.indexOf(': ') + 2), e.type === 'GrammarLimitError' ? ERR_LIMIT : ERR_GRAMMAR, -1);
      }
      throw e;
    }
    try {
      const [bytes, names] = result.toJs();
      return { words: new Int32Array(bytes.slice().buffer), ruleNames: names };
    } finally {
      result.destroy();
    }
  };
}

/** Compiles grammars (IR words) for one vocabulary. */
export class GrammarCompiler {
  /**
   * tokenBytes: Uint8Array (or string) per token id; ids in [tokenBytes.length, vocabSize) are
   * padding. specialIds never appear in text; stopIds are allowed only where the grammar ends.
   */
  constructor(core, { tokenBytes, vocabSize = tokenBytes.length, specialIds = [], stopIds = [],
    frontEnd = null }) {
    this.core = core;
    this.frontEnd = frontEnd;
    this.vocabSize = vocabSize;
    this.bitmaskWords = (vocabSize + 31) >>> 5;
    const tokens = tokenBytes.map(asBytes);
    const offsets = new Int32Array(tokens.length + 1);
    for (let i = 0; i < tokens.length; i++) offsets[i + 1] = offsets[i] + tokens[i].length;
    const data = new Uint8Array(offsets[tokens.length]);
    tokens.forEach((t, i) => data.set(t, offsets[i]));
    const sp = Int32Array.from(specialIds);
    const st = Int32Array.from(stopIds);
    this.handle = core.withBuffers([data, offsets, sp, st], (d, o, s, t) =>
      core.exports.tg_vocab_new(vocabSize, d, o, tokens.length, s, sp.length, t, st.length) >>> 0);
    if (!this.handle) throw core.lastError();
  }

  /**
   * Grammar text through the Python front-ends (see pyodideFrontEnd), same verbs as Python.
   * Needs the `frontEnd` option; compileIR needs nothing but IR words.
   */
  compile_grammar(ebnf) { return this.compileText('ebnf', ebnf); }
  compile_regex(pattern) { return this.compileText('regex', pattern); }
  compile_builtin_json() { return this.compileText('builtin_json', ''); }

  compileText(kind, source) {
    if (!this.frontEnd) throw new Error('GrammarCompiler: grammar text needs the frontEnd option (pyodideFrontEnd)');
    const { words, ruleNames } = this.frontEnd(kind, source);
    return this.compileIR(words, ruleNames);
  }

  /** words: Int32Array (or array of ints) from trellis.grammar.ir.serialize; ruleNames optional. */
  compileIR(words, ruleNames = null) {
    const core = this.core;
    const w = words instanceof Int32Array ? words : Int32Array.from(words);
    const started = performance.now();
    const handle = core.withBuffers([w], (p) =>
      core.exports.tg_grammar_compile(this.handle, p, w.length) >>> 0);
    if (!handle) throw core.lastError(ruleNames);
    return new CompiledGrammar(this, handle, performance.now() - started);
  }

  dispose() {
    if (this.handle) this.core.exports.tg_vocab_free(this.handle);
    this.handle = 0;
  }
}

/** A grammar compiled for a vocabulary; its token-mask cache is shared by its matchers. */
export class CompiledGrammar {
  constructor(compiler, handle, compileMs) {
    this.compiler = compiler;
    this.core = compiler.core;
    this.handle = handle;
    this.compileMs = compileMs;
  }

  /** Builds cold token-mask caches now (up to maxStates; all when negative); returns the count. */
  warm(maxStates = -1) {
    const built = this.core.exports.tg_grammar_warm(this.handle, maxStates);
    if (built < 0) throw this.core.lastError();
    return built;
  }

  stats() {
    const stat = (i) => Number(this.core.exports.tg_grammar_stat(this.handle, i));  // i64: BigInt
    return { rules: stat(0), states: stat(1), mask_caches: stat(2), mask_cache_bytes: stat(3) };
  }

  dispose() {
    if (this.handle) this.core.exports.tg_grammar_free(this.handle);
    this.handle = 0;
  }
}

/** Follows one generation through a compiled grammar, token by token. */
export class GrammarMatcher {
  constructor(grammar) {
    this.grammar = grammar;
    this.core = grammar.core;
    this.vocabSize = grammar.compiler.vocabSize;
    this.bitmaskWords = grammar.compiler.bitmaskWords;
    const e = this.core.exports;
    this.handle = e.tg_matcher_new(grammar.handle) >>> 0;
    if (!this.handle) throw this.core.lastError();
    // The core writes masks here; fill_next_token_bitmask copies them out.
    this.maskPtr = e.tg_alloc(4 * this.bitmaskWords) >>> 0;
    if (!this.maskPtr) throw new GrammarError('grammar core: out of wasm memory', ERR_LIMIT);
  }

  new_bitmask() { return new Int32Array(this.bitmaskWords); }

  /** Fill `bitmask` (Int32Array / Uint32Array of >= bitmaskWords words; a new one if omitted). */
  fill_next_token_bitmask(bitmask = this.new_bitmask()) {
    if (bitmask.length < this.bitmaskWords) {
      throw new GrammarError(`the bitmask needs ${this.bitmaskWords} int32 words`, ERR_ARGUMENT);
    }
    const n = this.bitmaskWords;
    this.core.checked(this.core.exports.tg_matcher_fill_mask(this.handle, this.maskPtr, n));
    bitmask.set(new Int32Array(this.core.memory.buffer, this.maskPtr, n));
    return bitmask;
  }

  /** The core's own mask words (a view into wasm memory, valid until the next call). */
  fill_next_token_bitmask_view() {
    const n = this.bitmaskWords;
    this.core.checked(this.core.exports.tg_matcher_fill_mask(this.handle, this.maskPtr, n));
    return new Int32Array(this.core.memory.buffer, this.maskPtr, n);
  }

  /** true if accepted, false if refused (state unchanged); throws on a bad id. */
  accept_token(tokenId) {
    return this.core.checked(this.core.exports.tg_matcher_accept_token(this.handle, tokenId)) === 1;
  }

  accept_string(text) {
    const data = asBytes(text);
    const core = this.core;
    return core.checked(core.withBuffers([data], (p) =>
      core.exports.tg_matcher_accept_bytes(this.handle, p, data.length))) === 1;
  }

  /** Undo the last n accepted tokens or strings. */
  rollback(n = 1) { this.core.checked(this.core.exports.tg_matcher_rollback(this.handle, n)); }

  is_terminated() { return this.core.checked(this.core.exports.tg_matcher_is_terminated(this.handle)) === 1; }

  /** Whether the text so far is complete (a stop token would be accepted now). */
  can_terminate() { return this.core.checked(this.core.exports.tg_matcher_can_terminate(this.handle)) === 1; }

  get history_length() { return this.core.checked(this.core.exports.tg_matcher_history_length(this.handle)); }

  reset() { this.core.exports.tg_matcher_reset(this.handle); }

  /** The bytes forced next by the grammar (at most cap). */
  find_jump_forward_bytes(cap = 4096) {
    const core = this.core;
    const p = core.exports.tg_alloc(Math.max(1, cap)) >>> 0;
    try {
      const n = core.checked(core.exports.tg_matcher_jump_forward(this.handle, p, cap));
      return core.u8.slice(p, p + n);
    } finally {
      core.free(p);
    }
  }

  /**
   * A shortest byte string after which the text is complete (empty if it already is), or null
   * once terminated: forced when the token budget runs out, so truncated output still parses.
   */
  shortestCompletion() {
    const core = this.core;
    for (let cap = 256; ;) {  // the core says how long the string is; a short buffer asks again
      const p = core.exports.tg_alloc(cap) >>> 0;
      if (!p) throw new GrammarError('grammar core: out of wasm memory', ERR_LIMIT);
      try {
        const n = core.exports.tg_matcher_shortest_completion(this.handle, p, cap);
        if (n === NO_COMPLETION) return null;
        if (core.checked(n) <= cap) return core.u8.slice(p, p + n);
        cap = n;
      } finally {
        core.free(p);
      }
    }
  }

  /** The text forced next by the grammar, cut to whole UTF-8 characters. */
  find_jump_forward_string() {
    const data = this.find_jump_forward_bytes();
    const strict = new TextDecoder('utf-8', { fatal: true });
    for (let cut = data.length; cut >= Math.max(0, data.length - 3); cut--) {  // as in Python
      try { return strict.decode(data.subarray(0, cut)); } catch { /* cut a partial char */ }
    }
    return '';
  }

  dispose() {
    if (this.handle) this.core.exports.tg_matcher_free(this.handle);
    this.core.free(this.maskPtr);
    this.handle = this.maskPtr = 0;
  }
}
