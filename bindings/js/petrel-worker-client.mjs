// Petrel in a Worker, driven from a page (or Node): the same API as petrel.mjs, every
// call asynchronous, the UI thread never blocked by a translation or a generation.
//
//   import { PetrelWorker } from "./petrel-worker-client.mjs";
//   const w = await PetrelWorker.create();          // starts petrel-worker.mjs (module worker)
//   await w.loadModel("models/en-de.petrel");       // URL, ArrayBuffer or typed array
//   w.info;                                         // the model's info
//   await w.translate("Open the file", { onToken: (e) => show(e.text) });
//   const lm = await w.loadModel("models/gemma-3-270m.petrel");
//   const chat = await lm.chat({ system: "Answer briefly." });
//   await chat.reply("Hello!", { onToken: (e) => show(e.delta) });
//   w.terminate();
//
// Requests wait in the worker's queue: the highest `priority` first (visible text before
// the rest), equal priorities in call order. A request may name its page
// (`innerWindowId`, as Firefox's translations engine does); discardTranslations(id) throws
// that page's queued work away, and an AbortSignal (`signal`) cancels one request. A
// cancelled call rejects with an Error named "AbortError" (code "PETREL_CANCELLED").
const IS_NODE =
  typeof process === "object" && process !== null && typeof process.versions === "object" &&
  typeof process.versions.node === "string" && typeof window === "undefined" &&
  typeof WorkerGlobalScope === "undefined";

function toError(e) {
  const error = new Error(e.message);
  error.name = "PetrelError";
  error.code = e.code;
  return error;
}

function invalid(message) {
  const e = new Error(message);
  e.name = "PetrelError";
  e.code = "PETREL_INVALID_ARGUMENT";
  return e;
}

/** The error a discarded or aborted request rejects with: name "AbortError", code "PETREL_CANCELLED". */
export function cancelledError(message) {
  const e = new Error(message);
  e.name = "AbortError";
  e.code = "PETREL_CANCELLED";
  return e;
}

// A page's key (Firefox's innerWindowId): compared with === on both sides of the worker.
const isKey = (key) => typeof key === "string" || (typeof key === "number" && !Number.isNaN(key));

// The calls a page's key groups (discardTranslations cancels them).
const KEYED_OPS = new Set(["translate", "generate", "reply"]);

// Slots through which a running generation is stopped (petrel-worker.mjs): shared memory,
// where there is any (Node; a page only when cross-origin isolated), else null.
const STOP_SLOTS = 256;
function sharedStops() {
  if (typeof SharedArrayBuffer !== "function" || typeof Atomics !== "object") return null;
  if (typeof crossOriginIsolated === "boolean" && !crossOriginIsolated && !IS_NODE) return null;
  try {
    return new Int32Array(new SharedArrayBuffer(4 * STOP_SLOTS));
  } catch {
    return null;
  }
}

// The options of a call the worker queues (onToken, priority, innerWindowId, signal), checked
// and taken out of `options`; `rest` goes to the engine.
function callOptions(options) {
  if (options === undefined || options === null) options = {};
  if (typeof options !== "object") options = { invalid: options };
  const { onToken, priority, innerWindowId, signal, ...rest } = options;
  if (onToken !== undefined && onToken !== null && typeof onToken !== "function") throw invalid("onToken must be a function");
  if (priority !== undefined && (typeof priority !== "number" || !Number.isFinite(priority)))
    throw invalid("priority must be a finite number");
  if (innerWindowId !== undefined && innerWindowId !== null && !isKey(innerWindowId))
    throw invalid("innerWindowId must be a number or a string");
  if (signal !== undefined && signal !== null &&
      (typeof signal !== "object" || typeof signal.addEventListener !== "function" || !("aborted" in signal)))
    throw invalid("signal must be an AbortSignal");
  return { onToken: onToken || null, priority, innerWindowId, signal: signal || null, rest };
}

// Adds a queued call's priority and key to its message.
function queued(message, { priority, innerWindowId }) {
  if (priority !== undefined) message.priority = priority;
  if (innerWindowId !== undefined && innerWindowId !== null) message.key = innerWindowId;
  return message;
}

