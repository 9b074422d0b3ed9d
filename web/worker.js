// The Trellis engine in a module Web Worker: Pyodide runs the `trellis` Python package, WebGPU runs
// the model's kernels, the grammar core runs as wasm. trellis.js is the page's side of it.
//
// Messages (page -> worker): {type: 'init', modelUrl, context}, {type: 'request', id, kind: 'chat' |
// 'completion', request}, {type: 'interrupt'}, {type: 'resetChat', id}, {type: 'stats', id},
// {type: 'validate', id, text, responseFormat}.
// (worker -> page): {type: 'progress', report}, {type: 'ready', info}, {type: 'initError', error},
// {type: 'chunk', id, chunk: JSON text}, {type: 'result', id, value}, {type: 'error', id, error}.
// An error is {name, message, field?, keyword?, pointer?, line?, column?}: Python's exception type
// name and message, which trellis.js turns back into the class of the same name.
//
// Everything is fetched from where the page said (never a CDN): this worker's folder (trellis.zip,
// the grammar wasm), `pyodideBase` (the pyodide npm package's files) and the model's folder. Weight shards are
// verified by sha256 and kept in the Cache API, keyed by their hash, so a reload reads them locally.

import { loadGrammarCore } from './grammar.js';

const SITE = new URL('./', import.meta.url);
const SHARD_CACHE = 'trellis-shards-v1';
const PYTHON_CACHE = 'trellis-python-v1';
const started = performance.now();
let worker = null;  // trellis_worker's functions (PyProxies, taken once), once the engine is built
let queue = Promise.resolve();  // requests run one at a time: the engine holds one KV cache

const post = (message) => self.postMessage(message);
const elapsed = () => (performance.now() - started) / 1000;

// Overall progress: weights, kernel compilation and Python's start, weighted by how long they take
// on a software adapter. Each part only grows, so the sum never goes back.
const parts = { weights: 0, kernels: 0, python: 0 };
const WEIGHT = { weights: 0.6, kernels: 0.3, python: 0.1 };

function progress(text, extra = {}) {
  const fraction = Object.keys(parts).reduce((sum, k) => sum + WEIGHT[k] * parts[k], 0);
  const rounded = Math.min(1, Math.round(fraction * 1e4) / 1e4);  // all parts done reads exactly 1
  post({ type: 'progress', report: { progress: rounded, timeElapsed: elapsed(), text, ...extra } });
}

function errorRecord(e, name = 'TrellisError') {
  if (e && typeof e === 'object' && 'name' in e && 'message' in e && !(e instanceof Error)) return e;
  return { name: e && e.name && e.name !== 'Error' ? e.name : name, message: String((e && e.message) || e) };
}

async function fetchOk(url, init) {
  const response = await fetch(url, init);
  if (!response.ok) throw new Error(`fetching ${url} failed: HTTP ${response.status}`);
  return response;
}

// An engine file that is not where it was looked for, as the page's AssetNotFoundError.
async function fetchAsset(url, option, init) {
  const response = await fetch(url, init).catch((e) => ({ ok: false, status: e.message }));
  if (!response.ok) {
    throw { name: 'AssetNotFoundError', message: `${url} was not found (HTTP ${response.status}): ${option} must be `
      + `the URL of the folder that serves ${option === 'pyodideBase' ? 'the pyodide package' : 'the trellis-llm package'}'s files`,
      url: String(url), option };
  }
  return response;
}

async function sha256Hex(bytes) {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
  return Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('');
}

// Reads a response body, calling onBytes(n) as chunks arrive.
async function readBody(response, onBytes) {
  const length = Number(response.headers.get('content-length')) || 0;
  const reader = response.body.getReader();
  const chunks = [];
  let received = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    received += value.length;
    onBytes(value.length);
  }
  if (chunks.length === 1 && (!length || length === received)) return chunks[0];
  const out = new Uint8Array(received);
  let offset = 0;
  for (const c of chunks) { out.set(c, offset); offset += c.length; }
  return out;
}

