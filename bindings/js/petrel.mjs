// Petrel for JavaScript: the engine compiled to WebAssembly (SIMD128), as an ES module for
// Node 20+, web pages and module Web Workers: translation models translate, language
// models (decoder-only: Gemma 3, Llama, Qwen) generate and chat.
//
//   import { loadPetrel } from "./petrel.mjs";
//   const petrel = await loadPetrel();
//   const model = await petrel.loadModel(new URL("./en-de.petrel", import.meta.url));
//   console.log(await model.translate("Open the file"));
//   model.free();
//
//   const lm = await petrel.loadModel("gemma-3-270m.petrel");
//   console.log(await lm.generate("The capital of France is", { maxNewTokens: 20 }));
//   const chat = await lm.chat({ system: "Answer briefly." });
//   console.log(await chat.reply("Hello!", { onToken: (e) => show(e.delta) }));
//
// The work runs synchronously on the calling thread (a page should use
// petrel-worker-client.mjs); translate(), generate(), reply() ... return Promises for one
// API with the worker client, their *Sync forms return values.
//
// Two builds of the engine ship side by side: petrel.wasm (one thread) and
// petrel-threads.wasm (emscripten pthreads: SharedArrayBuffer, a Worker per extra
// thread). loadPetrel() takes the threaded one where threads can run (Node; a page or
// worker that is cross-origin isolated, i.e. served with COOP/COEP headers) and the
// machine has more than one core, the single-threaded one everywhere else; the `threads`
// option overrides the count (1: the single-threaded build).
import createPetrelCore from "./petrel-core.mjs";

const STATUS_NAMES = [
  "PETREL_OK",
  "PETREL_INVALID_ARGUMENT",
  "PETREL_IO",
  "PETREL_FORMAT",
  "PETREL_UNSUPPORTED",
  "PETREL_INTERNAL",
  "PETREL_OUT_OF_MEMORY",
  "PETREL_CANCELLED",
];

const IS_NODE =
  typeof process === "object" && process !== null && typeof process.versions === "object" &&
  typeof process.versions.node === "string";

/** An engine error (message: the engine's) or a bad argument; `code` names the status. */
export class PetrelError extends Error {
  constructor(message, code = "PETREL_INVALID_ARGUMENT") {
    super(message);
    this.name = "PetrelError";
    this.code = code;
  }
}

function invalid(message) {
  return new PetrelError(message, "PETREL_INVALID_ARGUMENT");
}

const now = () => (typeof performance !== "undefined" ? performance.now() : Date.now());

// --- Instantiation ----------------------------------------------------------------------

const DEFAULT_WASM_URL = new URL("./petrel.wasm", import.meta.url);
const THREADS_WASM_URL = new URL("./petrel-threads.wasm", import.meta.url);
let defaultInstance = null;  // loadPetrel() without options: one instance per realm

// The threads a default load uses at most: beyond this the models' matrices are too
// small to keep more cores busy, and every thread is a Worker holding an instance.
const MAX_DEFAULT_THREADS = 8;
// The threaded module loads this many Workers per thread besides the caller's before it
// is ready (a Worker cannot start while the engine blocks the thread that made it): a
// model's translator and its sentence-splitting batch translator each have a pool. When
// more models hold them all, a new model computes with fewer threads (model.threads).
const WORKERS_PER_THREAD = 2;

/** True where the threaded build can run: Node, or a cross-origin isolated page or worker. */
export function threadsSupported() {
  if (typeof SharedArrayBuffer === "undefined" || typeof Atomics === "undefined") return false;
  if (IS_NODE) return true;
  return globalThis.crossOriginIsolated === true && typeof Worker === "function";
}

// The machine's cores as this realm reports them.
async function coreCount() {
  if (IS_NODE) {
    const os = await import("node:os");
    return typeof os.availableParallelism === "function" ? os.availableParallelism() : os.cpus().length;
  }
  return (typeof navigator !== "undefined" && navigator.hardwareConcurrency) || 1;
}

// A threaded module imports its (shared) memory; the single-threaded one defines its own.
function isThreadedModule(wasmModule) {
  return WebAssembly.Module.imports(wasmModule).some((i) => i.kind === "memory");
}

// Node has no Web Worker: the threaded module's pthreads start in worker_threads through
// petrel-node-thread.mjs, which gives emscripten's worker script a Web Worker's globals.
// A Worker holds the process open only while it loads (loadPetrel waits for it); loaded,
// it waits for work without keeping Node from exiting.
async function nodeWorkerClass() {
  const { Worker: NodeWorker } = await import("node:worker_threads");
  const bootstrap = new URL("./petrel-node-thread.mjs", import.meta.url);
  return class NodeWebWorker {
    constructor(url) {
      this._worker = new NodeWorker(bootstrap, { workerData: String(url) });
      this._worker.on("message", (data) => {
        if (data && data.cmd === "loaded") this._worker.unref();
        if (this.onmessage) this.onmessage({ data });
      });
      this._worker.on("error", (e) => { if (this.onerror) this.onerror(e); });
    }
    postMessage(message, transfer) { this._worker.postMessage(message, transfer); }
    terminate() { return this._worker.terminate(); }
  };
}

async function readLocalFile(url) {
  const fs = await import("node:fs/promises");
  return new Uint8Array(await fs.readFile(url));
}

function toUrl(value) {
  if (value instanceof URL) return value;
  if (typeof value === "string") {
    if (/^[a-zA-Z][a-zA-Z0-9+.-]*:/.test(value) && !/^[a-zA-Z]:[\\/]/.test(value)) return new URL(value);
    if (IS_NODE) return null;  // a file path
    const base = typeof location !== "undefined" ? location.href : undefined;
    return new URL(value, base);
  }
  return null;
}

async function compileWasm(options, threaded) {
  if (options.wasmModule instanceof WebAssembly.Module) return options.wasmModule;
  if (options.wasmBinary !== undefined) {
    const bytes = asBytes(options.wasmBinary);
    if (!bytes) throw invalid("wasmBinary must be an ArrayBuffer or a typed array");
    return WebAssembly.compile(bytes);
  }
  const where = options.wasmUrl !== undefined ? options.wasmUrl : threaded ? THREADS_WASM_URL : DEFAULT_WASM_URL;
  const url = toUrl(where);
  if (IS_NODE && (url === null || url.protocol === "file:")) {
    return WebAssembly.compile(await readLocalFile(url === null ? where : url));
  }
  if (url === null) throw invalid("wasmUrl must be a URL or a URL string");
  const response = await fetch(url);
  if (!response.ok) throw new PetrelError(`cannot fetch ${url}: HTTP ${response.status}`, "PETREL_IO");
  if (typeof WebAssembly.compileStreaming === "function" &&
      (response.headers.get("Content-Type") || "").split(";")[0].trim() === "application/wasm") {
    return WebAssembly.compileStreaming(response);
  }
  return WebAssembly.compile(await response.arrayBuffer());
}

/**
 * Compiles and instantiates the engine. Without options the instance is made once and
 * shared; with {wasmUrl | wasmBinary | wasmModule | threads} a new instance is made.
 * threads: the threads every model computes with (default: the cores, at most 8, where
 * threadsSupported(); else 1); above 1 the threaded build (petrel-threads.wasm) runs.
 * A module given by wasmUrl/wasmBinary/wasmModule is either build: it says which.
 */
export function loadPetrel(options) {
  if (options !== undefined && (options === null || typeof options !== "object"))
    return Promise.reject(invalid("loadPetrel's options must be an object"));
  const shared = options === undefined || Object.keys(options).length === 0;
  if (shared && defaultInstance) return defaultInstance;
  const created = createInstance(options || {});
  if (shared) {
    defaultInstance = created;
    // Its dispose() lets the next loadPetrel() make a new shared instance.
    created.then((p) => { p._shared = created; }, () => { if (defaultInstance === created) defaultInstance = null; });
  }
  return created;
}

const NO_THREADS = "threads above 1 need SharedArrayBuffer: a page (or its worker) served cross-origin " +
                   "isolated (Cross-Origin-Opener-Policy: same-origin, Cross-Origin-Embedder-Policy: require-corp)";

