'use strict';
// Trellis under Pyodide in node: the Python front-ends (EBNF, regex, JSON) run in Pyodide, the
// grammar core is the wasm module loaded by web/grammar.js, shared by Python (PyodideTransport)
// and JS. Used by grammar_bench.cjs; also a smoke test:
//
//   node benchmarks/node/trellis_pyodide.cjs [repo_root]
//
// Needs npm `pyodide@314.0.7` in build/bench-node (offline: loadPyodide from that folder) and
// build/grammar/wasm/trellis_grammar.wasm (python3 build.py grammar).

const fs = require('fs');
const path = require('path');
const { pathToFileURL } = require('url');

const PYODIDE_VERSION = '314.0.7';

// Copy every .py file of py/trellis into Pyodide's file system under /trellis-py.
function copyPackage(pyodide, srcRoot, dstRoot) {
  let n = 0;
  const walk = (rel) => {
    const src = path.join(srcRoot, rel);
    pyodide.FS.mkdirTree(path.posix.join(dstRoot, rel));
    for (const entry of fs.readdirSync(src, { withFileTypes: true })) {
      const r = path.posix.join(rel, entry.name);
      if (entry.isDirectory()) {
        if (entry.name !== '__pycache__') walk(r);
      } else if (entry.name.endsWith('.py')) {
        pyodide.FS.writeFile(path.posix.join(dstRoot, r), fs.readFileSync(path.join(srcRoot, r)));
        n++;
      }
    }
  };
  walk('trellis');
  return n;
}

// Python helpers the benchmark calls; everything grammar-related goes through trellis.grammar.
const SETUP_PY = `
import sys
if '/trellis-py' not in sys.path:
    sys.path.insert(0, '/trellis-py')
from array import array
from trellis.grammar import GrammarCompiler, GrammarMatcher, Vocabulary

def make_compiler(gguf_path):
    vocab = Vocabulary.from_gguf(gguf_path)
    return GrammarCompiler(vocab, core="pyodide")

def compile_spec(compiler, kind, text):
    if kind == "builtin_json":
        return compiler.compile_builtin_json()
    if kind == "ebnf":
        return compiler.compile_grammar(text)
    if kind == "regex":
        return compiler.compile_regex(text)
    if kind == "json_schema":
        return compiler.compile_json_schema(text)
    raise ValueError(kind)

class PyMatcher:
    """A Python GrammarMatcher with its bitmask (array('i'), numpy is not in Pyodide)."""
    def __init__(self, compiled):
        self.m = GrammarMatcher(compiled)
        self.mask = self.m.new_bitmask()
        self.t = compiled.compiler.core.t
    def fill(self):
        self.m.fill_next_token_bitmask(self.mask)
        return self.t.mask_ptr   # the core's scratch copy, for JS to check without a conversion
    def accept(self, token):
        return self.m.accept_token(token)
    def terminated(self):
        return self.m.is_terminated()
    def close(self):
        self.m = None

def handle_of(obj):
    return obj._handle
`;

/**
 * Load grammar.js + the wasm core, then Pyodide with the trellis package on sys.path.
 * Returns {pyodide, grammar (the grammar.js module), core (its GrammarCore), py (helpers)}.
 */
