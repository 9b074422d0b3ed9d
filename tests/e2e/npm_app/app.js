// An app that embeds Trellis from npm: `npm install trellis-llm`, bundled (esbuild), serving
// node_modules/ and its own built model. The page asks for a person as JSON that matches a schema.
import { CreateEngine, TrellisError } from 'trellis-llm';

export const assets = {
  assetBase: '/node_modules/trellis-llm/',  // the package's worker, Python package, grammar wasm
  pyodideBase: '/node_modules/pyodide/',  // its pyodide dependency
  modelBase: '/models/',
};

const schema = {
  type: 'object',
  properties: { name: { type: 'string', maxLength: 12 }, age: { type: 'integer', minimum: 0, maximum: 120 } },
  required: ['name', 'age'],
  additionalProperties: false,
};

async function main() {
  const status = document.getElementById('status');
  const engine = await CreateEngine('tiny-llama', {
    ...assets, initProgressCallback: (report) => { status.textContent = report.text; } });
  const reply = await engine.chat.completions.create({
    messages: [{ role: 'user', content: 'Invent a person.' }],
    max_tokens: 40,
    complete_on_length: true,  // Trellis: a cut-off answer is still finished as valid JSON
    response_format: { type: 'json_schema', json_schema: { name: 'person', schema } },
  });
  const text = reply.choices[0].message.content;
  document.getElementById('answer').textContent = text;
  status.textContent = 'done';
  window.result = { text, schema, model: reply.model, finish_reason: reply.choices[0].finish_reason };
  await engine.unload();
}

// For the tests: the API as the bundle holds it.
window.trellis = await import('trellis-llm');
main().catch((e) => { window.result = { error: { name: e.name, message: e.message, trellis: e instanceof TrellisError } }; });
