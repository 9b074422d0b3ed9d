// web-llm's names on top of trellis.js, so that a page written for web-llm runs on Trellis with only
// its import line and model ids changed:
//
//   import * as webllm from 'trellis-llm/webllm';          // was '@mlc-ai/web-llm'
//   const engine = await webllm.CreateMLCEngine('smollm2-135m-instruct', { initProgressCallback });
//   const reply = await engine.chat.completions.create({ messages });
//
// Models are named by appConfig.model_list entries {model_id, model: URL of a built model folder}
// (`python3 build.py model` writes one); without an appConfig, prebuiltAppConfig lists the models
// served beside the engine (<modelBase>models.json). The engine runs in its own Worker either way;
// CreateWebWorkerMLCEngine additionally moves this object's bookkeeping into a worker of the page's
// own, as web-llm does, through WebWorkerMLCEngineHandler.

import * as trellis from './trellis.js';
import { CreateEngine, InvalidRequestError, ModelNotFoundError, TrellisError, modelList, resolveBases } from './trellis.js';

export * from './trellis.js';

const SHARD_CACHE = 'trellis-shards-v1';  // worker.js keeps verified shards there, keyed `${url}?sha256=...`

/** The models served beside the engine: its model_list is read from <modelBase>models.json (the page's
 * meta tags or the site's layout) when this module loads, as pages read web-llm's to list models, and
 * again when an engine needs it. */
export const prebuiltAppConfig = { model_list: [], useIndexedDBCache: false };

async function recordsOf(appConfig, options) {
  if (appConfig && appConfig !== prebuiltAppConfig) return appConfig.model_list || [];
  const bases = resolveBases(options);
  const listed = await modelList(options);
  prebuiltAppConfig.model_list = (listed?.models || []).map((id) => ({
    model_id: id, model: new URL(`${encodeURIComponent(id)}/`, bases.modelBase).href }));
  return prebuiltAppConfig.model_list;
}

/** The model_list entry of `modelId`, or ModelNotFoundError naming it and the ids there are. */
async function findRecord(modelId, appConfig, options = {}) {
  if (Array.isArray(modelId)) {
    if (modelId.length !== 1) throw new InvalidRequestError('Trellis loads one model per engine: pass one model id', 'modelId');
    [modelId] = modelId;
  }
  const records = await recordsOf(appConfig, options);
  const record = records.find((r) => r.model_id === modelId);
  if (!record) {
    const available = records.map((r) => r.model_id);
    throw new ModelNotFoundError(`model id ${JSON.stringify(modelId)} is not in appConfig.model_list (available: `
      + `${available.length ? available.join(', ') : 'none'}); add {model_id, model: the URL of its built folder}`,
    { model: modelId, available });
  }
  return { ...record, model: new URL(record.model, globalThis.document?.baseURI || globalThis.location?.href).href };
}

const folder = (url) => (url.endsWith('/') ? url : `${url}/`);

// In a page only: a worker's own URL says nothing of where the page serves models.
if (globalThis.document) await recordsOf(prebuiltAppConfig, {}).catch(() => {});

/** Whether every weight shard of `modelId` is in the browser's cache (a reload reads none from the network). */
export async function hasModelInCache(modelId, appConfig = prebuiltAppConfig) {
  const { model } = await findRecord(modelId, appConfig);
  const response = await fetch(new URL('manifest.json', folder(model)), { cache: 'no-store' });
  if (!response.ok) return false;
  const cache = await caches.open(SHARD_CACHE);
  for (const shard of (await response.json()).weights.shards) {
    if (!await cache.match(`${new URL(shard.file, folder(model)).href}?sha256=${shard.sha256}`)) return false;
  }
  return true;
}

/** Drops `modelId`'s cached weight shards. */
export async function deleteModelInCache(modelId, appConfig = prebuiltAppConfig) {
  const prefix = folder((await findRecord(modelId, appConfig)).model);
  const cache = await caches.open(SHARD_CACHE);
  for (const key of await cache.keys()) if (key.url.startsWith(prefix)) await cache.delete(key);
}
// web-llm keeps weights, config and wasm apart; Trellis caches only the shards.
export const deleteModelAllInfoInCache = deleteModelInCache;