async function loadTrellisPyodide(repoRoot, { log = () => {} } = {}) {
  const pyodideDir = path.join(repoRoot, 'build', 'bench-node', 'node_modules', 'pyodide');
  const pkg = path.join(pyodideDir, 'package.json');
  if (!fs.existsSync(pkg)) {
    throw new Error(`npm pyodide is not installed: npm install --prefix build/bench-node pyodide@${PYODIDE_VERSION}`);
  }
  const version = JSON.parse(fs.readFileSync(pkg, 'utf8')).version;
  const wasm = process.env.TRELLIS_GRAMMAR_WASM ||
    path.join(repoRoot, 'build', 'grammar', 'wasm', 'trellis_grammar.wasm');
  if (!fs.existsSync(wasm)) throw new Error(`${wasm} is missing: run python3 build.py grammar`);

  let t = performance.now();
  const grammar = await import(pathToFileURL(path.join(repoRoot, 'web', 'grammar.js')).href);
  const core = await grammar.loadGrammarCore(wasm);  // sets globalThis.trellisGrammarCore
  log(`grammar core: ${(performance.now() - t).toFixed(0)} ms`);

  t = performance.now();
  const { loadPyodide } = require(path.join(pyodideDir, 'pyodide.js'));
  const pyodide = await loadPyodide({ indexURL: pyodideDir + path.sep, stdout: log, stderr: log });
  log(`pyodide ${version}: ${(performance.now() - t).toFixed(0)} ms`);

  const files = copyPackage(pyodide, path.join(repoRoot, 'py'), '/trellis-py');
  pyodide.runPython(SETUP_PY);
  const g = pyodide.globals;
  const py = {
    makeCompiler: g.get('make_compiler'),
    compileSpec: g.get('compile_spec'),
    PyMatcher: g.get('PyMatcher'),
    handleOf: g.get('handle_of'),
  };
  log(`trellis: ${files} files`);
  return { pyodide, version, grammar, core, py };
}

// Mount a host folder (node only) so Python can read a file from it without copying it.
function mountHostDir(pyodide, hostDir, at) {
  pyodide.FS.mkdirTree(at);
  pyodide.FS.mount(pyodide.FS.filesystems.NODEFS, { root: hostDir }, at);
  return at;
}

// A grammar.js CompiledGrammar view of a Python CompiledGrammar's handle, so that JS matchers
// (direct export calls, no Python per token) can run on a grammar compiled by Python. The
// Python object owns the handle: keep it alive while the JS matchers live.
function jsGrammarOf(core, pyCompiled, py, vocabSize) {
  const compiler = { core, vocabSize, bitmaskWords: (vocabSize + 31) >>> 5 };
  return { core, compiler, handle: py.handleOf(pyCompiled), dispose() {} };
}

module.exports = { loadTrellisPyodide, mountHostDir, jsGrammarOf, PYODIDE_VERSION };

if (require.main === module) {
  // Smoke test: a byte vocabulary, the arithmetic EBNF compiled in Python, masks from Python
  // and from JS on the same grammar handle must agree.
  (async () => {
    const root = path.resolve(process.argv[2] || path.join(__dirname, '..', '..'));
    const { pyodide, grammar, core, py } = await loadTrellisPyodide(root, { log: (s) => console.log(s) });
    pyodide.runPython(`
from trellis.grammar.ebnf import ARITHMETIC_EBNF
vocab = Vocabulary.from_token_bytes([bytes([b]) for b in range(256)] + [b"", b"12", b"(1+"],
                                    special_ids=[256], stop_ids=[256])
smoke_compiler = GrammarCompiler(vocab, core="pyodide")
smoke_grammar = smoke_compiler.compile_grammar(ARITHMETIC_EBNF)
smoke_matcher = PyMatcher(smoke_grammar)
`);
    const pm = pyodide.globals.get('smoke_matcher');
    const compiled = pyodide.globals.get('smoke_grammar');
    const jm = new grammar.GrammarMatcher(jsGrammarOf(core, compiled, py, 259));
    for (const token of [40, 257, 43, 50, 41]) {
      const ptr = pm.fill();
      const a = Array.from(new Int32Array(core.memory.buffer, ptr, 9));
      const b = Array.from(jm.fill_next_token_bitmask());
      if (a.join() !== b.join()) throw new Error(`masks differ: ${a} vs ${b}`);
      if (!pm.accept(token) || !jm.accept_token(token)) throw new Error(`token ${token} refused`);
    }
    console.log('smoke test ok: Python and JS matchers agree;', jm.can_terminate() ? 'complete' : 'incomplete');
    jm.dispose();
  })().catch((e) => { console.error(e); process.exit(1); });
}
