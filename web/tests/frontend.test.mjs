// The JS compile_* verbs run the Python front-ends under Pyodide (pyodideFrontEnd) and must
// produce exactly the IR that CPython produced for the fixtures, then behave the same.
//
// Env: TRELLIS_PYODIDE_DIR (npm pyodide@314.0.7; build.py test installs it into build/node).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

import { loadGrammarCore, GrammarCompiler, GrammarMatcher, GrammarError, pyodideFrontEnd } from '../grammar.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const pyodideDir = process.env.TRELLIS_PYODIDE_DIR || path.join(root, 'build', 'node', 'node_modules', 'pyodide');
const wasmPath = process.env.TRELLIS_GRAMMAR_WASM || path.join(root, 'build', 'grammar', 'wasm', 'trellis_grammar.wasm');
const fixturePath = process.env.TRELLIS_GRAMMAR_FIXTURES || path.join(root, 'build', 'test-fixtures', 'grammar_wasm.json');
const missing = [pyodideDir, wasmPath, fixturePath].filter((p) => !fs.existsSync(p));
const skip = missing.length ? `missing ${missing.join(', ')} (run tests/grammar/test_wasm_node.py)` : false;

// Puts py/trellis into Pyodide's file system and on sys.path.
function installTrellis(pyodide) {
  const copy = (rel) => {
    pyodide.FS.mkdirTree(`/trellis-py/${rel}`);
    for (const entry of fs.readdirSync(path.join(root, 'py', rel), { withFileTypes: true })) {
      const r = `${rel}/${entry.name}`;
      if (entry.isDirectory() && entry.name !== '__pycache__') copy(r);
      else if (entry.name.endsWith('.py')) pyodide.FS.writeFile(`/trellis-py/${r}`, fs.readFileSync(path.join(root, 'py', r)));
    }
  };
  copy('trellis');
  pyodide.runPython("import sys; sys.path.insert(0, '/trellis-py')");
}

test('compile_grammar / compile_regex / compile_builtin_json through Pyodide', { skip, timeout: 120000 }, async () => {
  const { loadPyodide } = await import(pathToFileURL(path.join(pyodideDir, 'pyodide.mjs')).href);
  const pyodide = await loadPyodide({ indexURL: pyodideDir + path.sep });
  installTrellis(pyodide);
  const core = await loadGrammarCore(wasmPath);
  const fixtures = JSON.parse(fs.readFileSync(fixturePath, 'utf8'));
  const v = fixtures.vocabs.tiny;
  const compiler = new GrammarCompiler(core, {
    tokenBytes: v.tokenBytes.map((h) => Uint8Array.from(Buffer.from(h, 'hex'))),
    vocabSize: v.vocabSize, specialIds: v.specialIds, stopIds: v.stopIds, frontEnd: pyodideFrontEnd(pyodide),
  });
  const verbs = { ebnf: (t) => compiler.compile_grammar(t), regex: (t) => compiler.compile_regex(t),
    builtin_json: () => compiler.compile_builtin_json() };
  let checked = 0;
  for (const c of fixtures.cases.filter((x) => x.source && x.vocab === 'tiny')) {
    const [kind, text] = c.source;
    const { words, ruleNames } = compiler.frontEnd(kind, text);
    assert.deepEqual(Array.from(words), c.words, `${c.name}: IR differs from CPython's`);
    assert.deepEqual(ruleNames, c.ruleNames);
    const compiled = verbs[kind](text);
    assert.deepEqual(compiled.stats().states, c.stats.states);
    const m = new GrammarMatcher(compiled);
    const got = m.fill_next_token_bitmask();  // the first mask of the fixture's walk
    const first = c.ops.find((op) => op.op === 'mask');
    assert.equal(Buffer.from(got.buffer, got.byteOffset, got.byteLength).toString('base64'), first.words,
      `${c.name}: first mask`);
    m.dispose();
    compiled.dispose();
    checked++;
  }
  assert.ok(checked >= 5, `only ${checked} fixture cases had a source`);
  // Python's GrammarError arrives as a JS GrammarError with the line and column in its message.
  assert.throws(() => compiler.compile_grammar('root ::= "a" |\nbad ::= ]'),
    (e) => e instanceof GrammarError && /line 2, column \d+/.test(e.message));
  assert.throws(() => compiler.compile_regex('(?=a)'), (e) => e instanceof GrammarError && /column/.test(e.message));
  assert.throws(() => new GrammarCompiler(core, { tokenBytes: ['a'] }).compile_regex('a'), /frontEnd/);
});
