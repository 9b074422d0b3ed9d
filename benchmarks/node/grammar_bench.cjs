'use strict';
// Grammar benchmark, wasm side: every wasm engine in this one node process, timed the same way as
// the native side of benchmarks/grammar_bench.py (which writes the job file and reads our stdout).
//
//   node --expose-gc benchmarks/node/grammar_bench.cjs build/bench-node/grammar_job.json
//
// Job: {repo_root, gguf_path, web_xgrammar_cjs, web_xgrammar_version, vocab_bytelevel (the GGUF's
// byte-level token strings), vocab_size, control_ids, eos_id, reps,
// grammars: [{name, kind: "builtin_json" | "ebnf" | "regex" | "json_schema", text, tokens}]}.
// Output (stdout, JSON): {node, web_xgrammar, setup: {engine: text}, results: [{grammar, engine,
// version, tokens, compile_ms: [], first_ms: [], mask_us: [], error, missing}]}.
//
// Per rep: compile (grammar text -> compiled grammar), first mask (matcher construction + first
// mask), then the masks after tokens 1..n of the document (the last must allow EOS). At every step
// the mask must allow the next token, no control token but EOS may be allowed, the matcher must
// accept the token; after the document EOS must be allowed, accepted, and terminate the matcher.

const fs = require('fs');
const path = require('path');
const { pathToFileURL } = require('url');

const clock = () => process.hrtime.bigint();
const msSince = (t0, t1) => Number(t1 - t0) / 1e6;
const usSince = (t0, t1) => Number(t1 - t0) / 1e3;

function allowed(mask, token) {
  return ((mask[token >>> 5] >>> (token & 31)) & 1) === 1;
}

// ---------------------------------------------------------------------------------------------
// web-xgrammar
// ---------------------------------------------------------------------------------------------

async function webXGrammarEngine(job) {
  const xg = require(job.web_xgrammar_cjs);
  const control = new Set(job.control_ids);
  // Byte-level strings as the GGUF stores them; control tokens other than EOS as "", which
  // xgrammar treats as special (never allowed); EOS is the stop token.
  const vocab = job.vocab_bytelevel.map((t, i) => (control.has(i) && i !== job.eos_id ? '' : t));
  const info = await xg.TokenizerInfo.createTokenizerInfo(
    vocab, 'byte_level', false, job.vocab_size, [job.eos_id]);
  // Cache off, so that every rep is a real compile (the compiler is single-threaded in wasm).
  const compiler = await xg.GrammarCompiler.createGrammarCompiler(info, false);
  return {
    name: 'web-xgrammar (wasm, node)',
    version: job.web_xgrammar_version,
    stopIds: [job.eos_id],
    async compile(spec) {
      if (spec.kind === 'builtin_json') return compiler.compileBuiltinJSONGrammar();
      if (spec.kind === 'ebnf') return compiler.compileGrammar(spec.text);
      if (spec.kind === 'json_schema') return compiler.compileJSONSchema(spec.text);
      // No regex entry point in the JS API: its structural-tag "regex" format compiles one.
      return compiler.compileStructuralTag({ type: 'structural_tag',
        format: { type: 'regex', pattern: spec.text } });
    },
    async matcher(compiled) { return xg.GrammarMatcher.createGrammarMatcher(compiled); },
    async fill(m) { return m.getNextTokenBitmask(); },  // a fresh Int32Array each call
    accept(m, token) { return m.acceptToken(token); },
    terminated(m) { return m.isTerminated(); },
    dispose(compiled, m) { if (m) m.dispose(); if (compiled) compiled.dispose(); },
  };
}

// ---------------------------------------------------------------------------------------------
// Trellis wasm: web/grammar.js (the wasm core) + the Python front-ends under Pyodide, in this
// process (benchmarks/node/trellis_pyodide.cjs). compile() = grammar text -> Python front-end ->
// IR -> wasm core, as the browser will run it. Per-token masks, by TRELLIS_WASM_MATCHER:
//   js (default)  a grammar.js GrammarMatcher on the compiled grammar's handle: direct export
//                 calls, the mask copied into a reused Int32Array;
//   python        trellis.grammar.GrammarMatcher in Pyodide (PyodideTransport), the mask written
//                 into a Python array('i'); JS then reads the core's copy without converting.
// ---------------------------------------------------------------------------------------------