// The model's small files (manifest, WGSL, tokenizer): name -> Uint8Array, plus the parsed manifest.
async function fetchProgram(base) {
  const get = async (name) => new Uint8Array(await (await fetchOk(new URL(name, base), { cache: 'no-store' })).arrayBuffer());
  const manifestUrl = new URL('manifest.json', base);
  const first = await fetch(manifestUrl, { cache: 'no-store' }).catch((e) => ({ ok: false, status: e.message }));
  if (!first.ok) {
    throw { name: 'ModelNotFoundError', message: `no built model at ${base}: ${manifestUrl} answered HTTP ${first.status} `
      + '(a model folder is what `python3 build.py model` writes; modelBase places model ids)', url: String(base) };
  }
  const files = new Map([['manifest.json', new Uint8Array(await first.arrayBuffer())]]);
  const manifest = JSON.parse(new TextDecoder().decode(files.get('manifest.json')));
  const names = new Set(Object.values(manifest.kernels).map((k) => k.wgsl));
  names.add(manifest.tokenizer.file);
  await Promise.all([...names].map(async (name) => files.set(name, await get(name))));
  return { files, manifest };
}

// Adds the weight shards to `files`, each verified by sha256, from the Cache API when it has them.
async function fetchShards(base, manifest, files) {
  const shards = manifest.weights.shards;
  const totalBytes = shards.reduce((n, s) => n + s.bytes, 0);
  let loadedBytes = 0, fetchedBytes = 0, cachedBytes = 0;
  const report = () => {
    parts.weights = totalBytes ? loadedBytes / totalBytes : 1;
    progress(`weights: ${(loadedBytes / 2 ** 20).toFixed(1)} of ${(totalBytes / 2 ** 20).toFixed(1)} MiB`,
      { stage: 'weights', loadedBytes, totalBytes, fetchedBytes, cachedBytes });
  };
  const cache = 'caches' in self ? await caches.open(SHARD_CACHE) : null;
  for (const shard of shards) {  // in order, so that progress reads naturally
    const url = new URL(shard.file, base);
    const key = new Request(`${url.href}?sha256=${shard.sha256}`);
    let data = null;
    const hit = cache && await cache.match(key);
    if (hit) {
      data = new Uint8Array(await hit.arrayBuffer());
      // Only verified shards are put in the cache, under their sha256: a hit checks the size rather
      // than hash the weights again on CPUs that start-up shares with Pyodide and the shader compiles.
      if (data.length !== shard.bytes) {
        data = null;  // a damaged entry: fetch again
        await cache.delete(key);
      } else {
        loadedBytes += data.length;
        cachedBytes += data.length;
        report();
      }
    }
    if (!data) {
      const response = await fetchOk(url, { cache: 'no-store' });
      data = await readBody(response, (n) => { loadedBytes += n; fetchedBytes += n; report(); });
      if (data.length !== shard.bytes || await sha256Hex(data) !== shard.sha256) {
        throw { name: 'ModelError', message: `weight shard ${shard.file} is corrupt (size or sha256 differs from the manifest)` };
      }
      if (cache) {
        // Drop entries of earlier builds of this file before keeping this one.
        for (const old of await cache.keys()) {
          if (old.url.split('?')[0] === url.href) await cache.delete(old);
        }
        await cache.put(key, new Response(data, { headers: { 'content-type': 'application/octet-stream' } }));
      }
    }
    files.set(shard.file, data);
  }
  report();
  return { totalBytes, fetchedBytes, cachedBytes };
}