// A stream passed through, keeping the reply's text for getMessage().
async function* recording(stream, onText) {
  let text = '';
  for await (const chunk of stream) {
    text += chunk.choices?.[0]?.delta?.content ?? chunk.choices?.[0]?.text ?? '';
    yield chunk;
  }
  onText(text);
}

/** web-llm's MLCEngine: one model at a time, chosen by `reload(modelId)`. */
export class MLCEngine {
  constructor(engineConfig = {}) {
    this.config = { ...engineConfig };
    this.appConfig = engineConfig.appConfig || prebuiltAppConfig;
    this.initProgressCallback = engineConfig.initProgressCallback;
    this.engine = null;
    this.modelId = null;
    this.message = '';
    this.chat = { completions: { create: (request) => this.chatCompletion(request) } };
    this.completions = { create: (request) => this.completion(request) };
  }

  setInitProgressCallback(callback) { this.initProgressCallback = callback; }
  getInitProgressCallback() { return this.initProgressCallback; }
  setAppConfig(appConfig) { this.appConfig = appConfig; }

  /** Loads `modelId` (its model_list entry), unloading the model before. `chatOpts.context_window_size` caps the KV cache. */
  async reload(modelId, chatOpts = {}) {
    const record = await findRecord(modelId, this.appConfig, this.config);
    await this.unload();
    this.engine = await CreateEngine(record.model, { ...this.config, modelId: record.model_id,
      context: chatOpts?.context_window_size ?? this.config.context,
      initProgressCallback: (report) => this.initProgressCallback?.(report) });
    this.modelId = record.model_id;
  }

  loaded() {
    if (!this.engine) throw new TrellisError('no model is loaded: call reload(modelId) or CreateMLCEngine first');
    return this.engine;
  }

  async chatCompletion(request) { return this.generate(this.loaded().chat.completions, request); }
  async completion(request) { return this.generate(this.loaded().completions, request); }

  async generate(face, request) {
    const result = await face.create(request);
    if (request?.stream) return recording(result, (text) => { this.message = text; });
    const choice = result.choices?.[0];
    this.message = choice?.message?.content ?? choice?.text ?? '';
    return result;
  }

  /** The last reply's text. */
  async getMessage() { return this.message; }
  interruptGenerate() { this.engine?.interruptGenerate(); }
  async resetChat() { await this.loaded().resetChat(); this.message = ''; }
  async runtimeStatsText() { return this.loaded().runtimeStatsText(); }
  async unload() {
    const engine = this.engine;
    this.engine = null;
    this.modelId = null;
    await engine?.unload();
  }
}

/** A new MLCEngine with `modelId` loaded. */
export async function CreateMLCEngine(modelId, engineConfig = {}, chatOpts = {}) {
  const engine = new MLCEngine(engineConfig);
  await engine.reload(modelId, chatOpts);
  return engine;
}

// ---- the same engine behind a worker of the page's own -------------------------------------
// Page -> worker: {trellis: 'call', id, method, args, config}; worker -> page: {trellis: 'return' |
// 'throw' | 'chunk' | 'end', id, ...} and {trellis: 'progress', report}. Errors cross as
// {name, message, ...details} and become the page's error classes again.

const CALLS = new Set(['reload', 'chatCompletion', 'completion', 'getMessage', 'resetChat', 'runtimeStatsText',
  'unload', 'interruptGenerate']);

/** What the page's worker file runs: `const handler = new WebWorkerMLCEngineHandler();
 * self.onmessage = (msg) => handler.onmessage(msg);` */
export class WebWorkerMLCEngineHandler {
  constructor() {
    this.engine = new MLCEngine();
    this.engine.setInitProgressCallback((report) => self.postMessage({ trellis: 'progress', report }));
  }

