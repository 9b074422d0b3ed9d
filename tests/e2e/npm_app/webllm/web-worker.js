import * as webllm from 'trellis-llm/webllm';

function setLabel(id, text) {
  const label = document.getElementById(id);
  if (label == null) throw Error('Cannot find label ' + id);
  label.innerText = text;
}

async function main() {
  const initProgressCallback = (report) => {
    setLabel('init-label', report.text);
  };
  const selectedModel = 'tiny-llama';
  const engine = await webllm.CreateWebWorkerMLCEngine(
    new Worker(new URL('./web-worker-handler.js', import.meta.url), { type: 'module' }),
    selectedModel,
    { initProgressCallback: initProgressCallback },
  );

  const chunks = await engine.chat.completions.create({
    messages: [{ role: 'user', content: 'Say hello.' }],
    stream: true,
    max_tokens: 8,
  });
  let reply = '';
  for await (const chunk of chunks) {
    reply += chunk.choices[0]?.delta?.content || '';
    setLabel('generate-label', reply);
  }
  console.log('worker reply', reply, await engine.getMessage());
  setLabel('stats-label', await engine.runtimeStatsText());
}

main();
