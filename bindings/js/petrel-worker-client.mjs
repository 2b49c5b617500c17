// Petrel in a Worker, driven from a page (or Node): the same API as petrel.mjs, every
// call asynchronous, the UI thread never blocked by a translation.
//
//   import { PetrelWorker } from "./petrel-worker-client.mjs";
//   const w = await PetrelWorker.create();          // starts petrel-worker.mjs (module worker)
//   await w.loadModel("models/en-de.petrel");       // URL, ArrayBuffer or typed array
//   w.info;                                         // the model's info
//   await w.translate("Open the file", { onToken: (e) => show(e.text) });
//   w.terminate();
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

/** A model loaded in a PetrelWorker. */
export class PetrelWorkerModel {
  constructor(worker, handle, reply) {
    this._worker = worker;
    this._handle = handle;
    this.info = reply.info;
    this.name = reply.name;
    this.isa = reply.isa;
    this.loadMs = reply.loadMs;
  }
  get freed() { return this._handle === 0; }
  _live() {
    if (!this._handle) {
      const e = new Error(`model ${this.name} has been freed`);
      e.name = "PetrelError";
      e.code = "PETREL_INVALID_ARGUMENT";
      throw e;
    }
    return this._handle;
  }
  async translateDetailed(texts, options = {}) {
    const handle = this._live();
    if (options === null || typeof options !== "object") options = { invalid: options };
    const { onToken, ...rest } = options;
    if (onToken !== undefined && onToken !== null && typeof onToken !== "function") {
      const e = new Error("onToken must be a function");
      e.name = "PetrelError";
      e.code = "PETREL_INVALID_ARGUMENT";
      throw e;
    }
    return this._worker._call({ op: "translate", model: handle, texts, options: rest, stream: !!onToken }, onToken);
  }
  async translate(texts, options) {
    const detailed = await this.translateDetailed(texts, options);
    return Array.isArray(detailed) ? detailed.map((d) => d.text) : detailed.text;
  }
  async tokenize(text, sourceLanguage) {
    return this._worker._call({ op: "tokenize", model: this._live(), text, sourceLanguage });
  }
  async free() {
    if (!this._handle) return;
    const handle = this._handle;
    this._handle = 0;
    if (this._worker.model === this) this._worker.model = null;
    await this._worker._call({ op: "free", model: handle });
  }
}

/** The engine in a Worker. Create with `await PetrelWorker.create(options)`. */
export class PetrelWorker {
  /**
   * options.workerUrl: petrel-worker.mjs's URL (default: next to this file);
   * wasmUrl / wasmBinary: passed to loadPetrel inside the worker.
   */
  static async create(options = {}) {
    const w = new PetrelWorker(options);
    await w.ready;
    return w;
  }

  constructor(options = {}) {
    const { workerUrl, ...petrelOptions } = options;
    this._pending = new Map();
    this._next = 1;
    this._dead = null;
    /** The model loaded last (what translate() uses). */
    this.model = null;
    const url = workerUrl || new URL("./petrel-worker.mjs", import.meta.url);
    const started = IS_NODE ? this._startNode(url) : this._startWeb(url);
    this.ready = started
      .then(() => this._call({ op: "init", options: petrelOptions }))
      .then((reply) => {
        this.version = reply.version;
        this.timings = reply.timings;
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
    for (const p of this._pending.values()) p.reject(error);
    this._pending.clear();
  }

  _receive(m) {
    const p = this._pending.get(m.id);
    if (!p) return;
    if (m.token !== undefined) {
      // Notification only: the worker translates on without waiting, so the return value
      // cannot stop it; the first exception is kept, later events are not delivered, and the
      // call rejects with it once the translation has finished.
      if (p.onToken && !p.callbackError) {
        try { p.onToken(m.token); } catch (e) { p.callbackError = { error: e }; }
      }
      return;
    }
    this._pending.delete(m.id);
    if (m.error) p.reject(toError(m.error));
    else if (p.callbackError) p.reject(p.callbackError.error);
    else p.resolve(m.result);
  }

  _call(message, onToken, transfer) {
    if (this._dead) return Promise.reject(this._dead);
    const id = this._next++;
    return new Promise((resolve, reject) => {
      this._pending.set(id, { resolve, reject, onToken });
      try {
        this._post({ ...message, id }, transfer);
      } catch (e) {
        this._pending.delete(id);
        reject(e);
      }
    });
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

  /** Translates with the last loaded model: see PetrelModel.translate. */
  async translate(texts, options) { return this._current().translate(texts, options); }
  async translateDetailed(texts, options) { return this._current().translateDetailed(texts, options); }

  /** Stops the worker; pending calls fail. */
  terminate() {
    this._fail(new Error("the Petrel worker was terminated"));
    if (this._worker) this._worker.terminate();
  }
}

export default PetrelWorker;