  async onmessage(event) {
    const { trellis, id, method, args = [], config } = event.data || {};
    if (trellis !== 'call') return;
    try {
      if (!CALLS.has(method)) throw new TrellisError(`unknown engine method ${method}`);
      if (config) {  // the page's appConfig and asset locations, sent with each reload
        Object.assign(this.engine.config, config);
        this.engine.setAppConfig(config.appConfig || prebuiltAppConfig);
      }
      const value = await this.engine[method](...args);
      if (value && typeof value[Symbol.asyncIterator] === 'function') {
        self.postMessage({ trellis: 'return', id, stream: true });
        for await (const chunk of value) self.postMessage({ trellis: 'chunk', id, chunk });
        self.postMessage({ trellis: 'end', id });
      } else {
        self.postMessage({ trellis: 'return', id, value });
      }
    } catch (e) {
      self.postMessage({ trellis: 'throw', id, error: { ...e, name: e.name, message: e.message } });
    }
  }
}

function errorFrom(record) {
  const { name, message, ...details } = record;
  const Class = trellis[name]?.prototype instanceof TrellisError ? trellis[name] : TrellisError;
  const error = new Class(message, details);
  error.name = name || 'TrellisError';
  return error;
}

/** web-llm's WebWorkerMLCEngine: MLCEngine's methods, run by a WebWorkerMLCEngineHandler in `worker`. */
export class WebWorkerMLCEngine {
  constructor(worker, engineConfig = {}) {
    this.worker = worker;
    this.config = { ...engineConfig };
    this.initProgressCallback = engineConfig.initProgressCallback;
    this.nextId = 1;
    this.pending = new Map();
    this.modelId = null;
    this.chat = { completions: { create: (request) => this.chatCompletion(request) } };
    this.completions = { create: (request) => this.completion(request) };
    worker.onmessage = (event) => this.receive(event.data);
  }

  receive(data) {
    if (data?.trellis === 'progress') { this.initProgressCallback?.(data.report); return; }
    const call = this.pending.get(data?.id);
    if (!call) return;
    if (data.trellis === 'throw') { this.pending.delete(data.id); call.reject(errorFrom(data.error)); }
    else if (data.trellis === 'return' && data.stream) { call.queue = []; call.resolve(this.streamOf(call)); }
    else if (data.trellis === 'return') { this.pending.delete(data.id); call.resolve(data.value); }
    else if (data.trellis === 'chunk') { call.queue.push(data.chunk); call.wake?.(); }
    else if (data.trellis === 'end') { this.pending.delete(data.id); call.ended = true; call.wake?.(); }
  }

  async* streamOf(call) {
    for (;;) {
      while (!call.queue.length && !call.ended) await new Promise((resolve) => { call.wake = resolve; });
      if (call.queue.length) yield call.queue.shift();
      else return;
    }
  }

  call(method, args, config) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ trellis: 'call', id, method, args, config });
    });
  }

  setInitProgressCallback(callback) { this.initProgressCallback = callback; }
  getInitProgressCallback() { return this.initProgressCallback; }
  setAppConfig(appConfig) { this.config.appConfig = appConfig; }

  async reload(modelId, chatOpts = {}) {
    // Only what survives postMessage: the callback stays here. Asset locations are made absolute here,
    // since the worker's own URL is not the page's.
    const { initProgressCallback, ...options } = this.config;
    const config = { ...options, ...resolveBases(options) };
    if (config.appConfig === prebuiltAppConfig) delete config.appConfig;  // the worker reads its own
    await this.call('reload', [modelId, chatOpts], config);
    this.modelId = modelId;
  }

  chatCompletion(request) { return this.call('chatCompletion', [request]); }
  completion(request) { return this.call('completion', [request]); }
  getMessage() { return this.call('getMessage', []); }
  interruptGenerate() { this.worker.postMessage({ trellis: 'call', id: 0, method: 'interruptGenerate', args: [] }); }
  resetChat() { return this.call('resetChat', []); }
  runtimeStatsText() { return this.call('runtimeStatsText', []); }
  async unload() { await this.call('unload', []); this.modelId = null; }
}

/** A WebWorkerMLCEngine on the page's `worker` (running WebWorkerMLCEngineHandler) with `modelId` loaded. */
export async function CreateWebWorkerMLCEngine(worker, modelId, engineConfig = {}, chatOpts = {}) {
  const engine = new WebWorkerMLCEngine(worker, engineConfig);
  await engine.reload(modelId, chatOpts);
  return engine;
}
