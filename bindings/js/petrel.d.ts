// Types of petrel.mjs (Petrel's WebAssembly build).

export type PetrelStatus =
  | "PETREL_INVALID_ARGUMENT" | "PETREL_IO" | "PETREL_FORMAT" | "PETREL_UNSUPPORTED"
  | "PETREL_INTERNAL" | "PETREL_OUT_OF_MEMORY"
  /** A worker request discarded (PetrelWorker.discardTranslations) or aborted: name "AbortError". */
  | "PETREL_CANCELLED";

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
  /** Bytes of translated sentences kept for later calls, least recently used out first
   * (bergamot's cacheSize, made correct: a sentence is found again only when every option
   * that changes its translation is the same); 0 (default): no cache. */
  cacheBytes?: number;
}

export interface CacheStats {
  hits: number;
  misses: number;
  entries: number;
  bytes: number;
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
  /**
   * Split into sentences as bergamot's ssplit-mode: "sentence" (a line is one sentence),
   * "paragraph" (a line is a paragraph of sentences: Firefox's setting) or "wrapped_text"
   * (a blank line ends a paragraph). Implies sentence splitting; not with onToken.
   * Default: splitSentences' splitting (a line break is a space), "paragraph" with html.
   */
  ssplitMode?: SsplitMode;
  /** Each sentence generates at most factor x its source tokens (Marian's max-length-factor;
   * default: the model's). */
  maxLengthFactor?: number;
  /** With sentence splitting and a length factor: each sentence may generate as many tokens
   * as its input's longest sentence allows (bergamot limits a request's sentences as one batch). */
  limitByLongestSentence?: boolean;
  /** With sentence splitting and a shortlist: each sentence decodes over the union of its
   * input's sentences' shortlists (bergamot's shortlist of a request's batch); off (default),
   * a sentence's translation does not depend on the sentences around it. */
  shortlistOfInput?: boolean;
  /**
   * The input is an HTML fragment (bergamot's {html: true}): the tags are taken out, the
   * text translated sentence by sentence, the tags put back around the words the alignments
   * tie to; `source` holds the source markup as written back. Malformed markup is repaired
   * as a browser's parser would. Needs a Marian C++ model (token byte ranges); not with onToken.
   */
  html?: boolean;
  /** Per sentence quality scores (qualityScores in the detailed result); with html, also
   * written into the markup as bergamot writes them (<font x-bergamot-...-score="...">). */
  qualityScores?: boolean;
  /** The bytes of a bergamot `.quality.lr` file: its logistic regression instead of the
   * free estimator (the mean of the tokens' logits). */
  qualityModel?: ArrayBuffer | ArrayBufferView;
  /** Per sentence soft alignments (alignments in the detailed result). */
  alignment?: boolean;
  /** Called after every decoder step; return false to stop that input. */
  onToken?: (event: TokenEvent) => boolean | void;
  /**
   * Pivoting (bergamot's translateViaPivoting): this model translates source -> pivot,
   * secondModel (loaded by the same Petrel instance; it may be this model) pivot -> target,
   * in one call. The result is the source -> target one: `source` and the sentences'
   * source ranges from the input, `text`, target ranges, tokens and quality scores from the
   * second model, each sentence's alignment composed through the pivot text (bergamot's
   * remapAlignments: a row is NaN where it passes through an empty pivot token, as
   * bergamot's). html, qualityScores, alignment and sentence splitting work as for one
   * model. Both models must give token byte ranges (Marian C++ models); not with onToken.
   */
  secondModel?: PetrelModel;
}

export type SsplitMode = "sentence" | "paragraph" | "wrapped_text";

/**
 * One request as bergamot takes it (Firefox's engine worker sends {text, html,
 * qualityScores, alignment}): its fields override the call's options for this text.
 */
export interface TranslationRequest {
  text: string;
  html?: boolean;
  qualityScores?: boolean;
  alignment?: boolean;
  ssplitMode?: SsplitMode;
}

export type TranslateInput = string | TranslationRequest;

/** UTF-8 byte offsets [begin, end). */
export type ByteRange = [number, number];

/** One sentence, as bergamot's Response getSourceSentence / getTranslatedSentence. */
export interface SentenceRanges {
  /** Bytes of `source`. */
  source: ByteRange;
  /** Bytes of `text`. */
  target: ByteRange;
  /** Its tokens' bytes of `source`, the EOS (empty, at the end) included. */
  sourceTokens: ByteRange[];
  /** Its tokens' bytes of `text`, the EOS included when the translation ended on one. */
  targetTokens: ByteRange[];
}

/** A sentence's quality scores (bergamot's Response qualityScores). NaN where undefined
 * (a sentence without words). */
export interface SentenceQualityScores {
  /** The mean of the word scores. */
  sentenceScore: number;
  wordScores: number[];
  /** Each word's bytes of `text` (its leading space left out). */
  wordByteRanges: ByteRange[];
  /** Each word's target tokens [begin, end) (indices into the sentence's targetTokens). */
  wordTokenRanges: [number, number][];
}

export interface DetailedTranslation {
  /** The translation (html: with the markup put back). */
  text: string;
  /** Output token ids (without the start token and the final EOS). */
  ids: number[];
  score: number;
  /** The translation ended on EOS (not on the length limit). */
  eos: boolean;
  /** What the sentences' source ranges point into: the input, or with html the source
   * markup as written back (bergamot's getOriginalText). */
  source: string;
  /** Per sentence its byte ranges; empty for a model whose tokenizer does not give its
   * tokens' bytes (only Marian C++ models do). */
  sentences: SentenceRanges[];
  /** With alignment: per sentence the soft alignment [target token][source token]; each
   * row sums to 1. */
  alignments?: number[][][];
  /** With qualityScores: per sentence. */
  qualityScores?: SentenceQualityScores[];
}

export class PetrelModel {
  readonly name: string;
  readonly info: Readonly<ModelInfo>;
  /** The kernel path in use. */
  readonly isa: string;
  /** ms the engine took from the bytes in memory to a ready model. */
  readonly loadMs: number;
  readonly freed: boolean;
  /** The sentence cache's counters, or null when the model was loaded without cacheBytes. */
  cacheStats(): CacheStats | null;
  /** Runs synchronously inside the call; the Promise only unifies the API with PetrelWorker. */
  translate(text: TranslateInput, options?: TranslateOptions): Promise<string>;
  /** An array is translated as one batch (requests whose own options differ: one per kind). */
  translate(texts: TranslateInput[], options?: TranslateOptions): Promise<string[]>;
  translateDetailed(text: TranslateInput, options?: TranslateOptions): Promise<DetailedTranslation>;
  translateDetailed(texts: TranslateInput[], options?: TranslateOptions): Promise<DetailedTranslation[]>;
  translateSync(text: TranslateInput, options?: TranslateOptions): string;
  translateSync(texts: TranslateInput[], options?: TranslateOptions): string[];
  translateDetailedSync(text: TranslateInput, options?: TranslateOptions): DetailedTranslation;
  translateDetailedSync(texts: TranslateInput[], options?: TranslateOptions): DetailedTranslation[];
  /** Throws if `options` are not valid for this model. */
  checkOptions(options?: TranslateOptions): void;
  /** How `text` tokenizes (EOS included). */
  tokenize(text: string, sourceLanguage?: string): { pieces: string[]; ids: number[] };
  /** Frees the model's memory; using it afterwards throws. */
  free(): void;
}
