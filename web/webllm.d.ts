// TypeScript declarations for webllm.js: web-llm's names over trellis.js's types.

import type {
  ChatCompletion, ChatCompletionChunk, ChatCompletionRequest, ChatMessage, Completion, CompletionRequest,
  EngineConfig, InitProgressReport, Tool,
} from './trellis.js';

export * from './trellis.js';

export type ChatCompletionTool = Tool;
export type ChatCompletionMessageParam = ChatMessage;
export type ChatCompletionRequestNonStreaming = ChatCompletionRequest & { stream?: false | null };
export type ChatCompletionRequestStreaming = ChatCompletionRequest & { stream: true };
export type CompletionCreateParams = CompletionRequest;
export type InitProgressCallback = (report: InitProgressReport) => void;

/** A model an engine can load: `model` is the URL of a folder built by `python3 build.py model`. */
export interface ModelRecord {
  model_id: string;
  model: string;
  /** Accepted for web-llm's records; Trellis has no per-model wasm. */
  model_lib?: string;
  overrides?: ChatOptions;
}

export interface AppConfig {
  model_list: ModelRecord[];
  useIndexedDBCache?: boolean;
}

export interface ChatOptions {
  /** KV cache size in tokens. */
  context_window_size?: number;
}

export interface MLCEngineConfig extends Omit<EngineConfig, 'initProgressCallback'> {
  appConfig?: AppConfig;
  initProgressCallback?: InitProgressCallback;
}

/** The models served beside the engine (<modelBase>models.json), read when an engine first needs them. */
export declare const prebuiltAppConfig: AppConfig;

export interface MLCEngineInterface {
  chat: {
    completions: {
      create(request: ChatCompletionRequestStreaming): Promise<AsyncIterable<ChatCompletionChunk>>;
      create(request: ChatCompletionRequestNonStreaming): Promise<ChatCompletion>;
      create(request: ChatCompletionRequest): Promise<ChatCompletion | AsyncIterable<ChatCompletionChunk>>;
    };
  };
  completions: {
    create(request: CompletionRequest & { stream: true }): Promise<AsyncIterable<Completion>>;
    create(request: CompletionRequest & { stream?: false | null }): Promise<Completion>;
    create(request: CompletionRequest): Promise<Completion | AsyncIterable<Completion>>;
  };
  reload(modelId: string | string[], chatOpts?: ChatOptions): Promise<void>;
  chatCompletion(request: ChatCompletionRequestStreaming): Promise<AsyncIterable<ChatCompletionChunk>>;
  chatCompletion(request: ChatCompletionRequestNonStreaming): Promise<ChatCompletion>;
  chatCompletion(request: ChatCompletionRequest): Promise<ChatCompletion | AsyncIterable<ChatCompletionChunk>>;
  completion(request: CompletionRequest): Promise<Completion | AsyncIterable<Completion>>;
  getMessage(): Promise<string>;
  interruptGenerate(): void;
  resetChat(): Promise<void>;
  runtimeStatsText(): Promise<string>;
  unload(): Promise<void>;
  setInitProgressCallback(callback: InitProgressCallback): void;
  getInitProgressCallback(): InitProgressCallback | undefined;
  setAppConfig(appConfig: AppConfig): void;
}

/** The engine; its members are MLCEngineInterface's (declaration merging, so they are written once). */
export interface MLCEngine extends MLCEngineInterface {}
export declare class MLCEngine {
  constructor(engineConfig?: MLCEngineConfig);
}

export declare class WebWorkerMLCEngine extends MLCEngine {
  constructor(worker: Worker, engineConfig?: MLCEngineConfig);
}

/** Runs in the page's own worker: `self.onmessage = (msg) => handler.onmessage(msg)`. */
export declare class WebWorkerMLCEngineHandler {
  constructor();
  onmessage(event: MessageEvent): Promise<void>;
}

export declare function CreateMLCEngine(modelId: string | string[], engineConfig?: MLCEngineConfig,
  chatOpts?: ChatOptions): Promise<MLCEngine>;
export declare function CreateWebWorkerMLCEngine(worker: Worker, modelId: string | string[], engineConfig?: MLCEngineConfig,
  chatOpts?: ChatOptions): Promise<WebWorkerMLCEngine>;
export declare function hasModelInCache(modelId: string, appConfig?: AppConfig): Promise<boolean>;
export declare function deleteModelInCache(modelId: string, appConfig?: AppConfig): Promise<void>;
export declare function deleteModelAllInfoInCache(modelId: string, appConfig?: AppConfig): Promise<void>;