/** A model loaded in a PetrelWorker. */
export class PetrelWorkerModel {
  constructor(worker, handle, reply) {
    this._worker = worker;
    this._handle = handle;
    this.info = reply.info;
    this.name = reply.name;
    this.isa = reply.isa;
    this.threads = reply.threads;
    this.loadMs = reply.loadMs;
    this._chats = new Set();
  }
  get freed() { return this._handle === 0; }
  _live() {
    if (!this._handle) throw invalid(`model ${this.name} has been freed`);
    return this._handle;
  }
  /**
   * translate() with the details (see PetrelModel.translateDetailed). Besides the engine's
   * options: priority (a number, default 0: higher runs first), innerWindowId (a number or
   * string naming the page, for discardTranslations), signal (an AbortSignal), and
   * secondModel (a PetrelWorkerModel of the same worker: source -> pivot -> target).
   */
  async translateDetailed(texts, options = {}) {
    const handle = this._live();
    const call = callOptions(options);
    const { secondModel, ...rest } = call.rest;
    const message = queued({ op: "translate", model: handle, texts, options: rest, stream: !!call.onToken }, call);
    if (secondModel !== undefined && secondModel !== null) {
      if (!(secondModel instanceof PetrelWorkerModel)) throw invalid("secondModel must be a PetrelWorkerModel (the pivot -> target model)");
      if (secondModel._worker !== this._worker) throw invalid("secondModel belongs to another PetrelWorker: both models of a pivot must be in one worker");
      message.second = secondModel._live();
    }
    return this._worker._call(message, call.onToken, undefined, call.signal);
  }
  async translate(texts, options) {
    const detailed = await this.translateDetailed(texts, options);
    return Array.isArray(detailed) ? detailed.map((d) => d.text) : detailed.text;
  }
  async tokenize(text, sourceLanguage) {
    return this._worker._call({ op: "tokenize", model: this._live(), text, sourceLanguage });
  }
  /** Speculative decoding's draft model (see PetrelModel.setDraftModel): a PetrelWorkerModel of this worker, or null. */
  async setDraftModel(draft) {
    const handle = this._live();
    if (draft !== null && draft !== undefined) {
      if (!(draft instanceof PetrelWorkerModel)) throw invalid("setDraftModel takes a PetrelWorkerModel or null");
      if (draft._worker !== this._worker) throw invalid("the draft model belongs to another PetrelWorker: load both in one worker");
    }
    await this._worker._call({ op: "setDraftModel", model: handle, draft: draft ? draft._live() : 0 });
  }
  /** The last translation's speculative decoding counts (see PetrelModel.lastTranslateSpeculation). */
  async lastTranslateSpeculation() {
    return this._worker._call({ op: "translateSpeculation", model: this._live() });
  }

  /**
   * A language model's generation (see PetrelModel.generateDetailed), in the worker. Besides
   * the engine's options: priority, innerWindowId and signal as translate's. onToken's
   * events arrive as messages; returning false stops the generation, and so does the
   * signal, where the worker can be reached while it runs (shared memory: Node, a
   * cross-origin isolated page): it ends a token or a few later. Elsewhere the worker
   * finishes the generation (maxNewTokens bounds it) and the result is dropped.
   */
  async generateDetailed(prompt, options = {}) {
    const handle = this._live();
    const call = callOptions(options);
    const message = queued({ op: "generate", model: handle, prompt, options: call.rest, stream: !!call.onToken,
                             stoppable: !!(call.onToken || call.signal) }, call);
    return this._worker._call(message, call.onToken, undefined, call.signal);
  }
  /** The text of a text prompt, the ids of an ids prompt. */
  async generate(prompt, options) {
    const detailed = await this.generateDetailed(prompt, options);
    return typeof prompt === "string" ? detailed.text : detailed.ids;
  }
  /** A conversation in the worker (see PetrelModel.chat): {system, templateFlags}. */
  async chat(options) {
    const reply = await this._worker._call({ op: "chat", model: this._live(), options });
    const chat = new PetrelWorkerConversation(this, reply.chat);
    this._chats.add(chat);
    return chat;
  }
  async applyChatTemplate(messages, options) {
    return this._worker._call({ op: "applyChatTemplate", model: this._live(), messages, options });
  }
  async detokenize(ids) {
    return this._worker._call({ op: "detokenize", model: this._live(), ids });
  }
  async setPromptCacheBytes(bytes) {
    await this._worker._call({ op: "promptCache", action: "setBytes", model: this._live(), bytes });
  }
  async promptCacheStats() {
    return this._worker._call({ op: "promptCache", action: "stats", model: this._live() });
  }
  /** The prompt cache's bytes; in Node, given a path, the worker writes that file instead. */
  async savePromptCache(path) {
    return this._worker._call({ op: "promptCache", action: "save", model: this._live(), path: path instanceof URL ? path.href : path });
  }
  /** Bytes (copied to the worker), or in Node a path. */
  async loadPromptCache(source, options) {
    return this._worker._call({ op: "promptCache", action: "load", model: this._live(), source, options });
  }

