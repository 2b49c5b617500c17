// Types of petrel.mjs (Petrel's WebAssembly build): translation models translate, language
// models (info.decoder_only) generate and chat.

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
  /** Where the module is (default: petrel-threads.wasm or petrel.wasm next to petrel.mjs,
   * as `threads` says). A module given here or below may be either build: it says which. */
  wasmUrl?: string | URL;
  /** The module's bytes (instead of fetching/reading wasmUrl). */
  wasmBinary?: ArrayBuffer | ArrayBufferView;
  /** An already compiled module (Petrel.wasmModule of another instance). */
  wasmModule?: WebAssembly.Module;
  /** The threads each model computes with (default: the cores, at most 8, where
   * threadsSupported(), else 1). Above 1 the threaded build runs (petrel-threads.wasm:
   * a Worker per extra thread); 1 the single-threaded one (petrel.wasm). Above 1 where
   * threads cannot run: a PetrelError (PETREL_UNSUPPORTED). */
  threads?: number;
}

/** Compiles and instantiates the engine; without options, once per realm (shared). */
export function loadPetrel(options?: LoadPetrelOptions): Promise<Petrel>;
/** True where the threaded build can run: Node, or a cross-origin isolated page or worker
 * (served with Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp). */
export function threadsSupported(): boolean;
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
   * that changes its translation is the same); 0 (default): no cache. Translation models
   * only (a language model's prompts: PetrelModel.setPromptCacheBytes). */
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
  /** The threads each model computes with (loadPetrel's `threads`). */
  readonly threads: number;
  /** True when the threaded build (petrel-threads.wasm) runs. */
  readonly threaded: boolean;
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
  /** A language model (decoder-only: Gemma 3, Llama, Qwen): it generates and chats, it does not translate. */
  decoder_only: boolean;
  /** The checkpoint's model_type ("gemma3_text", "llama", "qwen2", "qwen3"; "" for most translation models). */
  model_type: string;
  num_kv_heads: number;
  head_dim: number;
  sliding_window_layers: number;
  /** A language model's generation defaults and chat template; null for a translation model. */
  lm: LanguageModelInfo | null;
}

/** How a language model asks to generate (its generation_config.json, tokenizer_config.json). */
export interface LanguageModelInfo {
  /** -1: none. */
  bos_id: number;
  /** Generation stops at any of these. */
  eos_ids: number[];
  do_sample: boolean;
  temperature: number;
  top_k: number;
  top_p: number;
  min_p: number;
  repetition_penalty: number;
  /** 0: none given (generate() then takes 256, within the positions). */
  max_new_tokens: number;
  has_chat_template: boolean;
  /** The Jinja chat template ("" without one). */
  chat_template: string;
  bos_token: string;
  eos_token: string;
  /** Tokens left out of generated text. */
  special_tokens: string[];
  /** The longest prompt text (or rendered conversation) the model takes, in UTF-8 bytes. */
  max_prompt_bytes: number;
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
  /** Speculative decoding (beam 1, no alignment): drafts from what followed the last n-gram
   * (n up to this, at most 8) earlier in the input and output, checked by one pass of the
   * decoder; the same translations, faster where the drafts are right. 0 (default): off. */
  lookupNgram?: number;
  /** The most tokens one draft proposes (0: 16; at most 64). */
  maxDraftTokens?: number;
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
  /** The threads it computes with: Petrel.threads, fewer when other models hold the
   * threaded build's Workers (it loads 2 per thread beyond the first). */
  readonly threads: number;
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
  /** Speculative decoding's draft model (null: none): a smaller model of this instance with
   * this one's kind and vocabulary (another throws a PetrelError naming both). Outputs do
   * not change; the draft may be freed afterwards. */
  setDraftModel(draft: PetrelModel | null): void;
  /** The last translate call's speculative decoding counts, or null before one. */
  lastTranslateSpeculation(): SpeculationCounts | null;
  /** How `text` tokenizes (EOS included; a language model's: its BOS included). */
  tokenize(text: string, sourceLanguage?: string): { pieces: string[]; ids: number[] };
  /** The text of token ids, special tokens left out. */
  detokenize(ids: TokenIds): string;