async function createInstance(options) {
  for (const key of Object.keys(options))
    if (!["wasmUrl", "wasmBinary", "wasmModule", "threads"].includes(key)) throw invalid(`unknown loadPetrel option "${key}"`);
  const start = now();
  let threads;
  if (options.threads !== undefined) {
    threads = positiveInt(options.threads, "threads", 1);
    if (threads > 1 && !threadsSupported()) throw new PetrelError(NO_THREADS, "PETREL_UNSUPPORTED");
  } else {
    threads = threadsSupported() ? Math.min(await coreCount(), MAX_DEFAULT_THREADS) : 1;
  }
  const explicit = options.wasmModule !== undefined || options.wasmBinary !== undefined || options.wasmUrl !== undefined;
  const wasmModule = await compileWasm(options, threads > 1);
  const threaded = isThreadedModule(wasmModule);
  if (threaded && !threadsSupported()) throw new PetrelError(`the threaded build: ${NO_THREADS}`, "PETREL_UNSUPPORTED");
  if (!threaded && threads > 1) {
    if (options.threads !== undefined || !explicit)
      throw invalid(`threads ${threads}: the module given is the single-threaded build (petrel.wasm)`);
    threads = 1;  // a single-threaded module chosen by the caller, threads left to the default
  }
  const compiled = now();
  let instantiationFailed;
  const failure = new Promise((resolve, reject) => { instantiationFailed = reject; });
  const moduleArg = {
    instantiateWasm(imports, receive) {
      WebAssembly.instantiate(wasmModule, imports).then((instance) => receive(instance, wasmModule),
                                                        instantiationFailed);
      return {};
    },
    print: (text) => console.log(text),
    printErr: (text) => {
      // The threaded glue warns once when the calling thread waits on a lock or a join
      // (the engine's threads hand work over so, briefly); emscripten cannot tell Node's
      // main thread or a module worker, where waiting is harmless, from a page's.
      if (threaded && text.startsWith("Blocking on the main thread is very dangerous")) return;
      console.warn(text);
    },
  };
  let factory = createPetrelCore;
  if (threaded) {
    factory = (await import("./petrel-threads-core.mjs")).default;
    // Never 0: the module is ready once its Workers have loaded, and waits for at least one.
    moduleArg.petrelPoolSize = Math.max(1, WORKERS_PER_THREAD * (threads - 1));
    if (IS_NODE) moduleArg.petrelWorker = await nodeWorkerClass();
  }
  const core = await Promise.race([factory(moduleArg), failure]);
  if (threaded) freshHeapViews(core, core.wasmMemory);
  if (!core._pjs_set_threads(threads)) {
    throw new PetrelError(core.UTF8ToString(core._pjs_last_error()), "PETREL_INVALID_ARGUMENT");
  }
  const ready = now();
  return new Petrel(core, wasmModule, {
    compileMs: compiled - start,
    instantiateMs: ready - compiled,
    moduleMs: ready - start,
  }, threads, threaded);
}

// Memory grown by one of the threaded module's pthreads leaves this thread's views on the
// smaller buffer until the glue next looks: the views petrel.mjs reads are checked on use.
function freshHeapViews(core, memory) {
  const views = { HEAP8: Int8Array, HEAPU8: Uint8Array, HEAP16: Int16Array, HEAPU16: Uint16Array,
                  HEAP32: Int32Array, HEAPU32: Uint32Array, HEAPF32: Float32Array, HEAPF64: Float64Array };
  for (const [name, View] of Object.entries(views)) {
    let view = core[name];
    Object.defineProperty(core, name, {
      configurable: true,
      get() {
        const buffer = memory.buffer;
        if (!view || view.byteLength !== buffer.byteLength) view = new View(buffer);
        return view;
      },
      set(value) { view = value; },
    });
  }
}

// --- Helpers ------------------------------------------------------------------------------

function asBytes(value) {
  if (value instanceof Uint8Array) return value;
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  if (typeof SharedArrayBuffer !== "undefined" && value instanceof SharedArrayBuffer) return new Uint8Array(value);
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  return null;
}

// A model's file name for messages: a URL's last path segment (percent-decoded when it
// decodes), a path's last component as it is.
function nameOf(where) {
  let url = where instanceof URL ? where : null;
  if (!url && typeof where === "string" && /^[a-zA-Z][a-zA-Z0-9+.-]*:\/\//.test(where)) {
    try { url = new URL(where); } catch { /* not a URL after all: a name */ }
  }
  const base = url ? url.pathname.split("/").pop() : String(where).split(/[\\/]/).pop();
  if (!base) return "<memory>";
  if (!url) return base;
  try {
    return decodeURIComponent(base);
  } catch {
    return base;
  }
}

// The largest model buffer: the heap's maximum is 2 GB, and a wasm32 size_t would
// silently truncate anything beyond 32 bits.
const MAX_MODEL_BYTES = 2 ** 31 - 64;

const OPTION_KEYS = new Set([
  "beam", "maxNewTokens", "minNewTokens", "lengthPenalty", "sourceLanguage", "targetLanguage",
  "shortlist", "kvCacheF16", "onToken", "splitSentences", "html", "qualityScores", "alignment",
  "qualityModel", "ssplitMode", "maxLengthFactor", "limitByLongestSentence", "shortlistOfInput", "secondModel",
  "lookupNgram", "maxDraftTokens",
]);

// bergamot's ssplit-mode names, as the engine numbers them (pjs_translate's split_mode).
const SSPLIT_MODES = { sentence: 0, paragraph: 1, wrapped_text: 2 };

// What a request object ({text, ...}, bergamot's per-message ResponseOptions) may set for itself.
const REQUEST_KEYS = new Set(["text", "html", "qualityScores", "alignment", "ssplitMode"]);

function positiveInt(value, name, min) {
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > 0x7fffffff)
    throw invalid(`${name} must be an integer >= ${min} (got ${typeof value === "number" ? value : typeof value})`);
  return value;
}

// Speculative decoding's lookupNgram and maxDraftTokens (0: off, the default): integers
// the engine checks against its limits (8 and 64), naming lookup_ngram / max_draft_tokens.
function speculationOptions(options, o) {
  o.lookupNgram = options.lookupNgram === undefined ? 0 : positiveInt(options.lookupNgram, "lookupNgram", 0);
  o.maxDraftTokens = options.maxDraftTokens === undefined ? 0 : positiveInt(options.maxDraftTokens, "maxDraftTokens", 0);
}

function checkOptions(options) {
  if (options === undefined || options === null) options = {};
  if (typeof options !== "object" || Array.isArray(options)) throw invalid("translate options must be an object");
  for (const key of Object.keys(options))
    if (!OPTION_KEYS.has(key) && options[key] !== undefined) throw invalid(`unknown translate option "${key}"`);
  const o = {};
  o.beam = options.beam === undefined ? 1 : positiveInt(options.beam, "beam", 1);
  speculationOptions(options, o);
  o.maxNewTokens = options.maxNewTokens === undefined ? 0 : positiveInt(options.maxNewTokens, "maxNewTokens", 1);
  o.minNewTokens = options.minNewTokens === undefined ? 0 : positiveInt(options.minNewTokens, "minNewTokens", 0);
  if (options.lengthPenalty !== undefined &&
      (typeof options.lengthPenalty !== "number" || !Number.isFinite(options.lengthPenalty)))
    throw invalid("lengthPenalty must be a finite number");
  o.lengthPenalty = options.lengthPenalty === undefined ? NaN : options.lengthPenalty;
  for (const key of ["sourceLanguage", "targetLanguage"]) {
    if (options[key] !== undefined && options[key] !== null && typeof options[key] !== "string")
      throw invalid(`${key} must be a string`);
    if (typeof options[key] === "string") checkString(options[key], key);
    o[key] = options[key] || null;
  }
  for (const key of ["shortlist", "kvCacheF16", "splitSentences", "limitByLongestSentence", "shortlistOfInput"]) {
    if (options[key] !== undefined && typeof options[key] !== "boolean") throw invalid(`${key} must be a boolean`);
  }
  checkRequestOptions(options, "");
  o.html = !!options.html;
  o.qualityScores = !!options.qualityScores;
  o.alignment = !!options.alignment;
  o.ssplitMode = options.ssplitMode === undefined || options.ssplitMode === null ? null : options.ssplitMode;
  o.limitByLongestSentence = options.limitByLongestSentence ? 1 : 0;
  o.shortlistOfInput = options.shortlistOfInput ? 1 : 0;
  if (options.maxLengthFactor !== undefined &&
      (typeof options.maxLengthFactor !== "number" || !Number.isFinite(options.maxLengthFactor) ||
       options.maxLengthFactor <= 0))
    throw invalid("maxLengthFactor must be a finite number > 0");
  o.maxLengthFactor = options.maxLengthFactor === undefined ? NaN : options.maxLengthFactor;
  o.qualityModel = null;
  if (options.qualityModel !== undefined && options.qualityModel !== null) {
    o.qualityModel = asBytes(options.qualityModel);
    if (!o.qualityModel) throw invalid("qualityModel must be the bytes of a .quality.lr file (an ArrayBuffer or a typed array)");
  }
  o.shortlist = options.shortlist === undefined ? 0 : options.shortlist ? 1 : -1;
  o.kvCacheF16 = options.kvCacheF16 ? 1 : 0;
  o.splitSentences = options.splitSentences ? 1 : 0;
  if (options.onToken !== undefined && options.onToken !== null && typeof options.onToken !== "function")
    throw invalid("onToken must be a function");
  o.onToken = options.onToken || null;
  if (o.onToken && o.splitSentences) throw invalid("onToken cannot be combined with splitSentences");
  // The model that translates this one's translation on (checked against the instance by the caller).
  if (options.secondModel !== undefined && options.secondModel !== null && !(options.secondModel instanceof PetrelModel))
    throw invalid("secondModel must be a PetrelModel (the pivot -> target model)");
  o.secondModel = options.secondModel || null;
  if (o.onToken && o.secondModel) throw invalid("onToken cannot be combined with a secondModel (pivoting)");
  return o;
}

