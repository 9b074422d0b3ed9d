// The demo page (index.html): chat with the engine through the public API of trellis.js only.
// Exposes the engine as `window.trellisEngine` for the console (and the end-to-end tests).

import { CreateEngine } from './trellis.js';

// ---- examples ---------------------------------------------------------------------------------

// Per format, named examples with a prompt each: trellis.engine.examples.demo_examples(), which the
// site serves (web-llm's Harry Potter schema, its EBNF example, its function-calling tools, ...).
const EXAMPLES = await (await fetch(new URL('./examples.json', import.meta.url))).json();
const SCHEMA_EXAMPLES = EXAMPLES.schemas;
const GRAMMAR_EXAMPLES = EXAMPLES.grammars;
const REGEX_EXAMPLES = EXAMPLES.regexes;
const WEATHER_TOOLS = EXAMPLES.tools.tools;
const WEATHER_PROMPT = EXAMPLES.tools.prompt;
const TEXT_PROMPT = EXAMPLES.text.prompt;

const FORMAT_NOTES = { text: 'free text', json: 'JSON Schema', ebnf: 'EBNF grammar', regex: 'regular expression',
  tools: 'tool calls' };

// ---- small helpers ------------------------------------------------------------------------------

const $ = (id) => document.getElementById(id);

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

const pretty = (value) => (value == null ? '' : JSON.stringify(value, null, 2));
const mib = (bytes) => `${(bytes / 2 ** 20).toFixed(bytes < 2 ** 20 ? 2 : 1)} MiB`;

function duration(seconds) {
  if (seconds == null || !Number.isFinite(seconds)) return '–';
  if (seconds < 1e-3) return `${(seconds * 1e6).toFixed(0)} µs`;
  if (seconds < 1) return `${(seconds * 1e3).toFixed(seconds < 0.1 ? 1 : 0)} ms`;
  return `${seconds.toFixed(2)} s`;
}

function rate(value) {
  if (!value) return '–';
  return value >= 100 ? value.toFixed(0) : value.toFixed(value >= 10 ? 1 : 2);
}

function fillSelect(select, examples) {
  examples.forEach((example, i) => select.append(new Option(example.name, String(i))));
}

// ---- state ---------------------------------------------------------------------------------------

const history = [];  // the conversation sent with each request (multi-turn)
let engine = null;
let format = 'text';
let busy = false;
let suggested = TEXT_PROMPT;  // the prompt the current example suggests

// ---- loading -----------------------------------------------------------------------------------

const STAGE_ORDER = ['python', 'weights', 'kernels', 'engine'];
const stageState = {};

function markStage(stage, state, detail) {
  const li = document.querySelector(`.stages li[data-stage="${stage}"]`);
  if (!li) return;
  if (stageState[stage] === 'done' && state !== 'done') return;
  stageState[stage] = state;
  li.classList.toggle('active', state === 'active');
  li.classList.toggle('done', state === 'done');
  if (detail !== undefined) li.querySelector('span').textContent = detail;
}

function onProgress(report) {
  $('load-bar').style.width = `${(report.progress * 100).toFixed(1)}%`;
  $('load-elapsed').textContent = `${report.timeElapsed.toFixed(1)} s · ${(report.progress * 100).toFixed(0)}%`;
  $('status').textContent = report.text;
  const { stage } = report;
  if (stage === 'start') {
    markStage('python', 'active', 'starting Pyodide');
  } else if (stage === 'python') {
    markStage('python', 'done', 'Pyodide and trellis ready');
  } else if (stage === 'weights') {
    const from = report.cachedBytes && report.cachedBytes === report.loadedBytes ? ' (cache)' : '';
    const complete = report.loadedBytes === report.totalBytes;
    markStage('weights', complete ? 'done' : 'active', `${mib(report.loadedBytes)} of ${mib(report.totalBytes)}${from}`);
  } else if (stage === 'kernels') {
    const m = /(\d+) of (\d+)/.exec(report.text);
    markStage('kernels', m && m[1] === m[2] ? 'done' : 'active', m ? `${m[1]} of ${m[2]} compiled` : report.text);
  } else if (stage === 'engine') {
    markStage('engine', 'active', 'buffers, tokenizer, vocabulary');
  } else if (stage === 'ready') {
    for (const s of STAGE_ORDER) markStage(s, 'done');
  }
}

