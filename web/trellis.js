// Trellis in the browser: an LLM engine with guaranteed structured output, web-llm-shaped.
//
//   import { CreateEngine } from '/trellis.js';
//   const engine = await CreateEngine(undefined, { initProgressCallback: (r) => console.log(r.text) });
//   const reply = await engine.chat.completions.create({ messages, response_format });
//   for await (const chunk of await engine.chat.completions.create({ messages, stream: true })) ...
//
// The engine (the `trellis` Python package under Pyodide, WebGPU kernels, grammar wasm) runs in a
// Web Worker (worker.js); this module only passes messages. Errors arrive as the classes below,
// named and worded as the Python exceptions they come from.

/** Base of every error the engine reports. */
export class TrellisError extends Error {
  constructor(message, details = {}) {
    super(message);
    this.name = new.target.name;
    Object.assign(this, details);
  }
}
/** A malformed request; `field` names where, e.g. "response_format.json_schema.schema". */
export class InvalidRequestError extends TrellisError {}
/** A JSON Schema keyword that cannot be enforced exactly; `keyword` and `pointer` say where. */
export class UnsupportedSchemaError extends TrellisError {}
/** A malformed grammar (EBNF, regex); `line` and `column` say where. */
export class GrammarError extends TrellisError {}
/** A grammar too large to compile. */
export class GrammarLimitError extends GrammarError {}
/** A prompt (plus output) that does not fit the context window. */
export class SequenceLengthError extends TrellisError {}
/** A model file or artifact is missing, corrupt or inconsistent. */
export class ModelError extends TrellisError {}
/** WebGPU cannot run the model (no adapter, a limit, a lost device). */
export class RuntimeBackendError extends TrellisError {}
/** No model where one was asked for: `url` (a model folder without manifest.json) or `model` (an id
 * missing from a model list, `available` the ids there are). */
export class ModelNotFoundError extends TrellisError {}
/** A file of the engine itself (worker, Python package, grammar wasm, Pyodide) is not at `url`:
 * `option` names the setting that placed it there (assetBase, pyodideBase). */
export class AssetNotFoundError extends TrellisError {}

const ERRORS = { TrellisError, InvalidRequestError, UnsupportedSchemaError, GrammarError, GrammarLimitError,
  SequenceLengthError, ModelError, RuntimeBackendError, ModelNotFoundError, AssetNotFoundError };

function toError({ name, message, ...details }) {
  const Class = ERRORS[name] || TrellisError;
  const error = new Class(message, details);
  if (!ERRORS[name]) error.name = name || 'TrellisError';  // e.g. a Python TypeError, named as such
  return error;
}

const DEFAULT_MODEL = 'smollm2-135m-instruct';

// Where the engine's files are. Each is an option, else a <meta name="trellis-..."> of the page (so
// that code written for another library needs no new arguments), else beside this module: the built
// site's layout. A bundler moves this module, so pages that bundle it set assetBase.
function metaUrl(name) {
  const content = globalThis.document?.querySelector(`meta[name="${name}"]`)?.content;
  return content ? new URL(content, document.baseURI).href : null;
}

const asFolder = (url) => (url.endsWith('/') ? url : `${url}/`);
const pageBase = () => globalThis.document?.baseURI || globalThis.location?.href || import.meta.url;

/** {assetBase, pyodideBase, modelBase}: absolute folder URLs from `options`, the page's meta tags
 * and the defaults (assetBase: this module's folder; pyodideBase: <assetBase>pyodide/; modelBase:
 * <assetBase>models/). */
export function resolveBases({ assetBase, pyodideBase, modelBase } = {}) {
  const asset = asFolder(assetBase ? new URL(assetBase, pageBase()).href
    : metaUrl('trellis-asset-base') || new URL('./', import.meta.url).href);
  const pick = (given, meta, fallback) => asFolder(given ? new URL(given, pageBase()).href
    : metaUrl(meta) || new URL(fallback, asset).href);
  return { assetBase: asset, pyodideBase: pick(pyodideBase, 'trellis-pyodide-base', 'pyodide/'),
    modelBase: pick(modelBase, 'trellis-model-base', 'models/') };
}