// The options a call and a request object share (html, qualityScores, alignment, ssplitMode).
function checkRequestOptions(options, where) {
  for (const key of ["html", "qualityScores", "alignment"])
    if (options[key] !== undefined && typeof options[key] !== "boolean") throw invalid(`${where}${key} must be a boolean`);
  const mode = options.ssplitMode;
  if (mode !== undefined && mode !== null && !Object.prototype.hasOwnProperty.call(SSPLIT_MODES, mode))
    throw invalid(`${where}ssplitMode must be "sentence", "paragraph" or "wrapped_text", got ${JSON.stringify(mode)}`);
}

// The options of one request: the call's, with a request object's own on top.
function requestOptions(o, request) {
  if (typeof request === "string") return o;
  const r = Object.assign({}, o);
  for (const key of ["html", "qualityScores", "alignment"]) if (request[key] !== undefined) r[key] = request[key];
  if (request.ssplitMode !== undefined) r.ssplitMode = request.ssplitMode;
  return r;
}

// Requests that translate together (one engine call) have the same of these.
const requestKey = (o) => `${o.html}|${o.qualityScores}|${o.alignment}|${o.ssplitMode}`;

// null (how the engine writes a non-finite number) back to NaN, in place.
function nullsToNaN(list) {
  for (let i = 0; i < list.length; ++i) if (list[i] === null) list[i] = NaN;
  return list;
}

// Why `s` cannot cross to the engine as a NUL-terminated UTF-8 string, or null: a
// U+0000 would cut it short there, and a lone surrogate has no UTF-8 (Emscripten's
// encoder merges it with the next character).
function stringProblem(s) {
  const nul = s.indexOf("\0");
  if (nul >= 0) return `holds U+0000 at index ${nul}`;
  const lone = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.exec(s);
  if (lone) return `holds a lone surrogate (U+${lone[0].charCodeAt(0).toString(16).toUpperCase()}) at index ${lone.index}: not Unicode text`;
  return null;
}

function checkString(s, what) {
  const problem = stringProblem(s);
  if (problem) throw invalid(`${what} ${problem}`);
}

// A request is a string or (as bergamot's) an object {text, html, qualityScores, alignment,
// ssplitMode}; a call takes one request or an array of them.
function isRequestObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value) && !ArrayBuffer.isView(value);
}

function checkTexts(texts) {
  const single = typeof texts === "string" || isRequestObject(texts);
  const list = single ? [texts] : texts;
  if (!Array.isArray(list))
    throw invalid("the text to translate must be a string, a {text, ...} request or an array of them");
  list.forEach((t, i) => {
    if (isRequestObject(t)) {
      for (const key of Object.keys(t))
        if (!REQUEST_KEYS.has(key) && t[key] !== undefined) throw invalid(`request ${i + 1}: unknown field "${key}"`);
      if (typeof t.text !== "string")
        throw invalid(`request ${i + 1}: text is not a string (${t.text === null ? "null" : typeof t.text})`);
      checkRequestOptions(t, `request ${i + 1}: `);
      checkString(t.text, `text ${i + 1}`);
      return;
    }
    if (typeof t !== "string") throw invalid(`text ${i + 1} is not a string (${t === null ? "null" : typeof t})`);
    checkString(t, `text ${i + 1}`);
  });
  return { single, list };
}

// --- Language models: options, prompts, messages -------------------------------------------

const GENERATE_OPTION_KEYS = new Set([
  "maxNewTokens", "doSample", "temperature", "topK", "topP", "minP", "repetitionPenalty", "seed", "ignoreEos",
  "kvCache", "onToken", "stop", "grammar", "jsonSchema", "lookupNgram", "maxDraftTokens",
]);

// The KV cache types as pjs_generate numbers them.
const KV_CACHE_TYPES = { f32: 0, f16: 1, int8: 2 };

// generator.h's kMaxStopStrings and kMaxStopBytes; sampling's kMinSamplingScale and kMaxSamplingScale.
const MAX_STOP_STRINGS = 16;
const MAX_STOP_BYTES = 256;
const MIN_SAMPLING_SCALE = 1e-6;
const MAX_SAMPLING_SCALE = 1e6;

const utf8 = new TextEncoder();
const utf8Bytes = (s) => utf8.encode(s).length;

function shown(value) {
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "number" || typeof value === "boolean" || typeof value === "bigint") return String(value);
  return value === null ? "null" : Array.isArray(value) ? "an array" : typeof value;
}

// A number option in [min, max] (each end open or closed); NaN when not given (the model's default).
function numberIn(options, key, min, max, minOpen = false) {
  const value = options[key];
  if (value === undefined) return NaN;
  if (typeof value !== "number" || !(minOpen ? value > min : value >= min) || !(value <= max))
    throw invalid(`${key} must be a number in ${minOpen ? "(" : "["}${min}, ${max}], got ${shown(value)}`);
  return value;
}

function booleanOption(options, key) {
  const value = options[key];
  if (value !== undefined && typeof value !== "boolean") throw invalid(`${key} must be a boolean, got ${shown(value)}`);
  return value;
}

// A seed as its low and high 32 bits: a non-negative safe integer, or a BigInt below 2^64.
function seedHalves(seed) {
  if (seed === undefined) return [0, 0];
  if (typeof seed === "bigint") {
    if (seed < 0n || seed >= 1n << 64n) throw invalid(`seed must be an integer from 0 to 2^64 - 1, got ${seed}`);
    return [Number(seed & 0xffffffffn), Number(seed >> 32n)];
  }
  if (typeof seed !== "number" || !Number.isSafeInteger(seed) || seed < 0)
    throw invalid(`seed must be a non-negative integer (a BigInt up to 2^64 - 1), got ${shown(seed)}`);
  return [seed % 2 ** 32, Math.floor(seed / 2 ** 32)];
}

// Checks generate / reply options (`call` names the call in messages); returns them in the
// form pjs_generate takes. Unset sampling options stay the model's (its generation_config.json).
function checkGenerateOptions(options, call) {
  if (options === undefined || options === null) options = {};
  if (typeof options !== "object" || Array.isArray(options)) throw invalid(`${call} options must be an object`);
  for (const key of Object.keys(options)) {
    if (GENERATE_OPTION_KEYS.has(key) || options[key] === undefined) continue;
    const hint = key === "kvCacheF16" ? ` (a language model's is kvCache: "f32", "f16" or "int8")`
               : OPTION_KEYS.has(key) ? " (a translation option)" : "";
    throw invalid(`unknown ${call} option "${key}"${hint}`);
  }
  const o = {};
  o.maxNewTokens = options.maxNewTokens === undefined ? 0 : positiveInt(options.maxNewTokens, "maxNewTokens", 1);
  speculationOptions(options, o);
  const doSample = booleanOption(options, "doSample");
  o.doSample = doSample === undefined ? -1 : doSample ? 1 : 0;
  o.temperature = numberIn(options, "temperature", MIN_SAMPLING_SCALE, MAX_SAMPLING_SCALE);
  if (options.topK !== undefined && (!Number.isInteger(options.topK) || options.topK < 0 || options.topK > 0xffffffff))
    throw invalid(`topK must be an integer from 0 (off) to 2^32 - 1, got ${shown(options.topK)}`);
  o.topK = options.topK === undefined ? -1 : options.topK;
  o.topP = numberIn(options, "topP", 0, 1, true);
  o.minP = numberIn(options, "minP", 0, 1);
  o.repetitionPenalty = numberIn(options, "repetitionPenalty", MIN_SAMPLING_SCALE, MAX_SAMPLING_SCALE);
  [o.seedLow, o.seedHigh] = seedHalves(options.seed);
  o.ignoreEos = booleanOption(options, "ignoreEos") ? 1 : 0;
  if (options.kvCache !== undefined && !Object.prototype.hasOwnProperty.call(KV_CACHE_TYPES, options.kvCache))
    throw invalid(`kvCache must be "f32", "f16" or "int8", got ${shown(options.kvCache)}`);
  o.kvCache = options.kvCache === undefined ? 0 : KV_CACHE_TYPES[options.kvCache];
  if (options.onToken !== undefined && options.onToken !== null && typeof options.onToken !== "function")
    throw invalid("onToken must be a function");
  o.onToken = options.onToken || null;
  const stop = options.stop === undefined ? [] : typeof options.stop === "string" ? [options.stop] : options.stop;
  if (!Array.isArray(stop)) throw invalid(`stop must be a string or an array of strings, got ${shown(options.stop)}`);
  if (stop.length > MAX_STOP_STRINGS) throw invalid(`stop: ${stop.length} strings, more than ${MAX_STOP_STRINGS}`);
  stop.forEach((s, i) => {
    if (typeof s !== "string") throw invalid(`stop[${i}] must be a string, got ${shown(s)}`);
    checkString(s, `stop[${i}]`);
    const bytes = utf8Bytes(s);
    if (bytes < 1 || bytes > MAX_STOP_BYTES) throw invalid(`stop[${i}] must be 1 to ${MAX_STOP_BYTES} bytes of UTF-8, got ${bytes}`);
  });
  o.stop = stop;
  o.grammar = null;
  if (options.grammar !== undefined && options.grammar !== null) {
    if (typeof options.grammar !== "string" || options.grammar === "")
      throw invalid(`grammar must be a non-empty string (GBNF, llama.cpp's syntax, root the start), got ${shown(options.grammar)}`);
    checkString(options.grammar, "grammar");
    o.grammar = options.grammar;
  }
  o.jsonSchema = null;
  if (options.jsonSchema !== undefined && options.jsonSchema !== null) {
    let text = options.jsonSchema;
    if (typeof text === "object") {
      try {
        text = JSON.stringify(text);
      } catch (e) {
        throw invalid(`jsonSchema cannot be written as JSON: ${e.message}`);
      }
    }
    if (typeof text !== "string" || text === "")
      throw invalid(`jsonSchema must be a JSON Schema (an object, or its JSON text), got ${shown(options.jsonSchema)}`);
    checkString(text, "jsonSchema");
    o.jsonSchema = text;
  }
  if (o.grammar !== null && o.jsonSchema !== null) throw invalid("grammar and jsonSchema cannot be combined: give one");
  if (o.ignoreEos && (o.grammar !== null || o.jsonSchema !== null))
    throw invalid(`ignoreEos cannot be combined with ${o.grammar !== null ? "grammar" : "jsonSchema"} (a constrained output ends when it is complete)`);
  return o;
}

