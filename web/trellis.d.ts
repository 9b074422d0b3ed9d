// TypeScript declarations for trellis.js (the browser API; shapes follow OpenAI / web-llm).

export interface InitProgressReport {
  /** 0..1 */
  progress: number;
  /** Seconds since the engine started loading. */
  timeElapsed: number;
  text: string;
  stage?: 'start' | 'weights' | 'kernels' | 'python' | 'engine' | 'ready';
  loadedBytes?: number;
  totalBytes?: number;
  /** Bytes of weights read from the network / from the browser's cache so far. */
  fetchedBytes?: number;
  cachedBytes?: number;
}

/** Where the engine's files are served (absolute or page-relative folder URLs). Each defaults to the page's
 * <meta name="trellis-asset-base" | "trellis-pyodide-base" | "trellis-model-base">, else to the built site's
 * layout beside trellis.js. */
export interface AssetOptions {
  /** The folder of worker.js, trellis.zip and trellis_grammar.wasm (this package's files). */
  assetBase?: string;
  /** The folder of the pyodide npm package's files (pyodide.mjs, pyodide.asm.wasm, python_stdlib.zip); default <assetBase>pyodide/. */
  pyodideBase?: string;
  /** The folder of built model folders (and models.json; default <assetBase>models/). A model id given to CreateEngine
   * resolves against it when it is given (option or meta tag), else against the page. */
  modelBase?: string;
}

export interface EngineConfig extends AssetOptions {
  initProgressCallback?: (report: InitProgressReport) => void;
  /** KV cache size in tokens (default 2048, at most the model's context). */
  context?: number;
  /** The model's name in requests and responses (default: its folder's name). */
  modelId?: string;
}

/** Generation defaults per dialect (README; trellis.grammar.response_format.STRICT_DEFAULTS). JSON Schemas are
 * generated in strict mode (no property or tuple item the schema does not name) where the dialect's own
 * engine is: web-llm's json_object + schema, TGI's json, Transformers.js's json_schema; OpenAI's only with
 * `strict: true`. `strict: false` (a Trellis extension) asks for the schema's whole language. In every
 * dialect integers are written without fraction or exponent and no object repeats a key (json_object without
 * a schema too). `$schema` picks the draft (04, 06, 07, 2019-09, 2020-12; 2020-12 when absent). */
export type ResponseFormat =
  | { type: 'text' }
  | { type: 'json_object'; schema?: object | string; strict?: boolean }
  | { type: 'json_schema'; json_schema: { name?: string; schema: object; strict?: boolean; description?: string } }
  | { type: 'json'; value: object; strict?: boolean }
  | { type: 'grammar'; grammar: string }
  | { type: 'regex'; regex?: string; value?: string }
  | { type: 'structural_tag'; structural_tag?: object | string; format?: object; structures?: object[]; triggers?: string[] };

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string | null | { type: 'text'; text: string }[];
  name?: string;
  tool_calls?: ToolCall[];
  tool_call_id?: string;
}

export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface Tool {
  type: 'function';
  function: { name: string; description?: string; parameters?: object; strict?: boolean };
}

interface GenerationOptions {
  model?: string | null;
  max_tokens?: number | null;
  max_completion_tokens?: number | null;
  temperature?: number | null;
  top_p?: number | null;
  seed?: number | null;
  stop?: string | string[] | null;
  frequency_penalty?: number | null;
  presence_penalty?: number | null;
  repetition_penalty?: number | null;
  logit_bias?: Record<string, number> | null;
  logprobs?: boolean | null;
  top_logprobs?: number | null;
  n?: number | null;
  ignore_eos?: boolean | null;
  /** Trellis: when max_tokens cuts a constrained output, finish the structure instead. */
  complete_on_length?: boolean | null;
  response_format?: ResponseFormat | null;
  stream_options?: { include_usage?: boolean } | null;
  extra_body?: { enable_latency_breakdown?: boolean; enable_thinking?: boolean } | null;
}

export interface ChatCompletionRequest extends GenerationOptions {
  messages: ChatMessage[];
  stream?: boolean | null;
  tools?: Tool[] | null;
  tool_choice?: 'none' | 'auto' | 'required' | { type: 'function'; function: { name: string } } | null;
  parallel_tool_calls?: boolean | null;
}

/** A raw-prompt completion (no chat template: base models too); `response_format` and
 * `complete_on_length` constrain the continuation as in chat. */
export interface CompletionRequest extends GenerationOptions {
  prompt: string;
  stream?: boolean | null;
  echo?: boolean | null;
}

export interface UsageExtra {
  prefill_tokens_per_s: number;
  decode_tokens_per_s: number;
  time_to_first_token_s: number;
  time_per_output_token_s: number;
  e2e_latency_s: number;
  prefill_tokens: number;
  /** Per decode step, the time spent waiting for its logits: the GPU's work plus the read-back. */
  gpu_wait_per_step_s: number;
  grammar_init_s: number;
  grammar_per_token_s: number;
  /** null without a grammar; true when the compiled grammar came from the cache. */
  grammar_cache_hit: boolean | null;
}