/** The models served beside the engine: <modelBase>models.json, {"default": id, "models": [ids]};
 * null when there is none. */
export async function modelList(options = {}) {
  const url = new URL('models.json', resolveBases(options).modelBase);
  try {
    const response = await fetch(url, { cache: 'no-store' });
    return response.ok ? await response.json() : null;
  } catch {
    return null;
  }
}

/** The default model's URL: the page's meta trellis-model, else the list's default, else the
 * embedded SmolLM2. */
async function defaultModelUrl(options) {
  const meta = metaUrl('trellis-model');
  if (meta) return meta;
  const id = (await modelList(options))?.default || DEFAULT_MODEL;
  return new URL(`${encodeURIComponent(id)}/`, resolveBases(options).modelBase).href;
}

// Fails with AssetNotFoundError when `url` does not answer: a Worker that cannot load only fires a
// bare error event, which would not say which file or setting is wrong.
async function needAsset(url, option) {
  let status;
  try {
    status = (await fetch(url, { method: 'HEAD', cache: 'no-store' })).status;
  } catch (e) {
    status = e.message;
  }
  if (status !== 200) {
    throw new AssetNotFoundError(`${url} was not found (HTTP ${status}): ${option} must be the URL of the folder `
      + 'that serves the trellis-llm package\'s files', { url, option });
  }
}

// A stream of chunks from the worker, read with `for await`.
class ChunkStream {
  constructor(cancel) {
    this.items = [];
    this.waiting = null;
    this.done = false;
    this.error = null;
    this.cancel = cancel;
  }

  push(chunk) { this.items.push(chunk); this.wake(); }
  finish(error = null) { this.done = true; this.error = error; this.wake(); }
  wake() { if (this.waiting) { this.waiting(); this.waiting = null; } }

  async next() {
    while (!this.items.length && !this.done) await new Promise((resolve) => { this.waiting = resolve; });
    if (this.items.length) return { value: this.items.shift(), done: false };
    if (this.error) { const e = this.error; this.error = null; throw e; }
    return { value: undefined, done: true };
  }

  async return() { if (!this.done) this.cancel(); this.items = []; this.done = true; return { value: undefined, done: true }; }
  [Symbol.asyncIterator]() { return this; }
}

class Engine {
  constructor(worker, info) {
    this.worker = worker;
    this.info = info;  // model id, context, adapter, load timings
    this.nextId = 1;
    this.pending = new Map();  // id -> {resolve, reject, stream}
    worker.onmessage = ({ data }) => this.receive(data);
    worker.onerror = (e) => this.failAll(new TrellisError(`the engine's worker failed: ${e.message}`));
    this.chat = { completions: { create: (request) => this.request('chat', request) } };
    this.completions = { create: (request) => this.request('completion', request) };
  }

  receive({ type, id, chunk, value, error, allKernelsMs }) {
    if (type === 'kernels') { this.info.timings.allKernelsMs = allKernelsMs; return; }
    const call = this.pending.get(id);
    if (!call) return;
    if (type === 'chunk') {
      // A stream's promise settles at its first chunk, or rejects if the request fails before one.
      if (!call.started) { call.started = true; call.resolve(call.stream); }
      call.stream.push(JSON.parse(chunk));
      return;
    }
    this.pending.delete(id);
    const failure = type === 'error' ? toError(error) : null;
    if (call.started) call.stream.finish(failure);
    else if (failure) call.reject(failure);
    else if (call.stream) { call.stream.finish(); call.resolve(call.stream); }
    else call.resolve(value);
  }

  failAll(error) {
    for (const call of this.pending.values()) (call.started ? call.stream.finish(error) : call.reject(error));
    this.pending.clear();
  }