function adapterName(adapter = {}) {
  const name = [adapter.vendor, adapter.architecture].filter(Boolean).join(' ') || adapter.description || 'WebGPU';
  return adapter.isFallbackAdapter ? `${name} (software)` : name;
}

/** The options panel starts at the model's sampling defaults (a 135M model loops when greedy). */
function showSampling(sampling = {}) {
  const given = Object.keys(sampling);
  if ('temperature' in sampling) $('temperature').value = sampling.temperature;
  $('temperature-value').textContent = $('temperature').value;
  if ('top_p' in sampling) $('top-p').value = sampling.top_p;
  if ('repetition_penalty' in sampling) $('repetition-penalty').value = sampling.repetition_penalty;
  $('sampling-source').textContent = given.length
    ? `${given.join(', ')}: the model's defaults` : 'the model has no sampling defaults (OpenAI\'s are shown)';
}

function showReady(info, seconds) {
  showSampling(info.sampling);
  const adapter = adapterName(info.adapter);
  $('chip').className = 'chip ready';
  $('status').textContent = `ready: ${info.model} on ${adapter}`;
  const loader = $('loader');
  loader.classList.add('compact');
  const w = info.weights || {};
  const source = w.totalBytes && w.cachedBytes === w.totalBytes ? 'from the browser cache' : 'downloaded and cached';
  $('load-title').textContent = `Ready in ${seconds.toFixed(1)} s`;
  $('load-elapsed').textContent = `${info.model} · ${adapter} · weights ${mib(info.weight_bytes)} ${source} · `
    + `${info.dispatches_per_token} dispatches per token · context ${info.context}`;
}

function showLoadError(e) {
  $('chip').className = 'chip failed';
  $('status').textContent = `${e.name}: ${e.message}`;
  $('loader').classList.add('failed');
  $('load-title').textContent = `The engine could not start: ${e.name}`;
  $('load-elapsed').textContent = e.message;
}

// ---- chat view ---------------------------------------------------------------------------------

function scrollDown() { const log = $('log'); log.scrollTop = log.scrollHeight; }

function addUser(text) {
  $('empty')?.remove();
  $('log').append(el('div', 'msg user', text));
  scrollDown();
}

function addAssistant(structured) {
  $('empty')?.remove();
  const node = el('div', `msg assistant streaming${structured ? ' structured' : ''}`);
  const text = el('div', 'text');
  const meta = el('div', 'meta');
  node.append(text, meta);
  $('log').append(node);
  scrollDown();
  return { node, text, meta };
}

function addError(e) {
  $('empty')?.remove();
  const node = el('div', 'msg error');
  node.dataset.name = e.name;
  const head = el('div', 'err-head');
  head.append(el('span', 'err-name', e.name || 'Error'));
  const where = [];
  if (e.field) where.push(`field ${e.field}`);
  if (e.keyword) where.push(`keyword ${e.keyword}`);
  if (e.pointer !== undefined && e.pointer !== null) where.push(`at ${e.pointer || '/'}`);
  if (e.line) where.push(`line ${e.line}${e.column ? `, column ${e.column}` : ''}`);
  for (const w of where) head.append(el('span', 'err-where', w));
  node.append(head, el('div', 'err-message', e.message));
  node.append(el('div', 'err-note', engine ? 'The engine is still ready: change the request and send again.' : ''));
  $('log').append(node);
  scrollDown();
}

function badge(kind, text, title) {
  const b = el('span', `badge ${kind}`, text);
  if (title) b.title = title;
  return b;
}

function toolCallView(call) {
  const box = el('div', 'tool-call');
  const head = el('header');
  head.append(el('span', 'fn', `${call.function.name}()`), el('span', 'id', call.id));
  let body = call.function.arguments;
  try { body = pretty(JSON.parse(body)); } catch { /* shown as generated */ }
  box.append(head, el('pre', null, body));
  return { box, head };
}

// ---- requests ----------------------------------------------------------------------------------