export interface CompletionUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  extra: UsageExtra;
}

export type FinishReason = 'stop' | 'length' | 'tool_calls' | 'abort';

export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: {
    index: number;
    message: { role: 'assistant'; content: string | null; tool_calls?: ToolCall[] };
    finish_reason: FinishReason;
    logprobs: object | null;
  }[];
  usage: CompletionUsage;
}

export interface ChatCompletionChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  choices: {
    index: number;
    delta: { role?: 'assistant'; content?: string | null; tool_calls?: (ToolCall & { index: number })[] };
    finish_reason: FinishReason | null;
    logprobs: object | null;
  }[];
  usage?: CompletionUsage;
}

export interface Completion {
  id: string;
  object: 'text_completion';
  created: number;
  model: string;
  choices: { index: number; text: string; finish_reason: FinishReason | null; logprobs: object | null }[];
  usage?: CompletionUsage;
}

export interface EngineInfo {
  model: string;
  context: number;
  vocab_size: number;
  weight_bytes: number;
  dispatches_per_token: number;
  adapter: { vendor?: string; architecture?: string; device?: string; description?: string; isFallbackAdapter?: boolean;
    subgroup_size?: number };
  /** The kernel variant the engine runs (chosen by Python for this adapter; the worker compiled its kernels), or null. */
  variant: string | null;
  /** Kernels the engine needed before the worker had compiled them, compiled in Python while it was built. */
  kernels_compiled_in_python: string[];
  weights: { totalBytes: number; fetchedBytes: number; cachedBytes: number };
  /** The model's request defaults (from its generation config), used where a request leaves the field out. */
  sampling: { temperature?: number; top_p?: number; repetition_penalty?: number };
  /** Milliseconds from the start: Python ready, weights loaded, the kernels the engine needs compiled
   * (`kernelsMs`), every kernel compiled (`allKernelsMs`, null until then: prefill runs token by token
   * meanwhile); the engine build (`engineMs`: it starts once Python and the weights are in, and its
   * plans wait for the kernels); total. `pythonRestored`: Python started from the memory snapshot that
   * an earlier load kept in the Cache API (else a cold start, which keeps one). */
  timings: {
    pythonMs: number; packageMs: number; pythonRestored: boolean; weightsMs: number; kernelsMs: number;
    allKernelsMs: number | null; engineMs: number; totalMs: number;
  };
}

export interface ValidationResult {
  /** The normalized kind (json_object, json_schema, grammar, regex, structural_tag); null for text. */
  kind: string | null;
  /** Every byte of the text was accepted. */
  accepted?: boolean;
  /** ... and the grammar could end there. */
  complete?: boolean;
  /** accepted and complete; null for plain text. */
  valid: boolean | null;
  /** Whether the grammar came from the engine's cache or was compiled for the check. */
  grammar?: 'cached' | 'compiled';
  ms?: number;
}

export interface TrellisEngine {
  readonly info: EngineInfo;
  chat: {
    completions: {
      create(request: ChatCompletionRequest & { stream: true }): Promise<AsyncIterable<ChatCompletionChunk>>;
      create(request: ChatCompletionRequest & { stream?: false | null }): Promise<ChatCompletion>;
      create(request: ChatCompletionRequest): Promise<ChatCompletion | AsyncIterable<ChatCompletionChunk>>;
    };
  };
  completions: {
    create(request: CompletionRequest & { stream: true }): Promise<AsyncIterable<Completion>>;
    create(request: CompletionRequest & { stream?: false | null }): Promise<Completion>;
    create(request: CompletionRequest): Promise<Completion | AsyncIterable<Completion>>;
  };
  interruptGenerate(): void;
  resetChat(): Promise<void>;
  /** Trellis: whether `text` is in the language of `responseFormat`'s grammar (the engine's own matcher). */
  validate(text: string, responseFormat: ResponseFormat): Promise<ValidationResult>;
  runtimeStatsText(): Promise<string>;
  runtimeStats(): Promise<Record<string, unknown>>;
  unload(): Promise<void>;
}

export function CreateEngine(modelUrl?: string, config?: EngineConfig): Promise<TrellisEngine>;
/** The absolute folder URLs the options, the page's meta tags and the defaults give. */
export function resolveBases(options?: AssetOptions): Required<AssetOptions>;
/** <modelBase>models.json ({default, models}), or null when there is none. */
export function modelList(options?: AssetOptions): Promise<{ default: string; models: string[] } | null>;

export class TrellisError extends Error {}
export class InvalidRequestError extends TrellisError { field?: string }
export class UnsupportedSchemaError extends TrellisError { keyword?: string; pointer?: string }
export class GrammarError extends TrellisError { line?: number; column?: number }
export class GrammarLimitError extends GrammarError {}
export class SequenceLengthError extends TrellisError {}
export class ModelError extends TrellisError {}
export class RuntimeBackendError extends TrellisError {}
export class ModelNotFoundError extends TrellisError { url?: string; model?: string; available?: string[] }
export class AssetNotFoundError extends TrellisError { url: string; option: 'assetBase' | 'pyodideBase' }