const isIdList = (value) => Array.isArray(value) || (ArrayBuffer.isView(value) && !(value instanceof DataView));

// Token ids (an array or typed array of integers) as an Int32Array; `what` names them.
function tokenIds(list, what) {
  const ids = new Int32Array(list.length);
  for (let i = 0; i < list.length; ++i) {
    const id = list[i];
    if (typeof id !== "number" || !Number.isInteger(id) || id < 0 || id > 0x7fffffff)
      throw invalid(`${what} id ${i} must be a non-negative integer (a token id), got ${shown(id)}`);
    ids[i] = id;
  }
  return ids;
}

// A prompt: text (a string), or token ids (an array or typed array of integers), as {text} or {ids}.
function checkPrompt(prompt) {
  if (typeof prompt === "string") {
    checkString(prompt, "the prompt");
    return { text: prompt, ids: null };
  }
  if (isIdList(prompt)) return { text: null, ids: tokenIds(prompt, "prompt") };
  throw invalid(`the prompt must be a string (text) or an array of token ids, got ${shown(prompt)}`);
}

// Boolean variables a chat template reads ({enable_thinking: false}) as [names, values].
function checkTemplateFlags(flags) {
  if (flags === undefined || flags === null) return [[], []];
  if (typeof flags !== "object" || Array.isArray(flags))
    throw invalid("templateFlags must be an object of booleans, e.g. {enable_thinking: false}");
  const names = [], values = [];
  for (const [name, value] of Object.entries(flags)) {
    if (value === undefined) continue;
    if (typeof value !== "boolean") throw invalid(`templateFlags.${name} must be a boolean, got ${shown(value)}`);
    checkString(name, "a templateFlags name");
    names.push(name);
    values.push(value ? 1 : 0);
  }
  return [names, values];
}

function checkKeys(options, keys, what) {
  if (options === undefined || options === null) return {};
  if (typeof options !== "object" || Array.isArray(options)) throw invalid(`${what} must be an object`);
  for (const key of Object.keys(options))
    if (!keys.includes(key) && options[key] !== undefined) throw invalid(`unknown ${what.replace(/s$/, "")} "${key}"`);
  return options;
}

// Copies NUL-terminated UTF-8 strings and Int32Arrays into one engine allocation (the
// arrays first, 4-byte aligned): {block, strings: pointers, arrays: pointers}. The caller
// frees block with core._free.
function marshal(core, strings, arrays = []) {
  const sizes = strings.map((s) => core.lengthBytesUTF8(s) + 1);
  const arrayBytes = arrays.map((a) => 4 * a.length);
  const total = arrayBytes.reduce((a, b) => a + b, 0) + sizes.reduce((a, b) => a + b, 0);
  const block = core._malloc(Math.max(total, 4)) >>> 0;
  if (!block) throw new PetrelError("out of memory", "PETREL_OUT_OF_MEMORY");
  let at = block;
  const arrayPointers = arrays.map((a, i) => {
    const p = at;
    core.HEAP32.set(a, p >>> 2);
    at += arrayBytes[i];
    return p;
  });
  const stringPointers = strings.map((s, i) => {
    const p = at;
    core.stringToUTF8(s, p, sizes[i]);
    at += sizes[i];
    return p;
  });
  return { block, strings: stringPointers, arrays: arrayPointers };
}

const utf8Decoder = new TextDecoder();

// One pjs_generate call: `chat` a conversation's handle (0: none), `prompt` from
// checkPrompt (a chat's message as text), `o` from checkGenerateOptions.
function runGeneration(petrel, core, handle, chat, prompt, o) {
  let callbackError = null;
  const strings = [prompt.text || "", ...o.stop, o.grammar || "", o.jsonSchema || ""];
  const stopPointers = new Int32Array(o.stop.length);
  const { block, strings: at, arrays } = marshal(core, strings, [prompt.ids || new Int32Array(0), stopPointers]);
  let result = 0;
  try {
    for (let i = 0; i < o.stop.length; ++i) core.HEAP32[(arrays[1] >>> 2) + i] = at[1 + i];
    if (o.onToken) {
      core.__petrelToken = (event) => {
        if (callbackError) return false;
        try {
          return o.onToken({ text: event.text, delta: event.delta, ids: event.ids, final: event.final, piece: event.piece }) !== false;
        } catch (e) {
          callbackError = e;
          return false;
        }
      };
    }
    const n = o.stop.length;
    try {
      result = core._pjs_generate(handle, chat, prompt.text !== null ? at[0] : 0, arrays[0], prompt.ids ? prompt.ids.length : 0,
                                  o.maxNewTokens, o.doSample, o.temperature, o.topK, o.topP, o.minP,
                                  o.repetitionPenalty, o.seedLow, o.seedHigh, o.ignoreEos, o.kvCache, o.onToken ? 1 : 0,
                                  arrays[1], n, o.grammar !== null ? at[1 + n] : 0,
                                  o.jsonSchema !== null ? at[2 + n] : 0, o.lookupNgram, o.maxDraftTokens) >>> 0;
    } finally {
      core.__petrelToken = null;
    }
    if (!result) throw petrel._engineError();
    if (callbackError) throw callbackError;
    const detailed = JSON.parse(core.UTF8ToString(core._pjs_generation_json(result)));
    if (prompt.text !== null) {
      const text = core._pjs_generation_text(result) >>> 0;
      // Decoded with its length: a generated U+0000 does not cut it short.
      const bytes = core.HEAPU8.subarray(text, text + core._pjs_generation_text_length(result));
      // A browser's TextDecoder refuses views of shared memory (the threaded build's): a copy.
      detailed.text = utf8Decoder.decode(bytes.buffer instanceof ArrayBuffer ? bytes : bytes.slice());
    }
    return detailed;
  } finally {
    if (result) core._pjs_generation_free(result);
    core._free(block);
  }
}

// The in-memory file a prompt cache passes through (the engine saves and loads paths).
const PROMPT_CACHE_FILE = "/petrel-prompt-cache";

// An engine error about PROMPT_CACHE_FILE, naming `name` instead, and the JavaScript call.
function promptCacheError(error, name) {
  error.message = error.message.split(PROMPT_CACHE_FILE).join(name).replace("set_prompt_cache_bytes", "setPromptCacheBytes");
  return error;
}

function fsError(e, what) {
  return e instanceof PetrelError ? e : new PetrelError(`${what}: ${e && e.message ? e.message : e}`, "PETREL_IO");
}

// --- The engine -----------------------------------------------------------------------------

/** The instantiated engine: loads models. */
export class Petrel {
  constructor(core, wasmModule, timings, threads, threaded) {
    this._core = core;
    /** The threads each model computes with (model.threads: what it got). */
    this.threads = threads;
    /** Which build runs: true for petrel-threads.wasm (pthreads), false for petrel.wasm. */
    this.threaded = threaded;
    this._wasmModule = wasmModule;
    this._models = new Set();
    this._busy = false;
    this._broken = null;
    this._disposed = false;
    /** {compileMs, instantiateMs, moduleMs}: how long loadPetrel took. */
    this.timings = Object.freeze(timings);
    /** The engine's version ("0.1.0"). */
    this.version = core.UTF8ToString(core._pjs_version());
  }

  /** The compiled WebAssembly.Module (to instantiate again elsewhere: loadPetrel({wasmModule})). */
  get wasmModule() { return this._wasmModule; }

  _check() {
    if (this._disposed) throw invalid("this Petrel instance has been disposed");
    if (this._broken) throw new PetrelError(`the WebAssembly instance is unusable after an earlier failure: ${this._broken}`, "PETREL_INTERNAL");
    if (this._busy) throw invalid("Petrel is busy: a translation or generation is running (called from onToken?)");
  }