function number(id) {
  const v = $(id).value.trim();
  return v === '' ? null : Number(v);
}

/** The response format (or tools) the panel describes; throws a TypeError for bad tool JSON. */
function constraint() {
  if (format === 'json') {
    const schema = $('schema').value.trim();
    return { response_format: schema ? { type: 'json_object', schema } : { type: 'json_object' } };
  }
  if (format === 'ebnf') return { response_format: { type: 'grammar', grammar: $('grammar').value } };
  if (format === 'regex') return { response_format: { type: 'regex', regex: $('regex').value } };
  if (format === 'tools') {
    let tools;
    try { tools = JSON.parse($('tools').value); } catch (e) {
      const error = new TypeError(`the tools are not JSON: ${e.message}`);
      error.name = 'InvalidRequestError';
      error.field = 'tools';
      throw error;
    }
    return { tools, tool_choice: $('tool-choice').value };
  }
  return {};
}

function buildRequest() {
  const request = {
    messages: history.slice(),
    stream: true,
    stream_options: { include_usage: true },
    temperature: Number($('temperature').value),
    top_p: number('top-p') ?? 1,
    repetition_penalty: number('repetition-penalty') ?? 1,
    complete_on_length: $('complete-on-length').checked,
    ...constraint(),
  };
  const maxTokens = number('max-tokens');
  if (maxTokens !== null) request.max_tokens = maxTokens;
  const seed = number('seed');
  if (seed !== null) request.seed = seed;
  return request;
}

/** Shows what was checked: JSON.parse in the page, then the engine's own grammar (engine.validate). */
async function check(view, request, content, toolCalls, finish) {
  const note = (text) => view.meta.append(el('span', 'check-note', text));
  if (finish === 'abort') {
    view.meta.append(badge('warn', '■ stopped', 'interruptGenerate() ended the generation'));
    return;
  }
  if (request.tools && request.tool_choice !== 'none') {
    for (const [i, call] of toolCalls.entries()) {
      const { box, head } = toolCallView(call);
      view.node.insertBefore(box, view.meta);
      const fn = request.tools.find((t) => t.function?.name === call.function.name)?.function;
      let parsed = false;
      try { JSON.parse(call.function.arguments); parsed = true; } catch { /* badge below */ }
      const params = fn?.parameters && typeof fn.parameters === 'object'
        ? { type: 'object', ...fn.parameters } : { type: 'object' };
      const result = parsed ? await engine.validate(call.function.arguments, { type: 'json_object', schema: params }) : null;
      head.append(result?.valid ? badge('good', '✓ arguments valid') : badge('bad', parsed ? '✗ not the schema' : '✗ not JSON'));
      box.dataset.valid = String(Boolean(result?.valid));
      if (i === 0) {
        note(`Checked: JSON.parse of the arguments, then a fresh matcher of the engine's grammar for the tool's `
          + `parameters schema (${result ? `${result.grammar}, ${result.ms.toFixed(1)} ms` : 'not run'}).`);
      }
    }
    if (!toolCalls.length) view.meta.append(badge('info', 'no tool call'));
    return;
  }
  const rf = request.response_format;
  if (!rf) return;
  const isJson = rf.type === 'json_object';
  let parsed = !isJson;
  if (isJson) {
    try { JSON.parse(content); parsed = true; } catch (e) {
      view.meta.append(badge(finish === 'length' ? 'warn' : 'bad',
        finish === 'length' ? '✗ cut by max_tokens: not complete JSON' : '✗ not JSON'));
      note(`JSON.parse: ${e.message}. ${finish === 'length' ? 'Turn on complete_on_length to always close the structure.' : ''}`);
      view.node.dataset.valid = 'false';
      return;
    }
  }
  const result = await engine.validate(content, rf);
  view.node.dataset.valid = String(result.valid);
  const what = isJson ? (rf.schema ? 'schema' : 'JSON object grammar') : rf.type === 'regex' ? 'regex' : 'grammar';
  const grammarOf = { schema: "the schema's grammar", 'JSON object grammar': 'the JSON object grammar',
    regex: "the regex's grammar", grammar: 'the grammar' }[what];
  if (result.valid) {
    view.meta.append(badge('good', isJson ? `✓ JSON parsed · ${rf.schema ? 'schema validated' : 'an object'}`
      : `✓ matches the ${what}`));
  } else {
    view.meta.append(badge(finish === 'length' ? 'warn' : 'bad',
      result.accepted ? `✗ incomplete for the ${what}` : `✗ outside the ${what}`));
  }
  note(`Checked: ${isJson ? 'JSON.parse, then ' : ''}a fresh matcher of ${grammarOf}, as the engine compiled it `
    + `(${result.grammar}), ${result.accepted ? 'accepted every byte' : 'refused a byte'}`
    + `${result.accepted ? (result.complete ? ' and can stop there' : ' but cannot stop there') : ''} `
    + `(${result.ms.toFixed(1)} ms).`);
}