  call(message) {
    if (!this.worker) return Promise.reject(new TrellisError('the engine was unloaded'));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ ...message, id });
    });
  }

  /** A completion, or with `stream: true` an async iterable of chunks (after the request was accepted). */
  request(kind, request) {
    if (!this.worker) return Promise.reject(new TrellisError('the engine was unloaded'));
    if (!request || !request.stream) return this.call({ type: 'request', kind, request });
    const id = this.nextId++;
    const stream = new ChunkStream(() => this.interruptGenerate());
    return new Promise((resolve, reject) => {
      this.pending.set(id, { stream, started: false, resolve, reject });
      this.worker.postMessage({ type: 'request', id, kind, request });
    });
  }

  /** Stops the generation in progress after its current token (finish_reason "abort"). */
  interruptGenerate() { this.worker?.postMessage({ type: 'interrupt' }); }

  /** Forgets the conversation held in the KV cache. */
  resetChat() { return this.call({ type: 'resetChat' }); }

  /** The last request's speeds and grammar figures, as text. */
  async runtimeStatsText() { return (await this.call({ type: 'stats' })).text; }

  /** The same figures as an object (speeds, grammar cache counters, adapter). */
  async runtimeStats() { return (await this.call({ type: 'stats' })).stats; }

  /**
   * Checks `text` against a response format with the engine's own grammar: a fresh matcher of the
   * same compiled grammar (from the cache when the request used it) must accept every byte and be
   * able to stop there. Resolves to {kind, accepted, complete, valid, grammar: "cached" |
   * "compiled", ms}; for {type: "text"}, {kind: null, valid: null}. Bad formats reject as requests do.
   */
  validate(text, responseFormat) { return this.call({ type: 'validate', text, responseFormat }); }

  /** Ends the worker (and with it the GPU device and Python). */
  async unload() {
    if (!this.worker) return;
    this.worker.terminate();
    this.worker = null;
    this.failAll(new TrellisError('the engine was unloaded'));
  }
}

/**
 * Starts the engine on a built model folder (`modelUrl`, e.g. "/models/smollm2-135m-instruct/", or an
 * id: resolved against `modelBase` when the options or the page give one, else against the page;
 * default: the default of <modelBase>models.json). `initProgressCallback(report)`
 * gets {progress (0..1), timeElapsed (s), text, stage, loadedBytes?, totalBytes?}. `context` caps the
 * KV cache (tokens). `assetBase` (the folder of worker.js, trellis.zip, trellis_grammar.wasm),
 * `pyodideBase` (the pyodide package's files) and `modelBase`: see resolveBases. `modelId` names the
 * model in requests and responses (default: its folder's name).
 */
export async function CreateEngine(modelUrl, options = {}) {
  const { initProgressCallback, context, modelId } = options;
  const bases = resolveBases(options);
  const url = asFolder(modelUrl ? new URL(modelUrl, options.modelBase || metaUrl('trellis-model-base') ? bases.modelBase
    : pageBase()).href : await defaultModelUrl(options));
  const workerUrl = new URL('worker.js', bases.assetBase).href;
  await needAsset(workerUrl, 'assetBase');
  const worker = new Worker(workerUrl, { type: 'module', name: 'trellis' });
  const info = await new Promise((resolve, reject) => {
    worker.onmessage = ({ data }) => {
      if (data.type === 'progress') initProgressCallback?.(data.report);
      else if (data.type === 'ready') resolve(data.info);
      else if (data.type === 'initError') reject(toError(data.error));
    };
    worker.onerror = (e) => reject(new TrellisError(`the engine's worker failed to start: ${e.message || 'see the console'}`));
    worker.postMessage({ type: 'init', modelUrl: url, context, modelId, pyodideBase: bases.pyodideBase });
  }).catch((e) => { worker.terminate(); throw e; });
  return new Engine(worker, info);
}
