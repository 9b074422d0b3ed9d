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
    stream: true,
    stream_options: { include_usage: true },
    messages: [
      { role: 'system', content: 'You are a pirate chatbot who always responds in pirate speak!' },
      { role: 'user', content: 'Who are you?' },
    ],
    logprobs: true,
    top_logprobs: 2,
    max_tokens: 16,
  };

  const asyncChunkGenerator = await engine.chat.completions.create(request);
  let message = '';
  for await (const chunk of asyncChunkGenerator) {
    console.log(chunk);
    message += chunk.choices[0]?.delta?.content || '';
    setLabel('generate-label', message);
    if (chunk.usage) {
      console.log(chunk.usage);
    }
  }
  console.log('Final message:\n', await engine.getMessage());
  setLabel('stats-label', await engine.runtimeStatsText());
}

main();
