// Types of petrel-worker-client.mjs: Petrel in a (module) Web Worker.
import type { LoadPetrelOptions, LoadModelOptions, ModelInfo, TranslateOptions, TokenEvent, DetailedTranslation, TranslateInput } from "./petrel.js";

/**
 * TranslateOptions in a Worker: onToken is notification only. The worker translates
 * without waiting for the page, so onToken's return value is ignored (returning false does
 * not stop the input), and an exception it throws stops further events and rejects the
 * call once the translation has finished.
 */
export interface WorkerTranslateOptions extends Omit<TranslateOptions, "onToken"> {
  onToken?: (event: TokenEvent) => void;
}

export interface PetrelWorkerOptions extends LoadPetrelOptions {
  /** petrel-worker.mjs's URL (default: next to petrel-worker-client.mjs). */
  workerUrl?: string | URL;
}

export class PetrelWorkerModel {
  readonly name: string;
  readonly info: ModelInfo;
  readonly isa: string;
  readonly loadMs: number;
  readonly freed: boolean;
  translate(text: TranslateInput, options?: WorkerTranslateOptions): Promise<string>;
  translate(texts: TranslateInput[], options?: WorkerTranslateOptions): Promise<string[]>;
  translateDetailed(text: TranslateInput, options?: WorkerTranslateOptions): Promise<DetailedTranslation>;
  translateDetailed(texts: TranslateInput[], options?: WorkerTranslateOptions): Promise<DetailedTranslation[]>;
  tokenize(text: string, sourceLanguage?: string): Promise<{ pieces: string[]; ids: number[] }>;
  free(): Promise<void>;
}

export class PetrelWorker {
  /** Starts the worker and instantiates the engine in it. */
  static create(options?: PetrelWorkerOptions): Promise<PetrelWorker>;
  constructor(options?: PetrelWorkerOptions);
  readonly ready: Promise<PetrelWorker>;
  readonly version: string;
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
  terminate(): void;
}
export default PetrelWorker;
