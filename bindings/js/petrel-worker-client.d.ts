// Types of petrel-worker-client.mjs: Petrel in a (module) Web Worker.
import type {
  LoadPetrelOptions, LoadModelOptions, ModelInfo, TranslateOptions, TokenEvent, DetailedTranslation, TranslateInput,
  GenerateOptions, GenerateTokenEvent, Generation, TextGeneration, TokenIds, ChatOptions, ChatMessage,
  ApplyChatTemplateOptions, PromptCacheStats, SpeculationCounts,
} from "./petrel.js";

/**
 * TranslateOptions in a Worker: onToken is notification only. The worker translates
 * without waiting for the page, so onToken's return value is ignored (returning false does
 * not stop the input), and an exception it throws stops further events and rejects the
 * call once the translation has finished.
 */
export interface WorkerTranslateOptions extends Omit<TranslateOptions, "onToken" | "secondModel"> {
  onToken?: (event: TokenEvent) => void;
  /** Pivoting (see TranslateOptions.secondModel): a model loaded in the same worker. */
  secondModel?: PetrelWorkerModel;
  /**
   * Queued calls run by priority, the highest first (e.g. 1 for the text in view, 0 for
   * the rest of the page); equal priorities in call order. Default 0. A call already
   * running is not interrupted.
   */
  priority?: number;
  /** The page (or any group) the call belongs to: discardTranslations(innerWindowId) cancels
   * the group's calls. Firefox's translations engine keys its queues by innerWindowId. */
  innerWindowId?: number | string;
  /** Cancels this call, as fetch() does: it rejects with signal.reason (an "AbortError"
   * DOMException unless one was given), and the worker skips it if it has not started. */
  signal?: AbortSignal;
}

/**
 * GenerateOptions in a Worker, with the queue's priority, innerWindowId and signal.
 * onToken's events arrive as messages; returning false (or aborting the signal) stops the
 * generation where the worker can be reached while it runs (shared memory: Node, and a
 * page that is cross-origin isolated: COOP same-origin + COEP require-corp), a token or a
 * few later. Elsewhere the worker finishes the generation (maxNewTokens bounds it): an
 * aborted call still rejects at once, and its result is dropped.
 */
export interface WorkerGenerateOptions extends Omit<GenerateOptions, "onToken"> {
  onToken?: (event: GenerateTokenEvent) => boolean | void;
  priority?: number;
  innerWindowId?: number | string;
  signal?: AbortSignal;
}

/** A conversation held in the worker (PetrelWorkerModel.chat). */
export class PetrelWorkerConversation {
  readonly freed: boolean;
  reply(message: string, options?: WorkerGenerateOptions): Promise<string>;
  replyDetailed(message: string, options?: WorkerGenerateOptions): Promise<TextGeneration>;
  messages(): Promise<ChatMessage[]>;
  makeRoom(message: string, newTokens: number): Promise<number>;
  free(): Promise<void>;
}

/**
 * How a call ended by discardTranslations (or by its signal, unless that had its own
 * reason): an Error with name "AbortError" and code "PETREL_CANCELLED".
 */
export interface CancelledError extends Error {
  name: "AbortError";
  code: "PETREL_CANCELLED";
}
export function cancelledError(message: string): CancelledError;

export interface DiscardResult {
  /** The calls of that key that were rejected (not answered yet: queued or running). */
  cancelled: number;
  /** The requests the worker dropped before running them (the work saved). */
  skipped: number;
}

export interface PetrelWorkerOptions extends LoadPetrelOptions {
  /** petrel-worker.mjs's URL (default: next to petrel-worker-client.mjs). */
  workerUrl?: string | URL;
}