  // Runs `body` with the instance marked busy; a WebAssembly trap makes the instance unusable.
  _run(body) {
    this._check();
    this._busy = true;
    try {
      return body(this._core);
    } catch (e) {
      if (e instanceof WebAssembly.RuntimeError || (e && e.name === "RuntimeError")) {
        this._broken = e.message;
        throw new PetrelError(`WebAssembly failure: ${e.message}`, "PETREL_INTERNAL");
      }
      throw e;
    } finally {
      this._busy = false;
    }
  }

  _engineError() {
    const core = this._core;
    const code = core._pjs_last_code();
    const message = core.UTF8ToString(core._pjs_last_error()) || "unknown error";
    return new PetrelError(message, STATUS_NAMES[code] || "PETREL_INTERNAL");
  }

  // A model buffer of `size` bytes (a pointer, unsigned); sizes the heap cannot hold are refused.
  _allocModel(size, name) {
    if (!Number.isSafeInteger(size) || size < 1 || size > MAX_MODEL_BYTES)
      throw new PetrelError(`${name}: a model of ${size} bytes does not fit the WebAssembly heap ` +
                            `(${MAX_MODEL_BYTES} bytes at most)`, "PETREL_OUT_OF_MEMORY");
    return this._run((core) => {
      const buffer = core._pjs_buffer_alloc(size) >>> 0;
      if (!buffer) throw this._engineError();
      return buffer;
    });
  }

  _freeBuffer(buffer) {
    if (!this._broken) this._core._pjs_buffer_free(buffer);  // a trapped instance is not called again
  }

  // Hands `buffer` to the engine (which owns it from _pjs_model_load on, also on failure);
  // it is freed here on any failure before that.
  _adopt(buffer, size, name, { isa, activationScales, cacheBytes }) {
    let owned = true;
    try {
      return this._run((core) => {
        const nameBytes = core.lengthBytesUTF8(name) + 1;
        const isaBytes = core.lengthBytesUTF8(isa || "") + 1;
        const namePtr = core._malloc(nameBytes + isaBytes) >>> 0;
        if (!namePtr) throw new PetrelError("out of memory", "PETREL_OUT_OF_MEMORY");
        let handle, loadMs;
        try {
          core.stringToUTF8(name, namePtr, nameBytes);
          core.stringToUTF8(isa || "", namePtr + nameBytes, isaBytes);
          const start = now();
          owned = false;
          handle = core._pjs_model_load(buffer, size, namePtr, namePtr + nameBytes,
                                        activationScales === "file" ? 1 : 0, cacheBytes) >>> 0;
          loadMs = now() - start;
        } finally {
          core._free(namePtr);
        }
        if (!handle) throw this._engineError();
        let model;
        try {
          model = new PetrelModel(this, handle, name, loadMs);
        } catch (e) {
          core._pjs_model_free(handle);
          throw e;
        }
        this._models.add(model);
        return model;
      });
    } catch (e) {
      if (owned) this._freeBuffer(buffer);
      throw e;
    }
  }

  // Copies `bytes` into a fresh model buffer (the one copy).
  _loadBytes(bytes, name, session) {
    if (bytes.byteLength === 0) throw new PetrelError(`${name}: the model file is empty`, "PETREL_FORMAT");
    const buffer = this._allocModel(bytes.byteLength, name);
    try {
      this._core.HEAPU8.set(bytes, buffer);
    } catch (e) {
      this._freeBuffer(buffer);
      throw e;
    }
    return this._adopt(buffer, bytes.byteLength, name, session);
  }

  // A Node file: read straight into the model buffer.
  async _loadFile(path, name, session) {
    const fs = await import("node:fs/promises");
    let file;
    try {
      file = await fs.open(path, "r");
    } catch (e) {
      throw new PetrelError(`cannot open ${path instanceof URL ? path.pathname : path}: ${e.message}`, "PETREL_IO");
    }
    try {
      const size = (await file.stat()).size;
      if (size === 0) throw new PetrelError(`${name}: the model file is empty`, "PETREL_FORMAT");
      const buffer = this._allocModel(size, name);
      let done = 0;
      try {
        while (done < size) {
          // A fresh view each time: nothing allocates meanwhile, but stay safe.
          const view = new Uint8Array(this._core.HEAPU8.buffer, buffer + done, size - done);
          const { bytesRead } = await file.read(view, 0, view.length, done);
          if (bytesRead === 0) break;
          done += bytesRead;
        }
      } catch (e) {
        this._freeBuffer(buffer);
        throw new PetrelError(`cannot read ${name}: ${e.message}`, "PETREL_IO");
      }
      return this._adopt(buffer, done, name, session);
    } finally {
      await file.close();
    }
  }

  // A Response: streamed into the model buffer when its length is known.
  async _loadResponse(response, name, session) {
    if (!response.ok) throw new PetrelError(`cannot fetch ${name}: HTTP ${response.status}`, "PETREL_IO");
    const encoding = (response.headers.get("Content-Encoding") || "identity").trim().toLowerCase();
    const length = Number(response.headers.get("Content-Length"));
    // Without a usable length, read it whole; a length the heap cannot hold is refused below.
    if (!response.body || encoding !== "identity" || !Number.isInteger(length) || length <= 0) {
      return this._loadBytes(new Uint8Array(await response.arrayBuffer()), name, session);
    }
    let capacity = length;
    let buffer;
    try {
      buffer = this._allocModel(capacity, name);
    } catch (e) {
      response.body.cancel().catch(() => {});
      throw e;
    }
    let done = 0;
    const reader = response.body.getReader();
    try {
      for (;;) {
        const { value, done: finished } = await reader.read();
        if (finished) break;
        const needed = done + value.byteLength;
        if (needed > capacity) {  // longer than announced: grow (one more copy)
          const grown = Math.max(needed, Math.min(capacity * 2, MAX_MODEL_BYTES));
          const bigger = this._allocModel(grown, name);
          this._core.HEAPU8.copyWithin(bigger, buffer, buffer + done);
          this._freeBuffer(buffer);
          buffer = bigger;
          capacity = grown;
        }
        this._core.HEAPU8.set(value, buffer + done);
        done = needed;
      }
    } catch (e) {
      this._freeBuffer(buffer);
      reader.cancel().catch(() => {});
      throw e instanceof PetrelError ? e : new PetrelError(`cannot read ${name}: ${e.message}`, "PETREL_IO");
    }
    if (done === 0) {
      this._freeBuffer(buffer);
      throw new PetrelError(`${name}: the model file is empty`, "PETREL_FORMAT");
    }
    return this._adopt(buffer, done, name, session);
  }

  /**
   * Loads a model file: an ArrayBuffer, a typed array, a URL (string or URL object), a
   * Node file path, or a fetch() Response. options.name names it in error messages;
   * options.isa picks the kernel path ("simd128", the default, or "scalar");
   * options.activationScales how int8 layers quantize their input: "dynamic" (the
   * default: each row by its own range) or "file" (the model file's static scales, a
   * Marian int8 model's alphas, as Firefox's bergamot int8shiftAlphaAll);
   * options.cacheBytes keeps translated sentences for later calls (bergamot's cacheSize, made
   * correct: a sentence is found again only with every option that changes its translation
   * the same), in at most that many bytes, least recently used out first; 0 (the default): none.
   */
  async loadModel(source, options = {}) {
    this._check();
    if (options === null || typeof options !== "object") throw invalid("loadModel's options must be an object");
    for (const key of Object.keys(options))
      if (!["name", "isa", "activationScales", "cacheBytes"].includes(key)) throw invalid(`unknown loadModel option "${key}"`);
    if (options.name !== undefined && typeof options.name !== "string") throw invalid("name must be a string");
    if (options.isa !== undefined && typeof options.isa !== "string") throw invalid("isa must be a string");
    if (options.activationScales !== undefined && !["dynamic", "file"].includes(options.activationScales))
      throw invalid(`activationScales must be "dynamic" or "file", got ${JSON.stringify(options.activationScales)}`);
    const cacheBytes = options.cacheBytes === undefined ? 0 : options.cacheBytes;
    if (!Number.isSafeInteger(cacheBytes) || cacheBytes < 0 || cacheBytes > 2 ** 31)
      throw invalid(`cacheBytes must be an integer from 0 to 2^31, got ${JSON.stringify(options.cacheBytes)}`);
    const session = { isa: options.isa || "", activationScales: options.activationScales || "dynamic", cacheBytes };
    const bytes = asBytes(source);
    if (bytes) return this._loadBytes(bytes, options.name || "<memory>", session);
    if (typeof Response !== "undefined" && source instanceof Response)
      return this._loadResponse(source, options.name || nameOf(source.url || "<response>"), session);
    if (typeof source !== "string" && !(source instanceof URL))
      throw invalid("a model source must be an ArrayBuffer, a typed array, a URL, a URL string, a file path or a Response");
    const url = toUrl(source);
    const name = options.name || nameOf(url || source);
    if (IS_NODE && (url === null || url.protocol === "file:")) return this._loadFile(url || source, name, session);
    let response;
    try {
      response = await fetch(url);
    } catch (e) {
      throw new PetrelError(`cannot fetch ${url}: ${e.message}`, "PETREL_IO");
    }
    return this._loadResponse(response, name, session);
  }