  async free() {
    if (!this._handle) return;
    const handle = this._handle;
    this._handle = 0;
    for (const chat of this._chats) chat._handle = 0;  // the worker frees them with the model
    this._chats.clear();
    if (this._worker.model === this) this._worker.model = null;
    await this._worker._call({ op: "free", model: handle });
  }
}

/** A conversation held in a PetrelWorker (PetrelWorkerModel.chat). */
export class PetrelWorkerConversation {
  constructor(model, handle) {
    this._model = model;
    this._handle = handle;
  }
  get freed() { return this._handle === 0; }
  _live() {
    if (!this._handle) throw invalid("the conversation has been freed");
    return this._handle;
  }
  /** The reply with its details (see PetrelConversation.replyDetailed); options as generateDetailed's. */
  async replyDetailed(message, options = {}) {
    const handle = this._live();
    const call = callOptions(options);
    const request = queued({ op: "reply", chat: handle, message, options: call.rest, stream: !!call.onToken,
                             stoppable: !!(call.onToken || call.signal) }, call);
    return this._model._worker._call(request, call.onToken, undefined, call.signal);
  }
  async reply(message, options) {
    return (await this.replyDetailed(message, options)).text;
  }
  async messages() {
    return this._model._worker._call({ op: "messages", chat: this._live() });
  }
  async makeRoom(message, newTokens) {
    return this._model._worker._call({ op: "makeRoom", chat: this._live(), message, newTokens });
  }
  async free() {
    if (!this._handle) return;
    const handle = this._handle;
    this._handle = 0;
    this._model._chats.delete(this);
    await this._model._worker._call({ op: "chatFree", chat: handle });
  }
}

/** The engine in a Worker. Create with `await PetrelWorker.create(options)`. */
export class PetrelWorker {
  /**
   * options.workerUrl: petrel-worker.mjs's URL (default: next to this file);
   * wasmUrl / wasmBinary / threads: passed to loadPetrel inside the worker.
   */
  static async create(options = {}) {
    const w = new PetrelWorker(options);
    await w.ready;
    return w;
  }

  constructor(options = {}) {
    const { workerUrl, ...petrelOptions } = options;
    this._pending = new Map();  // id -> {resolve, reject, onToken, key, cleanup}
    this._next = 1;
    this._dead = null;
    this._outbox = null;  // the messages of this turn, posted together (flushOutbox)
    this._stops = sharedStops();
    /** The model loaded last (what translate() uses). */
    this.model = null;
    const url = workerUrl || new URL("./petrel-worker.mjs", import.meta.url);
    const started = IS_NODE ? this._startNode(url) : this._startWeb(url);
    this.ready = started
      .then(() => this._call({ op: "init", options: petrelOptions, stops: this._stops }))
      .then((reply) => {
        this.version = reply.version;
        this.timings = reply.timings;
        /** The threads each model computes with, and whether the threaded build runs (loadPetrel's). */
        this.threads = reply.threads;
        this.threaded = reply.threaded;
        return this;
      });
  }

