import * as webllm from 'trellis-llm/webllm';

function setLabel(id, text) {
  const label = document.getElementById(id);
  if (label == null) throw Error('Cannot find label ' + id);
  label.innerText = text;
}

async function simpleStructuredTextExample() {
  const schema = JSON.stringify({
    type: 'object',
    properties: {
      size: { type: 'integer' },
      is_accepted: { type: 'boolean' },
      num: { type: 'number' },
    },
    required: ['size', 'is_accepted', 'num'],
  });

  const initProgressCallback = (report) => {
    setLabel('init-label', report.text);
  };
  const engine = await webllm.CreateMLCEngine('tiny-llama', { initProgressCallback: initProgressCallback });

  const request = {
    stream: false,
    messages: [
      { role: 'user', content: 'Generate a json containing three fields: an integer field named size, a '
        + 'boolean field named is_accepted, and a float field named num.' },
    ],
    max_tokens: 40,
    complete_on_length: true,
    response_format: { type: 'json_object', schema: schema },
  };

  const reply0 = await engine.chatCompletion(request);
  console.log(reply0);
  console.log('Output:\n' + (await engine.getMessage()));
  console.log(reply0.usage);
  setLabel('generate-label', reply0.choices[0].message.content);
  setLabel('stats-label', await engine.runtimeStatsText());
}

simpleStructuredTextExample();