  /** Frees every model this instance still holds; the instance cannot be used afterwards. */
  dispose() {
    for (const model of [...this._models]) model.free();
    this._disposed = true;
    if (this.threaded) this._core.PThread.terminateAllThreads();  // the threads' Workers
    if (this._shared && defaultInstance === this._shared) defaultInstance = null;
  }
}

/** A loaded model. Free it with free() when done (the WebAssembly heap is not collected). */
export class PetrelModel {
  constructor(petrel, handle, name, loadMs) {
    this._petrel = petrel;
    this._handle = handle;
    this.name = name;
    /** ms the engine took to load the model from bytes in memory. */
    this.loadMs = loadMs;
    const core = petrel._core;
    this.info = Object.freeze(JSON.parse(core.UTF8ToString(core._pjs_model_info(handle))));
    /** The kernel path in use ("simd128", "scalar"). */
    this.isa = core.UTF8ToString(core._pjs_model_isa(handle));
    /** The threads this model computes with: petrel.threads, fewer when other models hold the Workers. */
    this.threads = core._pjs_model_threads(handle);
    this._chats = new Set();  // a language model's live conversations (freed with it)
  }

  get freed() { return this._handle === 0; }

  /** The sentence cache's counters {hits, misses, entries, bytes}, or null without one (loadModel's cacheBytes). */
  cacheStats() {
    const core = this._petrel._core;
    return JSON.parse(core.UTF8ToString(core._pjs_model_cache_stats(this._live())));
  }

  _live() {
    if (!this._handle) throw invalid(`model ${this.name} has been freed`);
    return this._handle;
  }

  /**
   * Translates a string (-> string) or an array of strings (-> string[], one batch).
   * Synchronous; see translate().
   */
  translateSync(texts, options) {
    const detailed = this.translateDetailedSync(texts, options);
    return Array.isArray(detailed) ? detailed.map((d) => d.text) : detailed.text;
  }

  /**
   * Like translateSync with {text, ids, score, eos, source, sentences} per request (ids:
   * output token ids, no EOS), and alignments / qualityScores when asked.
   */
  translateDetailedSync(texts, options) {
    const handle = this._live();
    if (this.info.decoder_only)
      throw invalid(`${this.name} is a language model (decoder-only): generate or chat with it; translate takes a translation model`);
    const { single, list } = checkTexts(texts);
    const o = checkOptions(options);
    if (o.secondModel) {
      if (o.secondModel._petrel !== this._petrel)
        throw invalid("secondModel belongs to another Petrel instance: both models of a pivot must be loaded by the same one");
      if (o.secondModel.info.decoder_only)
        throw invalid(`secondModel ${o.secondModel.name} is a language model (decoder-only): a pivot takes two translation models`);
      o.secondHandle = o.secondModel._live();
    }
    // Requests whose own options differ translate in separate engine calls, in order of
    // first appearance; each call is one batch.
    const groups = new Map();
    list.forEach((request, i) => {
      const r = requestOptions(o, request);
      const key = requestKey(r);
      if (!groups.has(key)) groups.set(key, { options: r, indices: [], texts: [] });
      const group = groups.get(key);
      group.indices.push(i);
      group.texts.push(typeof request === "string" ? request : request.text);
    });
    if (groups.size === 0) groups.set("", { options: o, indices: [], texts: [] });  // checks the options
    const results = new Array(list.length);
    let speculation = null;
    this._petrel._run((core) => {
      for (const group of groups.values()) {
        const got = this._translateGroup(core, handle, group.texts, group.options, group.indices);
        group.indices.forEach((index, k) => { results[index] = got[k]; });
        // The engine call's counts, summed over the calls of the groups.
        const counts = JSON.parse(core.UTF8ToString(core._pjs_translate_speculation(handle)));
        if (counts && speculation)
          for (const key of Object.keys(speculation)) speculation[key] += counts[key] === undefined ? 0 : counts[key];
        else if (counts) speculation = counts;
      }
    });
    if (list.length > 0) this._speculation = speculation;
    return single ? results[0] : results;
  }

  // One engine call: `list` (strings) with the checked options `o`; `indices`: each
  // input's index in the caller's request list (onToken events report those).
  _translateGroup(core, handle, list, o, indices) {
    const petrel = this._petrel;
    let callbackError = null;
    // The inputs and language codes as NUL-terminated UTF-8, with the pointer array and
    // the quality model's bytes.
    const strings = [...list, o.sourceLanguage || "", o.targetLanguage || ""];
    const sizes = strings.map((s) => core.lengthBytesUTF8(s) + 1);
    const pointerBytes = 4 * list.length;
    const qualityBytes = o.qualityModel ? o.qualityModel.byteLength : 0;
    const stringBytes = sizes.reduce((a, b) => a + b, 0);
    const block = core._malloc(pointerBytes + stringBytes + qualityBytes) >>> 0;
    if (!block) throw new PetrelError("out of memory", "PETREL_OUT_OF_MEMORY");
    let result = 0;
    try {
      const pointers = [];
      let at = block + pointerBytes;
      strings.forEach((s, i) => {
        core.stringToUTF8(s, at, sizes[i]);
        pointers.push(at);
        at += sizes[i];
      });
      for (let i = 0; i < list.length; ++i) core.HEAP32[(block >>> 2) + i] = pointers[i];
      const qualityModel = o.qualityModel ? at : 0;
      if (o.qualityModel) core.HEAPU8.set(o.qualityModel, qualityModel);
      if (o.onToken) {
        core.__petrelToken = (event) => {
          if (callbackError) return false;
          event.input = indices[event.input];
          try {
            return o.onToken(event) !== false;
          } catch (e) {
            callbackError = e;
            return false;
          }
        };
      }
      const split = o.splitSentences || o.ssplitMode !== null ? 1 : 0;
      const splitMode = o.ssplitMode === null ? -1 : SSPLIT_MODES[o.ssplitMode];
      try {
        result = core._pjs_translate(handle, o.secondHandle || 0, block, list.length, o.beam, o.maxNewTokens, o.minNewTokens,
                                     o.lengthPenalty, o.shortlist, o.kvCacheF16,
                                     o.sourceLanguage ? pointers[list.length] : 0,
                                     o.targetLanguage ? pointers[list.length + 1] : 0,
                                     o.onToken ? 1 : 0, split, splitMode, o.html ? 1 : 0, o.qualityScores ? 1 : 0,
                                     o.alignment ? 1 : 0, qualityModel, qualityBytes, o.maxLengthFactor,
                                     o.limitByLongestSentence, o.shortlistOfInput, o.lookupNgram, o.maxDraftTokens) >>> 0;
      } finally {
        core.__petrelToken = null;
      }
      if (!result) throw petrel._engineError();
      if (callbackError) throw callbackError;
      const out = [];
      for (let i = 0; i < list.length; ++i) {
        const status = core._pjs_result_status(result, i);
        if (status) throw new PetrelError(core.UTF8ToString(core._pjs_result_error(result, i)), STATUS_NAMES[status] || "PETREL_INTERNAL");
        const length = core._pjs_result_length(result, i);
        const idsPtr = core._pjs_result_ids(result, i) >>> 2;
        const view = JSON.parse(core.UTF8ToString(core._pjs_result_sentences(result, i)));
        const detailed = {
          text: core.UTF8ToString(core._pjs_result_text(result, i)),
          ids: Array.from(core.HEAP32.subarray(idsPtr, idsPtr + length)),
          score: core._pjs_result_score(result, i),
          eos: core._pjs_result_eos(result, i) !== 0,
          // What the sentences' source ranges point into: the input, or in html mode its
          // markup as written back (bergamot's getOriginalText).
          source: o.html ? view.source : list[i],
          sentences: view.sentences,
        };
        if (o.alignment) {
          for (const matrix of view.alignments) for (const row of matrix) nullsToNaN(row);
          detailed.alignments = view.alignments;
        }
        if (o.qualityScores) {
          for (const q of view.qualityScores) {
            if (!q) continue;
            if (q.sentenceScore === null) q.sentenceScore = NaN;
            nullsToNaN(q.wordScores);
          }
          detailed.qualityScores = view.qualityScores;
        }
        out.push(detailed);
      }
      return out;
    } finally {
      if (result) core._pjs_result_free(result);
      core._free(block);
    }
  }

  /**
   * Speculative decoding's counts of the last translate call ({verifications, draftedTokens,
   * acceptedTokens, draftModelTokens}; no draftModelTokens for calls that split sentences,
   * use html, a cache or a secondModel), or null before one.
   */
  lastTranslateSpeculation() {
    return this._speculation || null;
  }

  /**
   * Speculative decoding's draft model (null: none): a smaller model of this instance, of
   * the same kind (a language model for a language model, a translation model with
   * attention decoder layers for a translation model) and with this model's vocabulary,
   * id for id (another is refused with a PetrelError naming both). Its greedy tokens are
   * drafts that one pass of this model checks, where lookupNgram finds nothing: outputs do
   * not change, and they come faster where the drafts are right. This model keeps the
   * draft's weights: the draft may be freed afterwards.
   */
  setDraftModel(draft) {
    const handle = this._live();
    if (draft !== null && draft !== undefined) {
      if (!(draft instanceof PetrelModel)) throw invalid("setDraftModel takes a PetrelModel or null");
      if (draft._petrel !== this._petrel)
        throw invalid("the draft model belongs to another Petrel instance: load both with the same one");
    }
    const draftHandle = draft ? draft._live() : 0;
    this._petrel._run((core) => {
      if (!core._pjs_set_draft_model(handle, draftHandle)) throw this._petrel._engineError();
    });
  }

