// The wasm grammar core through web/grammar.js must behave exactly like the native core.
//
//   python web/tests/make_fixtures.py     # native results -> build/test-fixtures/grammar_wasm.json
//   node --test web/tests/
//
// (tests/grammar/test_wasm_node.py does both.) Env: TRELLIS_GRAMMAR_WASM (the module),
// TRELLIS_GRAMMAR_FIXTURES (the fixture file). Without either file the tests are skipped.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

import {
  loadGrammarCore, GrammarCompiler, GrammarMatcher, GrammarError, ERR_ARGUMENT, ERR_IR,
} from '../grammar.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const wasmPath = process.env.TRELLIS_GRAMMAR_WASM ||
  path.join(root, 'build', 'grammar', 'wasm', 'trellis_grammar.wasm');
const fixturePath = process.env.TRELLIS_GRAMMAR_FIXTURES ||
  path.join(root, 'build', 'test-fixtures', 'grammar_wasm.json');
const missing = [wasmPath, fixturePath].filter((p) => !fs.existsSync(p));
const skip = missing.length ? `missing ${missing.join(', ')} (run tests/grammar/test_wasm_node.py)` : false;

const fromHex = (h) => Uint8Array.from(Buffer.from(h, 'hex'));
const fixtures = skip ? { vocabs: {}, cases: [] } : JSON.parse(fs.readFileSync(fixturePath, 'utf8'));
let core = null;
const compilers = {};

async function compilerFor(name) {
  if (!core) core = await loadGrammarCore(wasmPath);
  if (!compilers[name]) {
    const v = fixtures.vocabs[name];
    compilers[name] = new GrammarCompiler(core, { tokenBytes: v.tokenBytes.map(fromHex),
      vocabSize: v.vocabSize, specialIds: v.specialIds, stopIds: v.stopIds });
  }
  return compilers[name];
}

function diffMasks(got, want) {
  const ids = [];
  for (let w = 0; w < want.length && ids.length < 10; w++) {
    const x = got[w] ^ want[w];
    for (let b = 0; b < 32; b++) if ((x >>> b) & 1) ids.push(`${w * 32 + b}${(want[w] >>> b) & 1 ? '-' : '+'}`);
  }
  return ids.join(' ');
}

// Replay one recorded operation; returns a description of any mismatch.
function replay(m, op, core) {
  const where = `op ${op.op}${op.id !== undefined ? `(${op.id})` : ''}`;
  let result;
  try {
    switch (op.op) {
      case 'mask': {
        const got = m.fill_next_token_bitmask();
        const want = new Int32Array(Uint8Array.from(Buffer.from(op.words, 'base64')).buffer);
        assert.equal(got.length, want.length, `${where}: mask length`);
        if (!got.every((x, i) => x === want[i])) {
          assert.fail(`${where}: masks differ at tokens (+ extra, - missing) ${diffMasks(got, want)}`);
        }
        // The zero-copy view gives the same words.
        assert.deepEqual(Array.from(m.fill_next_token_bitmask_view()), Array.from(want), `${where}: view`);
        break;
      }
      case 'accept_token': result = m.accept_token(op.id); break;
      case 'accept_string': result = m.accept_string(fromHex(op.hex)); break;
      case 'rollback': m.rollback(op.n); break;
      case 'reset': m.reset(); break;
      case 'is_terminated': result = m.is_terminated(); break;
      case 'can_terminate': result = m.can_terminate(); break;
      case 'history_length': result = m.history_length; break;
      case 'jump':
        result = m.find_jump_forward_string();
        assert.equal(Buffer.from(m.find_jump_forward_bytes()).toString('hex'), op.hex, `${where}: bytes`);
        break;
      case 'shortest': {
        const done = m.shortestCompletion();
        assert.equal(done === null ? null : Buffer.from(done).toString('hex'), op.hex, `${where}: bytes`);
        break;
      }
      default: assert.fail(`unknown op ${op.op}`);
    }
  } catch (e) {
    if (!(e instanceof GrammarError)) throw e;
    assert.ok(op.error, `${where}: wasm raised "${e.message}", native did not`);
    assert.equal(e.code, op.error.code, `${where}: error code`);
    assert.equal(e.message, op.error.message, `${where}: error message`);
    return;
  }
  assert.ok(!op.error, `${where}: native raised "${op.error && op.error.message}", wasm did not`);
  if ('result' in op) assert.equal(result, op.result, `${where}: result`);
}