// Compiles the kernels' pipelines into `pipelines` (kernel name -> GPUComputePipeline, or
// {compileError} when its compile failed), first those of the decode and mask plans: they are all the
// engine needs to be ready. On a software adapter compiling takes longer than anything else at
// start-up, most of it the prefill plan's larger kernels: `compileRest()` starts those once the engine
// is ready (prefill runs token by token until they are in). Which kernels the plans run depends on the
// kernel variant Python chooses once it has started (`swaps`: a promise of {kernel: its replacement});
// the decode and mask plans' kernels that no variant replaces compile meanwhile.
function compileKernels(device, manifest, files, pipelines, swaps) {
  const text = new TextDecoder();
  const replaceable = new Set(Object.values(manifest.variants || {}).flatMap((v) => Object.keys(v.kernels)));
  const kernelsOf = (plans, chosen) => new Set(plans.flatMap((plan) =>
    manifest.plans[plan].dispatches.map((d) => chosen[d.kernel] || d.kernel)));
  // Shader modules are made as soon as their kernels are known, while `files` (cleared once the
  // engine is built) holds their sources.
  const modules = new Map();
  const makeModules = (names) => names.forEach((name) => modules.has(name) || modules.set(name,
    device.createShaderModule({ label: name, code: text.decode(files.get(manifest.kernels[name].wgsl)) })));
  let needed = kernelsOf(['decode', 'mask'], {});
  let done = 0;
  const compiles = new Map();  // kernel name -> its compile (each kernel compiles once)
  const compile = (name) => {
    if (compiles.has(name)) return compiles.get(name);
    const compiled = device.createComputePipelineAsync({ label: name, layout: 'auto',
      compute: { module: modules.get(name), entryPoint: manifest.kernels[name].entry_point } })
      .catch((e) => ({ compileError: e.message }))
      .then((pipeline) => {
        pipelines.set(name, pipeline);
        if (!needed.has(name)) return;
        parts.kernels = ++done / needed.size;
        progress(`GPU kernels: ${done} of ${needed.size} compiled`, { stage: 'kernels' });
      });
    compiles.set(name, compiled);
    return compiled;
  };
  const first = [...needed].filter((name) => !replaceable.has(name));
  makeModules(first);
  first.forEach(compile);
  const all = swaps.then((chosen) => {
    needed = kernelsOf(['decode', 'mask'], chosen);  // the kernels compiled so far are in it
    const every = kernelsOf(Object.keys(manifest.plans), chosen);
    makeModules(every);
    return every;
  });
  return {
    needed: all.then(() => Promise.all([...needed].map(compile))),
    compileRest: () => all.then((every) => Promise.all([...every].map(compile))),
  };
}

// The subgroup probe's raw output (64 sizes, then 64 lanes; Python's backend.subgroup_size_of says
// what they mean). `probe`: the probe's source.
async function runSubgroupProbe(device, probe) {
  const usage = GPUBufferUsage;
  const out = device.createBuffer({ size: 512, usage: usage.STORAGE | usage.COPY_SRC });
  const read = device.createBuffer({ size: 512, usage: usage.MAP_READ | usage.COPY_DST });
  const code = await probe;
  const pipeline = await device.createComputePipelineAsync({ label: 'subgroup-probe', layout: 'auto',
    compute: { module: device.createShaderModule({ code }), entryPoint: 'main' } });
  const encoder = device.createCommandEncoder();
  const pass = encoder.beginComputePass();
  pass.setPipeline(pipeline);
  pass.setBindGroup(0, device.createBindGroup({ layout: pipeline.getBindGroupLayout(0),
    entries: [{ binding: 0, resource: { buffer: out } }] }));
  pass.dispatchWorkgroups(1);
  pass.end();
  encoder.copyBufferToBuffer(out, 0, read, 0, 512);
  device.queue.submit([encoder.finish()]);
  await read.mapAsync(GPUMapMode.READ);
  const words = Array.from(new Uint32Array(read.getMappedRange().slice(0)));
  read.destroy();
  out.destroy();
  return words;
}

async function requestDevice() {
  if (!self.navigator.gpu) throw { name: 'RuntimeBackendError', message: 'this browser has no WebGPU (navigator.gpu is missing)' };
  // The desktop's subgroup probe too, fetched while the adapter and device come.
  const probe = fetchAsset(new URL('subgroup_probe.wgsl', SITE), 'assetBase').then((r) => r.text());
  probe.catch(() => {});  // (unused when the device has no subgroups)
  const adapter = await navigator.gpu.requestAdapter({ powerPreference: 'high-performance' });
  if (!adapter) throw { name: 'RuntimeBackendError', message: 'no WebGPU adapter is available' };
  // Kernels stay within WebGPU's default limits except buffer sizes (weights, long contexts).
  const requiredLimits = {
    maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
    maxBufferSize: adapter.limits.maxBufferSize,
  };
  const subgroups = adapter.features.has('subgroups');  // for kernel variants that share loads across lanes
  const device = await adapter.requestDevice({ requiredLimits, requiredFeatures: subgroups ? ['subgroups'] : [] });
  const i = adapter.info || {};
  const info = { vendor: i.vendor, architecture: i.architecture, device: i.device, description: i.description,
    isFallbackAdapter: i.isFallbackAdapter ?? adapter.isFallbackAdapter };
  // Only one size will do: a device that picks a size per pipeline could give the probe another.
  const oneSize = (i.subgroupMinSize ?? 0) === (i.subgroupMaxSize ?? 0);
  const probed = subgroups && oneSize ? await runSubgroupProbe(device, probe).catch(() => null) : null;
  return { device, info, probe: probed };
}