  /** Checks translate options against this model (beam, lengths, languages): throws if bad. */
  checkOptions(options) {
    this.translateDetailedSync([], options);
  }

  /**
   * Translates a string (-> Promise<string>) or an array of strings (-> Promise<string[]>,
   * one batch). Options: beam (default 1: greedy), maxNewTokens, minNewTokens,
   * lengthPenalty, maxLengthFactor, sourceLanguage, targetLanguage (multilingual models),
   * shortlist, kvCacheF16, splitSentences, ssplitMode ("sentence" | "paragraph" |
   * "wrapped_text"), limitByLongestSentence, html, qualityScores, qualityModel (a
   * .quality.lr file's bytes), alignment, onToken(event) with {input, text, delta,
   * restarted, final, provisional, ids, piece} per decoder step (return false to stop
   * that input), secondModel (a model of this instance that translates this one's
   * translation on: source -> pivot -> target in one call, bergamot's translateViaPivoting),
   * lookupNgram and maxDraftTokens (speculative decoding with beam 1: drafts from prompt
   * lookup over the input and output, at most 8, or from setDraftModel's model, checked by
   * one pass; the same translations, faster where the drafts are right;
   * lastTranslateSpeculation() has the counts).
   * A request may also be an object {text, html, qualityScores, alignment, ssplitMode}
   * (bergamot's), its fields overriding the call's options.
   * The work runs synchronously inside the call; the Promise only unifies the API.
   */
  async translate(texts, options) {
    return this.translateSync(texts, options);
  }

  /** translate() with {text, ids, score, eos, source, sentences[, alignments, qualityScores]} per input. */
  async translateDetailed(texts, options) {
    return this.translateDetailedSync(texts, options);
  }

  /** How `text` tokenizes: {pieces, ids} (EOS included); sourceLanguage for multilingual models. */
  tokenize(text, sourceLanguage) {
    const handle = this._live();
    if (typeof text !== "string") throw invalid("the text to tokenize must be a string");
    checkString(text, "the text to tokenize");
    if (sourceLanguage !== undefined && sourceLanguage !== null && typeof sourceLanguage !== "string")
      throw invalid("sourceLanguage must be a string");
    if (sourceLanguage) checkString(sourceLanguage, "sourceLanguage");
    return this._petrel._run((core) => {
      const strings = [text, sourceLanguage || ""];
      const sizes = strings.map((s) => core.lengthBytesUTF8(s) + 1);
      const block = core._malloc(sizes[0] + sizes[1]) >>> 0;
      if (!block) throw new PetrelError("out of memory", "PETREL_OUT_OF_MEMORY");
      try {
        core.stringToUTF8(strings[0], block, sizes[0]);
        core.stringToUTF8(strings[1], block + sizes[0], sizes[1]);
        const json = core._pjs_tokenize(handle, block, sourceLanguage ? block + sizes[0] : 0);
        if (!json) throw this._petrel._engineError();
        return JSON.parse(core.UTF8ToString(json));
      } finally {
        core._free(block);
      }
    });
  }


  // --- Language models ----------------------------------------------------------------------

  // checkGenerateOptions, and maxNewTokens within the model's positions.
  _checkGenerateOptions(options, call) {
    const o = checkGenerateOptions(options, call);
    if (o.maxNewTokens > this.info.max_positions)
      throw invalid(`maxNewTokens ${o.maxNewTokens} is more than the model's positions (${this.info.max_positions})`);
    return o;
  }

  // The handle of a language model, or an error naming `call`.
  _languageModel(call) {
    const handle = this._live();
    if (!this.info.decoder_only)
      throw invalid(`${this.name} is a translation model: ${call} takes a language model (decoder-only: Gemma 3, ` +
                    "Llama, Qwen); translate with it");
    return handle;
  }

  /**
   * Continues a prompt with a language model: text (a string: encoded with the model's
   * tokenizer, its BOS included) or token ids (used verbatim). Returns {text, ids,
   * endedOnEos, endedOnStop, promptTokens, reusedTokens, timings} (ids prompts: no text or
   * endedOnStop). Synchronous; see generate().
   */
  generateDetailedSync(prompt, options) {
    const handle = this._languageModel("generate");
    const p = checkPrompt(prompt);
    const o = this._checkGenerateOptions(options, "generate");
    return this._petrel._run((core) => runGeneration(this._petrel, core, handle, 0, p, o));
  }

  /** generateDetailedSync's text (a text prompt) or ids (an ids prompt). */
  generateSync(prompt, options) {
    const detailed = this.generateDetailedSync(prompt, options);
    return typeof prompt === "string" ? detailed.text : detailed.ids;
  }

  /**
   * Continues a prompt (string -> Promise<string>; token ids -> Promise<number[]>).
   * Options: maxNewTokens, doSample, temperature, topK, topP, minP, repetitionPenalty
   * (unset: the model's generation_config.json), seed (the same seed gives the same tokens
   * on every CPU), stop (strings: the output ends before the first), grammar (GBNF),
   * jsonSchema, kvCache ("f32" | "f16" | "int8"), ignoreEos, onToken({text, delta, ids,
   * final, piece}) after each token (return false to stop), lookupNgram and maxDraftTokens
   * (speculative decoding: drafts from prompt lookup, at most 8, or setDraftModel's model,
   * checked by one forward; the same tokens, faster where they are right; the counts are in
   * generateDetailed's timings). The work runs synchronously
   * inside the call; the Promise only unifies the API with PetrelWorker.
   */
  async generate(prompt, options) {
    return this.generateSync(prompt, options);
  }

  async generateDetailed(prompt, options) {
    return this.generateDetailedSync(prompt, options);
  }

  /**
   * Starts a conversation through the model's chat template: options.system (a system
   * message), options.templateFlags ({enable_thinking: false}: booleans the template reads).
   */
  chatSync(options) {
    const handle = this._languageModel("chat");
    const o = checkKeys(options, ["system", "templateFlags"], "chat options");
    if (o.system !== undefined && o.system !== null && typeof o.system !== "string") throw invalid("system must be a string");
    if (o.system) checkString(o.system, "system");
    const [names, values] = checkTemplateFlags(o.templateFlags);
    const chat = this._petrel._run((core) => {
      const { block, strings, arrays } = marshal(core, [o.system || "", ...names], [new Int32Array(names.length), Int32Array.from(values)]);
      try {
        for (let i = 0; i < names.length; ++i) core.HEAP32[(arrays[0] >>> 2) + i] = strings[1 + i];
        const created = core._pjs_chat_create(handle, strings[0], arrays[0], arrays[1], names.length) >>> 0;
        if (!created) throw this._petrel._engineError();
        return created;
      } finally {
        core._free(block);
      }
    });
    const conversation = new PetrelConversation(this, chat);
    this._chats.add(conversation);
    return conversation;
  }

  async chat(options) {
    return this.chatSync(options);
  }

  /**
   * The model's chat template applied to messages ([{role, content}]) as transformers'
   * apply_chat_template(tokenize=False) renders it; options.addGenerationPrompt (default
   * true) opens the assistant's turn, options.templateFlags as chat's.
   */
  applyChatTemplate(messages, options) {
    const handle = this._languageModel("applyChatTemplate");
    if (!Array.isArray(messages)) throw invalid("messages must be an array of {role, content}");
    messages.forEach((m, i) => {
      if (m === null || typeof m !== "object") throw invalid(`messages[${i}] must be an object {role, content}`);
      for (const key of ["role", "content"]) {
        if (typeof m[key] !== "string") throw invalid(`messages[${i}].${key} must be a string, got ${shown(m[key])}`);
        checkString(m[key], `messages[${i}].${key}`);
      }
    });
    const o = checkKeys(options, ["addGenerationPrompt", "templateFlags"], "applyChatTemplate options");
    const add = booleanOption(o, "addGenerationPrompt");
    const [names, values] = checkTemplateFlags(o.templateFlags);
    return this._petrel._run((core) => {
      const strings = [...messages.map((m) => m.role), ...messages.map((m) => m.content), ...names];
      const n = messages.length;
      const { block, strings: at, arrays } = marshal(core, strings, [new Int32Array(n), new Int32Array(n),
                                                                       new Int32Array(names.length), Int32Array.from(values)]);
      try {
        for (let i = 0; i < n; ++i) {
          core.HEAP32[(arrays[0] >>> 2) + i] = at[i];
          core.HEAP32[(arrays[1] >>> 2) + i] = at[n + i];
        }
        for (let i = 0; i < names.length; ++i) core.HEAP32[(arrays[2] >>> 2) + i] = at[2 * n + i];
        const text = core._pjs_apply_chat_template(handle, arrays[0], arrays[1], n, add === false ? 0 : 1, arrays[2],
                                                   arrays[3], names.length);
        if (!text) throw this._petrel._engineError();
        return core.UTF8ToString(text);
      } finally {
        core._free(block);
      }
    });
  }

