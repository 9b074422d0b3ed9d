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
  const engine = await webllm.CreateMLCEngine(selectedModel, { initProgressCallback: initProgressCallback },
    { context_window_size: 1024 });

  const reply0 = await engine.chat.completions.create({
    messages: [
      { role: 'system', content: 'You are a helpful assistant.' },
      { role: 'user', content: 'List three US states.' },
    ],
    temperature: 1.5,
    max_tokens: 16,
    logprobs: true,
    top_logprobs: 2,
  });
  console.log(reply0);
  console.log(reply0.usage);
  setLabel('generate-label', reply0.choices[0].message.content);
  setLabel('stats-label', await engine.runtimeStatsText());
}

main();
