// Type-checked by tests/e2e/test_npm.py (tsc --strict) against the installed package: web-llm's type
// names and the calls a web-llm program makes compile against trellis-llm's declarations.
import * as webllm from 'trellis-llm/webllm';
import { CreateEngine, AssetNotFoundError } from 'trellis-llm';
import type { ChatCompletionRequest, ChatCompletionTool, ChatCompletionMessageParam, MLCEngineInterface, AppConfig, ModelRecord, InitProgressReport } from 'trellis-llm/webllm';

const tools: ChatCompletionTool[] = [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }];
const messages: ChatCompletionMessageParam[] = [{ role: 'user', content: 'hi' }];
const record: ModelRecord = { model_id: 'a', model: '/models/a/' };
const appConfig: AppConfig = { model_list: [record] };
async function main() {
  const engine: MLCEngineInterface = await webllm.CreateMLCEngine('a', { appConfig, initProgressCallback: (r: InitProgressReport) => console.log(r.progress), assetBase: '/x/' });
  const request: ChatCompletionRequest = { messages, tools, max_tokens: 4 };
  const reply = await engine.chat.completions.create({ ...request, stream: false });
  console.log(reply.choices[0].message.tool_calls?.[0].function.name);
  for await (const chunk of await engine.chat.completions.create({ messages, stream: true })) console.log(chunk.choices[0].delta.content);
  await engine.reload('a');
  console.log(await engine.getMessage(), await webllm.hasModelInCache('a', appConfig));
  const w = await webllm.CreateWebWorkerMLCEngine(new Worker('w.js'), 'a');
  await w.chatCompletion(request);
  const e = await CreateEngine('m', { pyodideBase: '/p/' });
  await e.validate('{}', { type: 'json_object' });
  const err = new AssetNotFoundError('x');
  console.log(err.url, webllm.prebuiltAppConfig.model_list.length);
}
main();