  /** The text of token ids (special tokens left out), by the model's tokenizer. */
  detokenize(ids) {
    const handle = this._live();
    if (!isIdList(ids)) throw invalid(`detokenize takes token ids (an array or typed array of integers), got ${shown(ids)}`);
    const list = tokenIds(ids, "token");
    return this._petrel._run((core) => {
      const { block, arrays } = marshal(core, [], [list]);
      try {
        const text = core._pjs_detokenize(handle, arrays[0], list.length);
        if (!text) throw this._petrel._engineError();
        return core.UTF8ToString(text);
      } finally {
        core._free(block);
      }
    });
  }

  /**
   * Keeps the KV state after each prompt in at most `bytes` (0, the default: none); a
   * later prompt runs only the tokens after the longest beginning it shares with a kept
   * one (reusedTokens says how many it did not run). The outputs are those without it.
   */
  setPromptCacheBytes(bytes) {
    const handle = this._languageModel("setPromptCacheBytes");
    if (!Number.isSafeInteger(bytes) || bytes < 0 || bytes > 2 ** 31)
      throw invalid(`setPromptCacheBytes: bytes must be an integer from 0 to 2^31, got ${shown(bytes)}`);
    this._petrel._run((core) => {
      if (!core._pjs_set_prompt_cache_bytes(handle, bytes)) throw this._petrel._engineError();
    });
  }

  /** The prompt cache's {budget, bytes, entries}. */
  promptCacheStats() {
    const handle = this._languageModel("promptCacheStats");
    return this._petrel._run((core) => {
      const json = core._pjs_prompt_cache_stats(handle);
      if (!json) throw this._petrel._engineError();
      return JSON.parse(core.UTF8ToString(json));
    });
  }

  /**
   * The state after the last call's prompt (the prompt cache must hold it: a budget set
   * before the call) as bytes: a file bound to this model file and KV cache type, which
   * loadPromptCacheSync takes (here, in a fresh model of the same file, or natively:
   * petrel-run --prompt-cache).
   */
  savePromptCacheSync() {
    const handle = this._languageModel("savePromptCache");
    return this._petrel._run((core) => {
      const { block, strings } = marshal(core, [PROMPT_CACHE_FILE]);
      try {
        if (!core._pjs_save_prompt_cache(handle, strings[0]))
          throw promptCacheError(this._petrel._engineError(), "savePromptCache");
        try {
          return core.FS.readFile(PROMPT_CACHE_FILE);
        } catch (e) {
          throw fsError(e, "savePromptCache");
        }
      } finally {
        core._free(block);
        try { core.FS.unlink(PROMPT_CACHE_FILE); } catch { /* not written */ }
      }
    });
  }

  /**
   * Loads a prompt cache's bytes (savePromptCacheSync's, or a file petrel-run
   * --prompt-cache wrote), verified whole: an error names the field. Its prompt is then
   * reused by prompts beginning with its tokens. options.name names it in messages.
   */
  loadPromptCacheSync(bytes, options) {
    const handle = this._languageModel("loadPromptCache");
    const data = asBytes(bytes);
    if (!data) throw invalid("loadPromptCacheSync takes the bytes of a prompt cache (an ArrayBuffer or a typed array)");
    const o = checkKeys(options, ["name"], "loadPromptCache options");
    if (o.name !== undefined && typeof o.name !== "string") throw invalid("name must be a string");
    const name = o.name || "<prompt cache>";
    this._petrel._run((core) => {
      try {
        core.FS.writeFile(PROMPT_CACHE_FILE, data);
      } catch (e) {
        throw fsError(e, `${name}: cannot hold the prompt cache in memory`);
      }
      const { block, strings } = marshal(core, [PROMPT_CACHE_FILE]);
      try {
        if (!core._pjs_load_prompt_cache(handle, strings[0])) throw promptCacheError(this._petrel._engineError(), name);
      } finally {
        core._free(block);
        try { core.FS.unlink(PROMPT_CACHE_FILE); } catch { /* gone */ }
      }
    });
  }

  /** savePromptCacheSync's bytes; in Node, given a path, written to that file (atomically) instead. */
  async savePromptCache(path) {
    const bytes = this.savePromptCacheSync();
    if (path === undefined || path === null) return bytes;
    if (!IS_NODE || (typeof path !== "string" && !(path instanceof URL)))
      throw invalid("savePromptCache(path) writes a file in Node (a path or file: URL); elsewhere call it without one for the bytes");
    const fs = await import("node:fs/promises");
    const target = path instanceof URL ? (await import("node:url")).fileURLToPath(path) : path;
    const temporary = `${target}.tmp`;
    try {
      await fs.writeFile(temporary, bytes);
      await fs.rename(temporary, target);
    } catch (e) {
      await fs.unlink(temporary).catch(() => {});
      throw new PetrelError(`cannot write ${path}: ${e.message}`, "PETREL_IO");
    }
    return undefined;
  }

  /** loadPromptCacheSync's; in Node also a path or file: URL (named in messages by it). */
  async loadPromptCache(source, options) {
    if (asBytes(source)) return this.loadPromptCacheSync(source, options);
    if (!IS_NODE || (typeof source !== "string" && !(source instanceof URL)))
      throw invalid("loadPromptCache takes bytes (an ArrayBuffer or a typed array), or in Node a path or file: URL");
    const fs = await import("node:fs/promises");
    let bytes;
    try {
      bytes = await fs.readFile(source);
    } catch (e) {
      throw new PetrelError(`cannot read ${source}: ${e.message}`, "PETREL_IO");
    }
    const name = source instanceof URL ? (await import("node:url")).fileURLToPath(source) : source;
    return this.loadPromptCacheSync(bytes, { name, ...(options || {}) });
  }

  /** Releases the model's memory (and its conversations'); using it afterwards throws. Freeing twice is allowed. */
  free() {
    if (!this._handle) return;
    if (this._petrel._busy) throw invalid("cannot free a model while a translation or generation is running");
    for (const chat of this._chats) chat._handle = 0;  // the engine frees them with the model
    this._chats.clear();
    this._petrel._core._pjs_model_free(this._handle);
    this._handle = 0;
    this._petrel._models.delete(this);
  }
}

/**
 * A conversation with a language model (model.chat()): each reply renders the whole
 * conversation with the model's chat template but runs only the tokens after what its
 * KV cache already holds, so a turn costs its own tokens. Freed with free() or with its model.
 */
export class PetrelConversation {
  constructor(model, handle) {
    this._model = model;
    this._handle = handle;
  }

  get freed() { return this._handle === 0; }

  _live() {
    if (!this._handle) throw invalid("the conversation has been freed");
    return this._handle;
  }

  /** The messages so far: [{role, content}] (the system message first, if any). */
  messages() {
    const handle = this._live();
    return this._model._petrel._run((core) => {
      const json = core._pjs_chat_messages(handle);
      if (!json) throw this._model._petrel._engineError();
      return JSON.parse(core.UTF8ToString(json));
    });
  }

  /**
   * Adds the user's message, generates the reply and adds it; {text, ids, endedOnEos,
   * endedOnStop, promptTokens (the whole conversation's), reusedTokens, timings}. The
   * options are generate()'s. On an error the conversation is as it was.
   */
  replyDetailedSync(message, options) {
    const handle = this._live();
    if (typeof message !== "string") throw invalid(`the message must be a string, got ${shown(message)}`);
    checkString(message, "the message");
    const model = this._model;
    const o = model._checkGenerateOptions(options, "reply");
    return model._petrel._run((core) => runGeneration(model._petrel, core, model._live(), handle, { text: message, ids: null }, o));
  }

  replySync(message, options) {
    return this.replyDetailedSync(message, options).text;
  }

  /** The reply's text (Promise); see replyDetailedSync. */
  async reply(message, options) {
    return this.replySync(message, options);
  }

  async replyDetailed(message, options) {
    return this.replyDetailedSync(message, options);
  }

  /**
   * For a conversation grown to the model's positions: drops the oldest exchanges (the
   * system message stays) until `message` and a reply of `newTokens` tokens fit, as
   * petrel-run --chat does before each turn; returns how many it dropped.
   */
  makeRoom(message, newTokens) {
    const handle = this._live();
    if (typeof message !== "string") throw invalid(`the message must be a string, got ${shown(message)}`);
    checkString(message, "the message");
    positiveInt(newTokens, "newTokens", 1);
    return this._model._petrel._run((core) => {
      const { block, strings } = marshal(core, [message]);
      try {
        const dropped = core._pjs_chat_make_room(handle, strings[0], newTokens);
        if (dropped < 0) throw this._model._petrel._engineError();
        return dropped;
      } finally {
        core._free(block);
      }
    });
  }

  /** Releases the conversation's KV cache; freeing twice is allowed. */
  free() {
    if (!this._handle) return;
    if (this._model._petrel._busy) throw invalid("cannot free a conversation while a call is running");
    if (!this._model.freed) this._model._petrel._core._pjs_chat_free(this._handle);
    this._handle = 0;
    this._model._chats.delete(this);
  }
}

export default loadPetrel;
