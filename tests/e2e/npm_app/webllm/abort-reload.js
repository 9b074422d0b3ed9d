import * as webllm from 'trellis-llm/webllm';

function setLabel(id, text) {
  const label = document.getElementById(id);
  if (label == null) throw Error('Cannot find label ' + id);
  label.innerText = text;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function main() {
  const engine = new webllm.MLCEngine();
  engine.setInitProgressCallback((report) => {
    setLabel('init-label', report.text);
  });
  const selectedModel = 'tiny-llama';
  await engine.reload(selectedModel);

  let generated = '';
  const chunks = await engine.chat.completions.create({
    stream: true,
    messages: [{ role: 'user', content: 'Write a long story about a lighthouse.' }],
    max_tokens: 400,
    ignore_eos: true,
  });
  let finishReason = null;
  for await (const chunk of chunks) {
    generated += chunk.choices[0]?.delta?.content || '';
    setLabel('generate-label', generated);
    if (chunk.choices[0]?.finish_reason) finishReason = chunk.choices[0].finish_reason;
    if (generated.length > 0 && finishReason === null) engine.interruptGenerate();  // the user pressed Stop
  }
  console.log('aborted', finishReason, generated, await engine.getMessage());

  await engine.unload();
  await engine.reload(selectedModel);
  const reply = await engine.chat.completions.create({
    messages: [{ role: 'user', content: 'Hello again.' }],
    max_tokens: 8,
  });
  console.log('reloaded', reply.choices[0].finish_reason, await engine.getMessage());
  setLabel('stats-label', await engine.runtimeStatsText());
}

main();