  _startWeb(url) {
    this._worker = new Worker(url, { type: "module" });
    this._post = (m, transfer) => this._worker.postMessage(m, transfer || []);
    return new Promise((resolve, reject) => {
      this._worker.addEventListener("message", (e) => {
        if (e.data && e.data.ready) resolve();
        else this._receive(e.data);
      });
      this._worker.addEventListener("error", (e) => {
        const error = new Error(`Petrel worker failed: ${e.message || "could not start " + url}`);
        this._fail(error);
        reject(error);
      });
    });
  }

  async _startNode(url) {
    const { Worker } = await import("node:worker_threads");
    this._worker = new Worker(url);
    this._post = (m, transfer) => this._worker.postMessage(m, transfer || []);
    return new Promise((resolve, reject) => {
      this._worker.on("message", (m) => {
        if (m && m.ready) resolve();
        else this._receive(m);
      });
      this._worker.on("error", (e) => { this._fail(e); reject(e); });
      this._worker.on("exit", (code) => {
        const e = new Error(`Petrel worker exited (${code})`);
        this._fail(e);
        reject(e);
      });
    });
  }

  _fail(error) {
    if (!this._dead) this._dead = error;
    const pending = [...this._pending.values()];
    this._pending.clear();
    for (const p of pending) this._settle(p).reject(error);
  }

  // Removes p's abort listener; returns p.
  _settle(p) {
    if (p.cleanup) p.cleanup();
    return p;
  }

  _receive(m) {
    const p = this._pending.get(m.id);
    if (!p) return;
    if (m.token !== undefined) {
      // Notification only: the worker translates on without waiting, so the return value
      // cannot stop it; the first exception is kept, later events are not delivered, and the
      // call rejects with it once the translation has finished.
      if (p.onToken && !p.callbackError) {
        try {
          if (p.onToken(m.token) === false && p.stoppable) this._stop(m.id);
        } catch (e) {
          p.callbackError = { error: e };
          if (p.stoppable) this._stop(m.id);
        }
      }
      return;
    }
    this._pending.delete(m.id);
    this._settle(p);
    if (m.error) p.reject(toError(m.error));
    else if (p.callbackError) p.reject(p.callbackError.error);
    else p.resolve(m.result);
  }

  // Queues `message` for the worker. Every message of one turn of the caller's event loop
  // goes in one postMessage (flushOutbox, a microtask later): the worker receives a page's
  // burst of requests (and a discard made in the same turn) at once, and orders it whole.
  _send(message, transfer) {
    if (!this._outbox) {
      this._outbox = [];
      queueMicrotask(() => this._flushOutbox());
    }
    this._outbox.push({ message, transfer: transfer || [] });
  }

  _flushOutbox() {
    const entries = this._outbox;
    this._outbox = null;
    if (this._dead) return;
    const messages = entries.map((e) => e.message);
    try {
      this._post(messages.length === 1 ? messages[0] : { batch: messages }, entries.flatMap((e) => e.transfer));
    } catch {
      // Something in the batch cannot be cloned (nothing was sent): post them one by one,
      // failing only those.
      for (const { message: m, transfer } of entries) {
        try {
          this._post(m, transfer);
        } catch (e) {
          const p = this._pending.get(m.id);
          if (!p) continue;
          this._pending.delete(m.id);
          this._settle(p).reject(e);
        }
      }
    }
  }

  // Asks the worker to stop the generation `id` if it is running (see sharedStops).
  _stop(id) {
    if (this._stops) Atomics.store(this._stops, id % this._stops.length, id);
  }