  // Language models (info.decoder_only); a translation model throws.
  /** Continues a text prompt (encoded with the model's tokenizer, its BOS included). Runs synchronously inside the call. */
  generate(prompt: string, options?: GenerateOptions): Promise<string>;
  /** Continues token ids (used verbatim): the generated ids. */
  generate(prompt: TokenIds, options?: GenerateOptions): Promise<number[]>;
  generateDetailed(prompt: string, options?: GenerateOptions): Promise<TextGeneration>;
  generateDetailed(prompt: TokenIds, options?: GenerateOptions): Promise<Generation>;
  generateSync(prompt: string, options?: GenerateOptions): string;
  generateSync(prompt: TokenIds, options?: GenerateOptions): number[];
  generateDetailedSync(prompt: string, options?: GenerateOptions): TextGeneration;
  generateDetailedSync(prompt: TokenIds, options?: GenerateOptions): Generation;
  /** A conversation through the model's chat template. */
  chat(options?: ChatOptions): Promise<PetrelConversation>;
  chatSync(options?: ChatOptions): PetrelConversation;
  /** The chat template applied to `messages`, as transformers' apply_chat_template(tokenize=False). */
  applyChatTemplate(messages: ChatMessage[], options?: ApplyChatTemplateOptions): string;
  /**
   * Keeps the KV state after each prompt within `bytes` (0, the default: none): a later
   * prompt runs only the tokens after the longest beginning it shares with a kept one.
   */
  setPromptCacheBytes(bytes: number): void;
  promptCacheStats(): PromptCacheStats;
  /** The state after the last call's prompt, as a prompt cache file's bytes (bound to this model file). */
  savePromptCacheSync(): Uint8Array;
  /** Loads a prompt cache (verified whole: an error names the field). */
  loadPromptCacheSync(bytes: ArrayBuffer | ArrayBufferView, options?: { name?: string }): void;
  savePromptCache(): Promise<Uint8Array>;
  /** Node: writes the file (atomically). */
  savePromptCache(path: string | URL): Promise<undefined>;
  /** Bytes, or in Node a path or file: URL. */
  loadPromptCache(source: ArrayBuffer | ArrayBufferView | string | URL, options?: { name?: string }): Promise<void>;

  /** Frees the model's memory (and its conversations'); using it afterwards throws. */
  free(): void;
}

/** Token ids: a prompt to continue verbatim, or ids to detokenize. */
export type TokenIds = readonly number[] | Int32Array | Uint32Array | Uint16Array;

export type KvCacheType = "f32" | "f16" | "int8";

/** A generation's event: after every token, and once more at the end (final). */
export interface GenerateTokenEvent {
  /** The output so far as text ("" for an ids prompt): whole characters, a stop string never shown. */
  text: string;
  /** What `text` adds to the previous event's. */
  delta: string;
  /** The generated ids so far. */
  ids: number[];
  /** The last event: the generation is done. */
  final: boolean;
  /** The newest token as the tokenizer stores it. */
  piece: string;
}

