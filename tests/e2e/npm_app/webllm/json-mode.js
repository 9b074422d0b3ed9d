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
  const engine = await webllm.CreateMLCEngine(selectedModel, { initProgressCallback: initProgressCallback });

  const request = {
    stream: false,
    messages: [{ role: 'user', content: 'Write a short JSON object describing a cat.' }],
    max_tokens: 24,
    response_format: { type: 'json_object' },
  };
  const reply0 = await engine.chatCompletion(request);
  console.log(reply0);
  console.log('First reply\'s last choice:\n' + (await engine.getMessage()));
  setLabel('generate-label', reply0.choices[0].message.content);
  setLabel('stats-label', await engine.runtimeStatsText());
}

main();