  _call(message, onToken, transfer, signal = null) {
    if (this._dead) return Promise.reject(this._dead);
    if (signal && signal.aborted) return Promise.reject(signal.reason !== undefined ? signal.reason : cancelledError("aborted"));
    const id = this._next++;
    return new Promise((resolve, reject) => {
      // Only a translation or a generation belongs to a page (a pending discard of that page does not).
      const p = { resolve, reject, onToken, key: KEYED_OPS.has(message.op) ? message.key : undefined,
                  stoppable: !!message.stoppable };
      if (signal) {
        // As fetch(): the call rejects with the signal's reason (an "AbortError" DOMException
        // unless the caller gave one); the worker drops the request if it has not run yet.
        const abort = () => {
          if (this._pending.get(id) !== p) return;
          this._pending.delete(id);
          if (p.stoppable) this._stop(id);
          this._settle(p).reject(signal.reason !== undefined ? signal.reason : cancelledError("aborted"));
          if (!this._dead) this._send({ op: "discard", ids: [id], id: this._next++ });
        };
        signal.addEventListener("abort", abort, { once: true });
        p.cleanup = () => signal.removeEventListener("abort", abort);
      }
      this._pending.set(id, p);
      this._send({ ...message, id }, transfer);
    });
  }

  /**
   * Throws away the requests of the page `innerWindowId` (Firefox's discardTranslations):
   * every call of that key not yet answered rejects at once with an "AbortError"
   * (code "PETREL_CANCELLED"). The worker drops those still queued; the one it is running
   * cannot be interrupted (WebAssembly translates synchronously; a generation stops where
   * shared memory reaches the worker) and its result is dropped. Generations and replies
   * given an innerWindowId belong to it as translations do.
   * Resolves, once the worker has dropped them, to {cancelled: the calls rejected,
   * skipped: the requests the worker dropped before running them}.
   */
  async discardTranslations(innerWindowId) {
    if (!isKey(innerWindowId)) throw invalid("innerWindowId must be a number or a string");
    let cancelled = 0;
    for (const [id, p] of [...this._pending]) {
      if (p.key !== innerWindowId) continue;
      this._pending.delete(id);
      if (p.stoppable) this._stop(id);
      this._settle(p).reject(cancelledError(`translation discarded: discardTranslations(${JSON.stringify(innerWindowId)})`));
      ++cancelled;
    }
    const skipped = await this._call({ op: "discard", key: innerWindowId });
    return { cancelled, skipped };
  }

  /**
   * Loads a model in the worker: a URL (string, resolved against the page), a URL
   * object, a Node file path, an ArrayBuffer or a typed array (copied, or moved with
   * options.transfer = true). Returns a PetrelWorkerModel; it also becomes this.model.
   */
  async loadModel(source, options = {}) {
    await this.ready;
    const { transfer, ...rest } = options || {};
    let payload = source;
    const list = [];
    if (typeof source === "string" && !IS_NODE && typeof location !== "undefined") payload = new URL(source, location.href).href;
    else if (source instanceof URL) payload = source.href;
    else if (typeof Response !== "undefined" && source instanceof Response) payload = new Uint8Array(await source.arrayBuffer());
    if (transfer && (payload instanceof ArrayBuffer || ArrayBuffer.isView(payload)))
      list.push(payload instanceof ArrayBuffer ? payload : payload.buffer);
    const reply = await this._call({ op: "load", source: payload, options: rest }, null, list);
    const model = new PetrelWorkerModel(this, reply.model, reply);
    this.model = model;
    return model;
  }

  _current() {
    if (!this.model) {
      const e = new Error("no model loaded: call loadModel first");
      e.name = "PetrelError";
      e.code = "PETREL_INVALID_ARGUMENT";
      throw e;
    }
    return this.model;
  }

  /** The last loaded model's info (null before loadModel). */
  get info() { return this.model ? this.model.info : null; }

  /** Translates with the last loaded model: see PetrelWorkerModel.translateDetailed for the options. */
  async translate(texts, options) { return this._current().translate(texts, options); }
  async translateDetailed(texts, options) { return this._current().translateDetailed(texts, options); }

  /** Generates with the last loaded model (a language model): see PetrelWorkerModel.generateDetailed. */
  async generate(prompt, options) { return this._current().generate(prompt, options); }
  async generateDetailed(prompt, options) { return this._current().generateDetailed(prompt, options); }
  /** A conversation with the last loaded model. */
  async chat(options) { return this._current().chat(options); }

  /** Stops the worker; pending calls fail. */
  terminate() {
    this._fail(new Error("the Petrel worker was terminated"));
    if (this._worker) this._worker.terminate();
  }
}

export default PetrelWorker;