async function trellisWasmEngine(job) {
  const glue = path.join(job.repo_root, 'web', 'grammar.js');
  if (!fs.existsSync(glue)) {
    throw new Unavailable('web/grammar.js does not exist yet; the Trellis wasm row awaits it');
  }
  const mode = process.env.TRELLIS_WASM_MATCHER || 'js';
  if (mode !== 'js' && mode !== 'python') throw new Error(`TRELLIS_WASM_MATCHER=${mode}: use js or python`);
  const { loadTrellisPyodide, mountHostDir, jsGrammarOf } = require('./trellis_pyodide.cjs');
  const { pyodide, version: pyodideVersion, grammar, core, py } = await loadTrellisPyodide(job.repo_root);
  // The vocabulary as the browser gets it: Vocabulary.from_gguf in Python, here reading the GGUF
  // through a node mount instead of fetched bytes.
  const dir = mountHostDir(pyodide, path.dirname(job.gguf_path), '/gguf');
  const compiler = py.makeCompiler(`${dir}/${path.basename(job.gguf_path)}`);
  const vocabSize = compiler.vocab.vocab_size;
  const stopIds = compiler.vocab.stop_ids.toJs();
  const trellisVersion = pyodide.runPython('import trellis; trellis.__version__');
  if (vocabSize !== job.vocab_size) throw new Error(`vocabulary size ${vocabSize} != ${job.vocab_size}`);
  const words = (vocabSize + 31) >>> 5;
  return {
    name: `Trellis (wasm, node, ${mode === 'js' ? 'JS' : 'Python'} matcher)`,
    version: `${trellisVersion}, Pyodide ${pyodideVersion}`,
    stopIds,
    async compile(spec) { return py.compileSpec(compiler, spec.kind, spec.text); },  // a PyProxy
    async matcher(compiled) {
      if (mode === 'python') return { py: py.PyMatcher(compiled) };
      return { js: new grammar.GrammarMatcher(jsGrammarOf(core, compiled, py, vocabSize)),
        mask: new Int32Array(words) };
    },
    async fill(m) {
      if (m.js) return m.js.fill_next_token_bitmask(m.mask);
      const ptr = m.py.fill();  // first: the call may grow (and detach) the wasm memory
      return new Int32Array(core.memory.buffer, ptr, words);
    },
    accept(m, token) { return m.js ? m.js.accept_token(token) : m.py.accept(token); },
    terminated(m) { return m.js ? m.js.is_terminated() : m.py.terminated(); },
    dispose(compiled, m) {
      // Matcher first: the Python CompiledGrammar frees its handle when its last reference goes.
      if (m && m.js) m.js.dispose();
      if (m && m.py) { m.py.close(); m.py.destroy(); }
      if (compiled) compiled.destroy();
    },
  };
}

class Unavailable extends Error {}

// ---------------------------------------------------------------------------------------------
// One timing loop for every engine
// ---------------------------------------------------------------------------------------------

async function runGrammar(engine, spec, job) {
  const res = { grammar: spec.name, engine: engine.name, version: engine.version,
    tokens: spec.tokens.length, compile_ms: [], first_ms: [], mask_us: [], error: null };
  const control = job.control_ids.filter((i) => !engine.stopIds.includes(i));
  const eos = job.eos_id;
  const check = (mask, step, token) => {
    const leak = control.filter((i) => allowed(mask, i));
    if (leak.length) throw new Error(`step ${step}: control tokens ${leak} allowed`);
    if (!allowed(mask, token)) throw new Error(`step ${step}: mask refuses document token ${token}`);
  };
  for (let rep = 0; rep < job.reps; rep++) {
    if (global.gc) global.gc();
    let compiled = null;
    let m = null;
    try {
      let t0 = clock();
      compiled = await engine.compile(spec);
      const t1 = clock();
      m = await engine.matcher(compiled);
      let mask = await engine.fill(m);
      const t2 = clock();
      res.compile_ms.push(msSince(t0, t1));
      res.first_ms.push(msSince(t1, t2));
      for (let step = 0; step < spec.tokens.length; step++) {
        const token = spec.tokens[step];
        if (step) {
          t0 = clock();
          mask = await engine.fill(m);
          res.mask_us.push(usSince(t0, clock()));
        }
        check(mask, step, token);
        if (!engine.accept(m, token)) throw new Error(`step ${step}: acceptToken(${token}) refused`);
      }
      t0 = clock();
      mask = await engine.fill(m);
      res.mask_us.push(usSince(t0, clock()));
      if (!allowed(mask, eos)) throw new Error('end of document: mask refuses EOS');
      if (!engine.accept(m, eos)) throw new Error('end of document: EOS refused');
      if (!engine.terminated(m)) throw new Error('end of document: not terminated after EOS');
    } catch (e) {
      res.error = `${e.name}: ${String(e.message).split('\n')[0].slice(0, 160)}`;
      break;
    } finally {
      engine.dispose(compiled, m);
    }
  }
  return res;
}

async function main() {
  const job = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  const out = { node: process.versions.node, web_xgrammar: job.web_xgrammar_version,
    setup: {}, results: [] };
  for (const make of [trellisWasmEngine, webXGrammarEngine]) {
    const t0 = clock();
    let engine;
    try {
      engine = await make(job);
    } catch (e) {
      const name = make === trellisWasmEngine ? 'Trellis (wasm, node)' : 'web-xgrammar (wasm, node)';
      const why = `${e instanceof Unavailable ? '' : e.name + ': '}${e.message}`;
      out.setup[name] = `unavailable: ${why}`;
      for (const spec of job.grammars) {
        out.results.push({ grammar: spec.name, engine: name, version: '', tokens: spec.tokens.length,
          compile_ms: [], first_ms: [], mask_us: [],
          error: e instanceof Unavailable ? null : why, missing: e instanceof Unavailable ? why : null });
      }
      continue;
    }
    out.setup[`${engine.name} ${engine.version}`] =
      `${msSince(t0, clock()).toFixed(0)} ms (module load, wasm instantiation, tokenizer info)`;
    for (const spec of job.grammars) out.results.push(await runGrammar(engine, spec, job));
  }
  process.stdout.write(JSON.stringify(out));
}

main().catch((e) => { console.error(e && e.stack ? e.stack : e); process.exit(1); });