for (const c of fixtures.cases) {
  test(`${c.name}`, { skip }, async () => {
    const compiler = await compilerFor(c.vocab);
    if (!c.ops) {  // a grammar the core may refuse
      let compiled = null;
      try {
        compiled = compiler.compileIR(Int32Array.from(c.words));
      } catch (e) {
        assert.ok(e instanceof GrammarError, `not a GrammarError: ${e}`);
        assert.ok(c.error, `wasm refused (${e.message}), native compiled`);
        assert.deepEqual([e.code, e.message, e.rule], [c.error.code, c.error.message, c.error.rule]);
        if (c.ruleNames && c.error.rule >= 0) {  // with rule names the message names the rule
          assert.throws(() => compiler.compileIR(c.words, c.ruleNames),
            { message: `rule '${c.ruleNames[c.error.rule]}': ${c.error.message}` });
        }
        return;
      }
      assert.ok(!c.error, `native refused (${c.error && c.error.message}), wasm compiled`);
      compiled.dispose();
      return;
    }
    const compiled = compiler.compileIR(c.words);
    assert.deepEqual(compiled.stats().rules, c.stats.rules);
    assert.deepEqual(compiled.stats().states, c.stats.states);
    const m = new GrammarMatcher(compiled);
    try {
      for (let i = 0; i < c.ops.length; i++) {
        try {
          replay(m, c.ops[i], core);
        } catch (e) {
          e.message = `${c.name}, operation ${i}: ${e.message}`;
          throw e;
        }
      }
    } finally {
      m.dispose();
      compiled.dispose();
    }
  });
}

test('API details', { skip }, async () => {
  const compiler = await compilerFor('tiny');
  assert.equal(globalThis.trellisGrammarCore.exports, core.exports);
  assert.equal(globalThis.trellisGrammarCore.memory, core.exports.memory);
  const arith = fixtures.cases.find((c) => c.name === 'arithmetic EBNF');
  const compiled = compiler.compileIR(arith.words);
  const m = new GrammarMatcher(compiled);
  // A short bitmask is refused; a Uint32Array works as well as an Int32Array.
  assert.throws(() => m.fill_next_token_bitmask(new Int32Array(compiler.bitmaskWords - 1)),
    (e) => e instanceof GrammarError && e.code === ERR_ARGUMENT);
  const u = m.fill_next_token_bitmask(new Uint32Array(compiler.bitmaskWords));
  assert.deepEqual(new Int32Array(u.buffer), m.fill_next_token_bitmask());
  // Strings are UTF-8 encoded; a bad rollback leaves the state alone.
  assert.equal(m.accept_string('(1+'), true);
  assert.equal(m.history_length, 1);
  assert.throws(() => m.rollback(2), GrammarError);
  m.rollback(1);
  assert.equal(m.history_length, 0);
  // Handles are freed once; many matchers of one grammar do not leak wasm memory.
  const before = core.memory.buffer.byteLength;
  for (let i = 0; i < 2000; i++) {
    const k = new GrammarMatcher(compiled);
    k.accept_string('12');
    k.fill_next_token_bitmask();
    k.dispose();
    k.dispose();
  }
  assert.equal(core.memory.buffer.byteLength, before);
  // warm() builds every cold mask cache once.
  assert.ok(compiled.warm() >= 0);
  assert.equal(compiled.warm(), 0);
  m.dispose();
  compiled.dispose();
  assert.throws(() => compiler.compileIR([1, 2, 3]), (e) => e.code === ERR_IR);
});

test('loadGrammarCore sources', { skip }, async () => {
  const bytes = fs.readFileSync(wasmPath);
  const module = await WebAssembly.compile(bytes);
  for (const source of [bytes, new Uint8Array(bytes).buffer, module, new URL(`file://${wasmPath}`)]) {
    const c = await loadGrammarCore(source);
    assert.equal(typeof c.exports.tg_matcher_fill_mask, 'function');
  }
  globalThis.trellisGrammarCore = { exports: core.exports, memory: core.memory };
});
