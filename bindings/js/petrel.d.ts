// Types of petrel.mjs (Petrel's WebAssembly build).

export type PetrelStatus =
  | "PETREL_INVALID_ARGUMENT" | "PETREL_IO" | "PETREL_FORMAT" | "PETREL_UNSUPPORTED"
  | "PETREL_INTERNAL" | "PETREL_OUT_OF_MEMORY";

/** Every engine error (message: the engine's) and every bad argument. */
export class PetrelError extends Error {
  readonly code: PetrelStatus;
}

export interface LoadPetrelOptions {
  /** Where petrel.wasm is (default: next to petrel.mjs). */
  wasmUrl?: string | URL;
  /** The module's bytes (instead of fetching/reading wasmUrl). */
  wasmBinary?: ArrayBuffer | ArrayBufferView;
  /** An already compiled module (Petrel.wasmModule of another instance). */
  wasmModule?: WebAssembly.Module;
}

/** Compiles and instantiates the engine; without options, once per realm (shared). */
export function loadPetrel(options?: LoadPetrelOptions): Promise<Petrel>;
export default loadPetrel;

export interface LoadModelOptions {
  /** Names the model in error messages (default: the file name, or "<memory>"). */
  name?: string;
  /** Kernel path: "simd128" (default) or "scalar". */
  isa?: string;
  /** How int8 layers quantize their input: "dynamic" (default: each row by its own range)
   * or "file" (the file's static scales: a Marian int8 model's alphas, as Firefox's
   * int8shiftAlphaAll; an error for a model without them). */
  activationScales?: "dynamic" | "file";
}

export type ModelSource = ArrayBuffer | ArrayBufferView | string | URL | Response;

export class Petrel {
  /** The engine's version ("0.1.0"). */
  readonly version: string;
  readonly timings: { compileMs: number; instantiateMs: number; moduleMs: number };
  readonly wasmModule: WebAssembly.Module;
  /**
   * Loads a model file. A Response or URL with a Content-Length is streamed straight into
   * the engine's memory; bytes are copied once; a Node file path / file: URL is read
   * straight into the engine's memory.
   */
  loadModel(source: ModelSource, options?: LoadModelOptions): Promise<PetrelModel>;
  /** Frees every model of this instance; the instance cannot be used afterwards. */
  dispose(): void;
}

export interface ModelInfo {
  format: string;
  producer: string;
  source: string;
  architecture: string;
  /** "marian", "words", "sentencepiece", "marian-words", or the multilingual family: "nllb", "m2m100", "mbart50". */
  family: string;
  d_model: number;
  num_heads: number;
  ffn_dim: number;
  encoder_layers: number;
  decoder_layers: number;
  ssru_layers: number;
  max_positions: number;
  vocab_size: number;
  target_vocab_size: number;
  activation: string;
  norm: string;
  eos_id: number;
  pad_id: number;
  decoder_start_id: number;
  /** The weights' main dtype ("int8", "f32", "f16", "int4"). */
  dtype: string;
  /** Every dtype of the weights, by bytes, most first. */
  dtypes: string[];
  has_tokenizer: boolean;
  tokenizer: string;
  multilingual: boolean;
  /** Multilingual models: the language codes targetLanguage / sourceLanguage accept. */
  languages: string[];
  default_source_language: string;
  shortlist: boolean;
  shortlist_by_default: boolean;
  num_beams: number;
  max_length: number;
  length_penalty: number | null;
  max_length_factor: number | null;
  file_size: number;
  parameter_count: number;
  checksum: boolean;
}

export interface TokenEvent {
  /** Which input of the call. */
  input: number;
  /** The hypothesis so far as text. */
  text: string;
  /** What `text` adds to the previous event's. */
  delta: string;
  /** `text` does not extend the previous text: show it afresh. */
  restarted: boolean;
  /** The input's translation is done (the last event of that input). */
  final: boolean;
  /** Beam search: a later step may prefer another hypothesis. */
  provisional: boolean;
  /** Its token ids so far. */
  ids: number[];
  /** The newest token as the tokenizer stores it ("▁Datei"). */
  piece: string;
}

export interface TranslateOptions {
  /** Beam size (default 1: greedy; at most 64). */
  beam?: number;
  /** Generated tokens at most, EOS included (default: the model's). */
  maxNewTokens?: number;
  minNewTokens?: number;
  lengthPenalty?: number;
  /** Multilingual models: language codes as info.languages spells them. */
  sourceLanguage?: string;
  targetLanguage?: string;
  /** Decode over the model's lexical shortlist (default: the model's choice). */
  shortlist?: boolean;
  kvCacheF16?: boolean;
  /** Translate sentence by sentence and reassemble (as petrel-run); not with onToken. */
  splitSentences?: boolean;
  /** Called after every decoder step; return false to stop that input. */
  onToken?: (event: TokenEvent) => boolean | void;
}

export interface DetailedTranslation {
  text: string;
  /** Output token ids (without the start token and the final EOS). */
  ids: number[];
  score: number;
  /** The translation ended on EOS (not on the length limit). */
  eos: boolean;
}

export class PetrelModel {
  readonly name: string;
  readonly info: Readonly<ModelInfo>;
  /** The kernel path in use. */
  readonly isa: string;
  /** ms the engine took from the bytes in memory to a ready model. */
  readonly loadMs: number;
  readonly freed: boolean;
  /** Runs synchronously inside the call; the Promise only unifies the API with PetrelWorker. */
  translate(text: string, options?: TranslateOptions): Promise<string>;
  /** An array is translated as one batch. */
  translate(texts: string[], options?: TranslateOptions): Promise<string[]>;
  translateDetailed(text: string, options?: TranslateOptions): Promise<DetailedTranslation>;
  translateDetailed(texts: string[], options?: TranslateOptions): Promise<DetailedTranslation[]>;
  translateSync(text: string, options?: TranslateOptions): string;
  translateSync(texts: string[], options?: TranslateOptions): string[];
  translateDetailedSync(text: string, options?: TranslateOptions): DetailedTranslation;
  translateDetailedSync(texts: string[], options?: TranslateOptions): DetailedTranslation[];
  /** Throws if `options` are not valid for this model. */
  checkOptions(options?: TranslateOptions): void;
  /** How `text` tokenizes (EOS included). */
  tokenize(text: string, sourceLanguage?: string): { pieces: string[]; ids: number[] };
  /** Frees the model's memory; using it afterwards throws. */
  free(): void;
}
