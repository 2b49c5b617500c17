// Types of petrel-worker-client.mjs: Petrel in a (module) Web Worker.
import type { LoadPetrelOptions, LoadModelOptions, ModelInfo, TranslateOptions, DetailedTranslation } from "./petrel.js";

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
  translate(text: string, options?: TranslateOptions): Promise<string>;
  translate(texts: string[], options?: TranslateOptions): Promise<string[]>;
  translateDetailed(text: string, options?: TranslateOptions): Promise<DetailedTranslation>;
  translateDetailed(texts: string[], options?: TranslateOptions): Promise<DetailedTranslation[]>;
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
  translate(text: string, options?: TranslateOptions): Promise<string>;
  translate(texts: string[], options?: TranslateOptions): Promise<string[]>;
  translateDetailed(text: string, options?: TranslateOptions): Promise<DetailedTranslation>;
  translateDetailed(texts: string[], options?: TranslateOptions): Promise<DetailedTranslation[]>;
  terminate(): void;
}
export default PetrelWorker;