export class PetrelWorkerModel {
  readonly name: string;
  readonly info: ModelInfo;
  readonly isa: string;
  readonly threads: number;
  readonly loadMs: number;
  readonly freed: boolean;
  translate(text: TranslateInput, options?: WorkerTranslateOptions): Promise<string>;
  translate(texts: TranslateInput[], options?: WorkerTranslateOptions): Promise<string[]>;
  translateDetailed(text: TranslateInput, options?: WorkerTranslateOptions): Promise<DetailedTranslation>;
  translateDetailed(texts: TranslateInput[], options?: WorkerTranslateOptions): Promise<DetailedTranslation[]>;
  tokenize(text: string, sourceLanguage?: string): Promise<{ pieces: string[]; ids: number[] }>;
  detokenize(ids: TokenIds): Promise<string>;
  /** A PetrelWorkerModel of this worker (see PetrelModel.setDraftModel), or null. */
  setDraftModel(draft: PetrelWorkerModel | null): Promise<void>;
  lastTranslateSpeculation(): Promise<SpeculationCounts | null>;
  // Language models (info.decoder_only): see PetrelModel.
  generate(prompt: string, options?: WorkerGenerateOptions): Promise<string>;
  generate(prompt: TokenIds, options?: WorkerGenerateOptions): Promise<number[]>;
  generateDetailed(prompt: string, options?: WorkerGenerateOptions): Promise<TextGeneration>;
  generateDetailed(prompt: TokenIds, options?: WorkerGenerateOptions): Promise<Generation>;
  chat(options?: ChatOptions): Promise<PetrelWorkerConversation>;
  applyChatTemplate(messages: ChatMessage[], options?: ApplyChatTemplateOptions): Promise<string>;
  setPromptCacheBytes(bytes: number): Promise<void>;
  promptCacheStats(): Promise<PromptCacheStats>;
  /** The bytes; in Node, given a path, the worker writes that file instead. */
  savePromptCache(): Promise<Uint8Array>;
  savePromptCache(path: string | URL): Promise<undefined>;
  /** Bytes (copied to the worker), or in Node a path. */
  loadPromptCache(source: ArrayBuffer | ArrayBufferView | string, options?: { name?: string }): Promise<void>;
  /** Frees the model and its conversations. */
  free(): Promise<void>;
}

export class PetrelWorker {
  /** Starts the worker and instantiates the engine in it. */
  static create(options?: PetrelWorkerOptions): Promise<PetrelWorker>;
  constructor(options?: PetrelWorkerOptions);
  readonly ready: Promise<PetrelWorker>;
  readonly version: string;
  /** loadPetrel's in the worker: the threads each model computes with, and whether the threaded build runs. */
  readonly threads: number;
  readonly threaded: boolean;
  /** The model loaded last: what translate() uses. */
  model: PetrelWorkerModel | null;
  /** The last loaded model's info (null before loadModel). */
  readonly info: ModelInfo | null;
  /** A URL string (resolved against the page), URL, file path (Node) or bytes (copied; moved with transfer: true). */
  loadModel(source: ArrayBuffer | ArrayBufferView | string | URL | Response,
            options?: LoadModelOptions & { transfer?: boolean }): Promise<PetrelWorkerModel>;
  translate(text: TranslateInput, options?: WorkerTranslateOptions): Promise<string>;
  translate(texts: TranslateInput[], options?: WorkerTranslateOptions): Promise<string[]>;
  translateDetailed(text: TranslateInput, options?: WorkerTranslateOptions): Promise<DetailedTranslation>;
  translateDetailed(texts: TranslateInput[], options?: WorkerTranslateOptions): Promise<DetailedTranslation[]>;
  /** With the last loaded model (a language model). */
  generate(prompt: string, options?: WorkerGenerateOptions): Promise<string>;
  generate(prompt: TokenIds, options?: WorkerGenerateOptions): Promise<number[]>;
  generateDetailed(prompt: string, options?: WorkerGenerateOptions): Promise<TextGeneration>;
  generateDetailed(prompt: TokenIds, options?: WorkerGenerateOptions): Promise<Generation>;
  chat(options?: ChatOptions): Promise<PetrelWorkerConversation>;
  /**
   * Cancels every call of `innerWindowId` not answered yet (Firefox's
   * discardTranslations(innerWindowId), when a page goes): they reject at once with a
   * CancelledError, the worker drops those still queued, and the one it is running (a
   * translation cannot be interrupted; a generation stops where shared memory reaches the
   * worker) finishes with its result dropped. Generations and replies given an
   * innerWindowId belong to it too. Resolves once the worker has dropped them.
   */
  discardTranslations(innerWindowId: number | string): Promise<DiscardResult>;
  terminate(): void;
}
export default PetrelWorker;
