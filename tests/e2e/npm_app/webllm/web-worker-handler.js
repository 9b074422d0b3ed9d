import { WebWorkerMLCEngineHandler } from 'trellis-llm/webllm';

const handler = new WebWorkerMLCEngineHandler();
self.onmessage = (msg) => {
  handler.onmessage(msg);
};
