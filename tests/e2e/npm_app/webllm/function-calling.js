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

  const tools = [
    {
      type: 'function',
      function: {
        name: 'get_current_weather',
        description: 'Get the current weather in a given location',
        parameters: {
          type: 'object',
          properties: {
            location: { type: 'string', description: 'The city and state, e.g. San Francisco, CA' },
            unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
          },
          required: ['location'],
        },
      },
    },
  ];

  const request = {
    stream: false,
    messages: [{ role: 'user', content: 'What is the current weather in celsius in Tokyo and Paris?' }],
    tool_choice: 'required',
    tools: tools,
    max_tokens: 120,
    complete_on_length: true,
  };

  const reply = await engine.chat.completions.create(request);
  console.log(reply.choices[0].message);
  console.log(reply.usage);
  setLabel('generate-label', JSON.stringify(reply.choices[0].message.tool_calls));
  setLabel('stats-label', await engine.runtimeStatsText());
}

main();