/** Unset sampling options take the model's (info.lm, its generation_config.json), as transformers' generate(). */
export interface GenerateOptions {
  /** Tokens generated at most (a final EOS included); default: the model's, else 256; within its positions. */
  maxNewTokens?: number;
  /** false: greedy (the most likely token, the lowest id among ties). */
  doSample?: boolean;
  /** In [1e-6, 1e6]. */
  temperature?: number;
  /** 0: off. */
  topK?: number;
  /** (0, 1]; 1: off. */
  topP?: number;
  /** [0, 1]; 0: off. */
  minP?: number;
  /** In [1e-6, 1e6]; 1: off (applies to greedy decoding too). */
  repetitionPenalty?: number;
  /** The same seed gives the same tokens on every CPU (default 0); up to 2^64 - 1 as a BigInt. */
  seed?: number | bigint;
  /** Go on past EOS (benchmarks); not with grammar or jsonSchema. */
  ignoreEos?: boolean;
  /** The KV cache's type: "f32" (default), "f16" (half the memory), "int8" (about a quarter). */
  kvCache?: KvCacheType;
  /** Generation stops at the first of these in the output, which then ends before it (at most 16, each 1..256 bytes). */
  stop?: string | string[];
  /** A GBNF grammar (llama.cpp's syntax, `root` the start) the output follows; EOS only when it is complete. */
  grammar?: string;
  /** A JSON Schema (llama.cpp's json_schema_to_grammar subset) the output is an instance of; not with grammar. */
  jsonSchema?: object | string;
  /** Called after every token; return false to stop. An exception stops and becomes the call's error. */
  onToken?: (event: GenerateTokenEvent) => boolean | void;
  /** Speculative decoding: drafts from what followed the last n-gram (n up to this, at most 8)
   * earlier in the prompt and output, checked by one forward; the same tokens (greedy and
   * seeded sampling), faster where the drafts are right. 0 (default): off. */
  lookupNgram?: number;
  /** The most tokens one draft proposes (0: 16; at most 64). */
  maxDraftTokens?: number;
}

/** What speculative decoding did in a call. */
export interface SpeculationCounts {
  /** Passes of the model that checked a draft. */
  verifications: number;
  draftedTokens: number;
  /** Drafted tokens the model's own choices kept. */
  acceptedTokens: number;
  /** Tokens the draft model ran (absent for translations split into sentences, html, a cache or a second model). */
  draftModelTokens?: number;
}

export interface GenerateTimings extends SpeculationCounts {
  prefillMs: number;
  generateMs: number;
  /** The prompt's tokens run (those reused from a cache excluded). */
  promptTokens: number;
  generatedTokens: number;
  /** The prompt's tokens whose KV state was reused. */
  reusedTokens: number;
}

/** An ids prompt's generation. */
export interface Generation {
  /** The generated ids, a final EOS included. */
  ids: number[];
  /** An EOS token ended it (not the length limit or onToken). */
  endedOnEos: boolean;
  /** The prompt's tokens (a conversation's: the whole rendered history). */
  promptTokens: number;
  /** Of those, how many the KV cache already held (a conversation's earlier turns, a prompt cache's entry). */
  reusedTokens: number;
  timings: GenerateTimings;
}

/** A text prompt's (or a reply's) generation. */
export interface TextGeneration extends Generation {
  /** The output as text: special tokens left out, cut before a stop string. */
  text: string;
  /** A stop string ended it. */
  endedOnStop: boolean;
}

export interface ChatMessage {
  /** "system", "user", "assistant": what the model's chat template knows. */
  role: string;
  content: string;
}

export interface ChatOptions {
  /** A system message (default: none). */
  system?: string;
  /** Boolean variables the chat template reads, e.g. {enable_thinking: false} for Qwen3. */
  templateFlags?: Record<string, boolean>;
}

export interface ApplyChatTemplateOptions {
  /** Open the assistant's turn at the end (default true). */
  addGenerationPrompt?: boolean;
  templateFlags?: Record<string, boolean>;
}

export interface PromptCacheStats {
  /** setPromptCacheBytes'. */
  budget: number;
  /** What the kept states are charged. */
  bytes: number;
  entries: number;
}

/**
 * A conversation with a language model (PetrelModel.chat): each reply renders the whole
 * conversation with the chat template and runs only the tokens its KV cache does not hold.
 */
export class PetrelConversation {
  readonly freed: boolean;
  /** The messages so far, the system message first. */
  messages(): ChatMessage[];
  /** Adds the message, generates the reply and adds it (on an error, the conversation is as it was). */
  reply(message: string, options?: GenerateOptions): Promise<string>;
  replyDetailed(message: string, options?: GenerateOptions): Promise<TextGeneration>;
  replySync(message: string, options?: GenerateOptions): string;
  replyDetailedSync(message: string, options?: GenerateOptions): TextGeneration;
  /**
   * Drops the oldest exchanges (the system message stays) until `message` and a reply of
   * `newTokens` tokens fit the model's positions; how many it dropped.
   */
  makeRoom(message: string, newTokens: number): number;
  free(): void;
}