// Python's start-up, kept as a Pyodide memory snapshot in the Cache API: a cold start runs the
// interpreter's initialisation and imports trellis (seconds on a slow CPU); a restore copies the
// snapshot into the wasm memory (a tenth of that). The key is trellis.zip's sha256, so a rebuilt
// package starts cold again; a snapshot that Pyodide refuses (another build) is dropped. The files
// unpacked from trellis.zip live in JS memory, outside the snapshot, so they are unpacked each time
// (modules not imported yet load from them).
async function startPython(indexURL) {
  const t = performance.now();
  const pyodideModule = new URL('pyodide.mjs', indexURL).href;
  // Checked first: a failed import() says neither the URL nor the status.
  const [{ loadPyodide }, archive] = await Promise.all([
    fetchAsset(pyodideModule, 'pyodideBase', { method: 'HEAD', cache: 'no-store' }).then(() => import(pyodideModule)),
    fetchAsset(new URL('trellis.zip', SITE), 'assetBase', { cache: 'no-store' }).then((r) => r.arrayBuffer()),
  ]);
  const cache = 'caches' in self ? await caches.open(PYTHON_CACHE) : null;
  const key = new Request(new URL(`python-snapshot?trellis=${await sha256Hex(archive)}`, SITE).href);
  const hit = cache && await cache.match(key);
  let pyodide = null;
  if (hit) {
    try {
      pyodide = await loadPyodide({ indexURL, _loadSnapshot: new Uint8Array(await hit.arrayBuffer()) });
    } catch (e) {
      await cache.delete(key);
    }
  }
  const restored = pyodide !== null;
  pyodide = pyodide || await loadPyodide({ indexURL, _makeSnapshot: cache !== null });
  const pythonMs = performance.now() - t;
  pyodide.unpackArchive(archive, 'zip', { extractDir: '/trellis' });
  let snapshot = null;
  if (!restored) {
    pyodide.runPython("import sys; sys.path.insert(0, '/trellis'); import trellis_worker");
    // Before Python holds any JS object (the snapshot cannot carry those). A snapshot that cannot be
    // made only costs the next load its restore.
    try {
      if (cache) snapshot = pyodide.makeMemorySnapshot();
    } catch (e) {
      console.warn(`trellis: no Python snapshot kept (${e.message})`);
    }
  }
  // Kept after the engine is ready: writing tens of MiB would compete with the start-up.
  const keep = async () => {
    if (!snapshot) return;
    for (const old of await cache.keys()) await cache.delete(old);
    await cache.put(key, new Response(snapshot, { headers: { 'content-type': 'application/octet-stream' } }));
  };
  const module = pyodide.pyimport('trellis_worker');
  return { pyodide, module, restored, keep, packageMs: performance.now() - t - pythonMs };
}

// The model's id: the folder segment of its URL (`/models/<id>/`), as the desktop names a model by
// its folder; requests' `model` field and every response's `model` use it.
function modelIdOf(base) {
  const parts = base.pathname.split('/').filter(Boolean);
  const i = parts.lastIndexOf('models');
  return decodeURIComponent((i >= 0 && i + 1 < parts.length ? parts[i + 1] : parts[parts.length - 1]) || '');
}