async function showStats(usage) {
  const x = usage?.extra;
  if (x) {
    $('s-prefill').textContent = rate(x.prefill_tokens_per_s);
    $('s-decode').textContent = rate(x.decode_tokens_per_s);
    $('s-ttft').textContent = duration(x.time_to_first_token_s);
    const constrained = x.grammar_cache_hit !== null && x.grammar_cache_hit !== undefined;
    $('s-ginit').textContent = constrained ? duration(x.grammar_init_s) : '–';
    $('s-ginit-label').textContent = constrained ? `grammar init (${x.grammar_cache_hit ? 'cache hit' : 'compiled'})`
      : 'grammar init';
    $('s-gtok').textContent = constrained ? duration(x.grammar_per_token_s) : '–';
  }
  const stats = await engine.runtimeStats();
  const cache = stats.grammar_cache || {};
  $('s-cache').textContent = String(cache.hits ?? 0);
  $('s-cache').append(el('small', null, ` of ${(cache.hits ?? 0) + (cache.misses ?? 0)}`));
  $('stats-text').textContent = await engine.runtimeStatsText();
}

function setBusy(value) {
  busy = value;
  document.body.dataset.state = value ? 'busy' : 'idle';
  $('send').disabled = value || !engine;
  $('stop').disabled = !value;
  $('reset').disabled = value || !engine;
}

async function send(text) {
  let request;
  try {
    request = buildRequest();
  } catch (e) {
    addError(e);
    return;
  }
  history.push({ role: 'user', content: text });
  request.messages.push({ role: 'user', content: text });
  addUser(text);
  const structured = format !== 'text' && format !== 'tools';
  const view = addAssistant(structured);
  if (format === 'tools') view.text.textContent = '';
  setBusy(true);
  let content = '';
  let finish = null;
  let usage = null;
  const toolCalls = [];
  const started = performance.now();
  try {
    const stream = await engine.chat.completions.create(request);
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      const choice = chunk.choices[0];
      if (!choice) continue;
      const delta = choice.delta || {};
      if (delta.content) {
        content += delta.content;
        view.text.textContent = content;
        scrollDown();
      }
      if (delta.tool_calls) toolCalls.push(...delta.tool_calls.map(({ index, ...call }) => call));
      if (choice.finish_reason) finish = choice.finish_reason;
    }
    view.node.classList.remove('streaming');
    if (!content && toolCalls.length) view.text.remove();
    history.push({ role: 'assistant', content: content || null, ...(toolCalls.length ? { tool_calls: toolCalls } : {}) });
    const seconds = (performance.now() - started) / 1000;
    const tokens = usage ? usage.completion_tokens : null;
    view.meta.append(el('span', null, `${finish}${tokens !== null ? ` · ${tokens} tokens` : ''} · ${seconds.toFixed(1)} s`));
    await check(view, request, content, toolCalls, finish);
    await showStats(usage);
    view.node.classList.add('done');
    const turns = history.filter((m) => m.role === 'user').length;
    $('turns').textContent = `${turns} turn${turns === 1 ? '' : 's'} in the conversation`;
  } catch (e) {
    history.pop();
    view.node.remove();
    addError(e);
  } finally {
    setBusy(false);
    scrollDown();
  }
}

// ---- controls ------------------------------------------------------------------------------------