async function init({ modelUrl, context, modelId, pyodideBase }) {
  const t0 = performance.now();
  progress('starting Python (Pyodide), WebGPU and the grammar core', { stage: 'start' });
  const timed = async (promise) => { await promise; return performance.now() - t0; };
  const base = new URL(modelUrl, SITE);
  const python = startPython(pyodideBase || new URL('pyodide/', SITE).href).then((p) => { parts.python = 1; progress('Python ready', { stage: 'python' }); return p; });
  const gpu = requestDevice();
  const grammarUrl = new URL('trellis_grammar.wasm', SITE);
  const grammar = fetchAsset(grammarUrl, 'assetBase', { method: 'HEAD', cache: 'no-store' })
    .then(() => loadGrammarCore(grammarUrl.href));
  const program = fetchProgram(base);
  const shards = program.then(({ manifest, files }) => fetchShards(base, manifest, files));
  // Which kernels run (the adapter's kernel variant) is Python's choice, by the desktop's rule, made
  // once Python has started; kernels no variant replaces compile before it.
  const choice = Promise.all([python, gpu, program]).then(([{ module }, { info, probe }, { files }]) => {
    const answer = JSON.parse(module.kernel_variant(files, JSON.stringify({ adapter: info, probe })));
    if (answer.error) throw answer.error;
    return answer.value;
  });
  choice.catch(() => {});  // (awaited below)
  const pipelines = new Map();
  const kernels = Promise.all([gpu, program]).then(([{ device }, { manifest, files }]) =>
    compileKernels(device, manifest, files, pipelines, choice.then((c) => c.kernels)));
  const needed = kernels.then((k) => k.needed);
  const kernelsDone = timed(needed);
  kernelsDone.catch(() => {});  // (its failure fails the device or the program too, reported below)
  // The engine is built once Python and the weights are in, while the kernels may still compile:
  // only its plans wait for them.
  const [pythonMs, , , weightsMs] = await Promise.all([timed(python), timed(gpu), timed(grammar), timed(shards)]);
  const { module, packageMs, restored, keep } = await python;
  const { device } = await gpu;
  const { files } = await program;
  const chosen = await choice;
  progress('building the engine (GPU buffers, tokenizer, vocabulary)', { stage: 'engine' });
  const t1 = performance.now();
  const answer = JSON.parse(await module.build(files, device, pipelines, needed, JSON.stringify(chosen),
    context || 0, modelId || modelIdOf(base)));
  const kernelsMs = await kernelsDone;
  files.clear();
  if (answer.error) throw answer.error;
  worker = { request: module.request, interrupt: module.interrupt, reset_chat: module.reset_chat, stats: module.stats,
    validate: module.validate };
  // allKernelsMs: when the prefill plan's kernels are in too (null until then).
  const timings = { pythonMs, packageMs, pythonRestored: restored, weightsMs, kernelsMs, allKernelsMs: null,
    engineMs: performance.now() - t1, totalMs: performance.now() - t0 };
  (await kernels).compileRest().then(() => {
    timings.allKernelsMs = performance.now() - t0;
    post({ type: 'kernels', allKernelsMs: timings.allKernelsMs });
  });
  keep().catch(() => {});  // without a snapshot the next start is cold: nothing else depends on it
  progress('ready', { stage: 'ready' });
  post({ type: 'ready', info: { ...answer.value, weights: await shards, timings } });
}

async function runRequest({ id, kind, request }) {
  const onChunk = (text) => post({ type: 'chunk', id, chunk: text });
  const answer = JSON.parse(await worker.request(kind, JSON.stringify(request ?? null), onChunk));
  if (answer.error) post({ type: 'error', id, error: answer.error });
  else post({ type: 'result', id, value: answer.value });
}

function enqueue(id, job) {
  queue = queue.then(job).catch((e) => post({ type: 'error', id, error: errorRecord(e) }));
}

self.onmessage = ({ data }) => {
  const { type, id } = data;
  if (type === 'init') {
    init(data).catch((e) => post({ type: 'initError', error: errorRecord(e) }));
  } else if (!worker) {
    post({ type: 'error', id, error: { name: 'TrellisError', message: 'the engine is not ready' } });
  } else if (type === 'interrupt') {
    worker.interrupt();  // runs between two tokens of the request in progress
  } else if (type === 'request') {
    enqueue(id, () => runRequest(data));
  } else if (type === 'resetChat') {
    enqueue(id, () => { worker.reset_chat(); post({ type: 'result', id, value: null }); });
  } else if (type === 'validate') {  // queued: a check reads the grammar cache that requests fill
    enqueue(id, () => {
      const answer = JSON.parse(worker.validate(data.text, JSON.stringify(data.responseFormat ?? null)));
      post(answer.error ? { type: 'error', id, error: answer.error } : { type: 'result', id, value: answer.value });
    });
  } else if (type === 'stats') {  // not queued: it reads the last finished request's figures
    post({ type: 'result', id, value: JSON.parse(worker.stats()) });
  } else {
    post({ type: 'error', id, error: { name: 'TrellisError', message: `unknown message type ${type}` } });
  }
};