function suggest(prompt) {
  const input = $('prompt');
  if (!input.value.trim() || input.value === suggested) input.value = prompt;
  suggested = prompt;
  resize();
  const hint = $('hint');
  hint.textContent = 'Enter sends, Shift+Enter adds a line. Example: ';
  const b = el('button', null, prompt.length > 90 ? `${prompt.slice(0, 87)}…` : prompt);
  b.type = 'button';
  b.onclick = () => { input.value = prompt; resize(); input.focus(); };
  hint.append(b);
}

function selectFormat(next) {
  format = next;
  for (const tab of document.querySelectorAll('#tabs button')) {
    tab.setAttribute('aria-selected', String(tab.dataset.format === next));
  }
  for (const pane of document.querySelectorAll('.pane')) pane.classList.toggle('shown', pane.dataset.pane === next);
  $('format-note').textContent = FORMAT_NOTES[next];
  const prompts = {
    text: TEXT_PROMPT,
    json: SCHEMA_EXAMPLES[$('schema-example').value]?.prompt,
    ebnf: GRAMMAR_EXAMPLES[$('grammar-example').value]?.prompt,
    regex: REGEX_EXAMPLES[$('regex-example').value]?.prompt,
    tools: WEATHER_PROMPT,
  };
  suggest(prompts[next] || TEXT_PROMPT);
}

function resize() {
  const input = $('prompt');
  input.style.height = 'auto';
  input.style.height = `${Math.min(input.scrollHeight + 2, 160)}px`;
}

function setUpControls() {
  fillSelect($('schema-example'), SCHEMA_EXAMPLES);
  fillSelect($('grammar-example'), GRAMMAR_EXAMPLES);
  fillSelect($('regex-example'), REGEX_EXAMPLES);
  const showSchema = () => {
    const example = SCHEMA_EXAMPLES[$('schema-example').value];
    $('schema').value = pretty(example.schema);
    suggest(example.prompt);
  };
  const showGrammar = () => {
    const example = GRAMMAR_EXAMPLES[$('grammar-example').value];
    $('grammar').value = example.grammar;
    suggest(example.prompt);
  };
  const showRegex = () => {
    const example = REGEX_EXAMPLES[$('regex-example').value];
    $('regex').value = example.regex;
    suggest(example.prompt);
  };
  $('schema-example').onchange = showSchema;
  $('grammar-example').onchange = showGrammar;
  $('regex-example').onchange = showRegex;
  $('schema').value = pretty(SCHEMA_EXAMPLES[0].schema);
  $('grammar').value = GRAMMAR_EXAMPLES[0].grammar;
  $('regex').value = REGEX_EXAMPLES[0].regex;
  $('tools').value = pretty(WEATHER_TOOLS);
  for (const tab of document.querySelectorAll('#tabs button')) tab.onclick = () => selectFormat(tab.dataset.format);

  $('temperature').oninput = () => { $('temperature-value').textContent = $('temperature').value; };
  $('prompt').oninput = resize;
  $('prompt').onkeydown = (event) => {
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $('form').requestSubmit();
    }
  };
  $('form').onsubmit = (event) => {
    event.preventDefault();
    const text = $('prompt').value.trim();
    if (!text || busy || !engine) return;
    $('prompt').value = '';
    resize();
    send(text);
  };
  $('stop').onclick = () => engine?.interruptGenerate();
  $('reset').onclick = async () => {
    await engine.resetChat();
    history.length = 0;
    $('log').replaceChildren();
    $('turns').textContent = '';
    $('log').append(el('div', 'empty', 'The conversation was reset (resetChat): the next message starts afresh.'));
  };
  selectFormat('text');
}

// ---- start -----------------------------------------------------------------------------------------

setUpControls();
document.body.dataset.state = 'loading';
const t0 = performance.now();
try {
  engine = await CreateEngine(undefined, { initProgressCallback: onProgress });
  window.trellisEngine = engine;
  showReady(engine.info, (performance.now() - t0) / 1000);
  $('prompt').disabled = false;
  setBusy(false);
  $('prompt').focus();
} catch (e) {
  showLoadError(e);
  document.body.dataset.state = 'failed';
}
