// Petrel inside a module Web Worker (or a Node worker_threads Worker): the engine runs
// here, so a page's UI thread never blocks. Start it with petrel-worker-client.mjs
// (PetrelWorker); the message protocol is that file's business:
//   request  {id, op, ...}      op: "init" | "load" | "translate" | "tokenize" | "free" |
//            language models: "generate" | "chat" | "reply" | "messages" | "makeRoom" |
//            "chatFree" | "applyChatTemplate" | "detokenize" | "promptCache"
//            translate, generate, reply: also key (a page's innerWindowId, a number or
//            string) and priority; generate, reply: stoppable (see below)
//   at once  {id, op: "discard", key | ids}: drop the queued requests of that key (or ids)
//   batch    {batch: [request, ...]}: the requests a page made in one turn, as one message
//   replies  {id, token: event} (streaming) ... then {id, result} or {id, error: {message, code}}
// init may carry `stops`, an Int32Array on a SharedArrayBuffer (where the page has one:
// Node, a cross-origin isolated page): the client writes a request's id into slot
// id % length to stop it, and a running generation (stoppable) reads it after each token:
// the only way to reach a call that runs synchronously.
//
// Requests wait in a queue and run one at a time: the highest priority first, equal
// priorities in arrival order (Firefox's translations engine likewise queues a page's texts
// and throws a page's queued work away when it goes: discardTranslations(innerWindowId)).
// A translation is synchronous and cannot be interrupted, so between two requests the
// worker yields to its message queue: a discard or a more urgent request that arrived
// meanwhile counts before the next request is picked.
import { loadPetrel } from "./petrel.mjs";

let port = null;
if (typeof self !== "undefined" && typeof self.postMessage === "function" && typeof WorkerGlobalScope !== "undefined") {
  port = { post: (m) => self.postMessage(m), listen: (f) => self.addEventListener("message", (e) => f(e.data)) };
} else {
  const { parentPort } = await import("node:worker_threads");
  if (!parentPort) throw new Error("petrel-worker.mjs runs inside a Worker (see petrel-worker-client.mjs)");
  port = { post: (m) => parentPort.postMessage(m), listen: (f) => parentPort.on("message", f) };
}

// Runs `f` after the messages already posted to this worker have been received: Node's
// setImmediate runs after the event loop's poll phase (where messages arrive); in a
// browser a MessageChannel message queues behind them (setTimeout would be clamped to 4 ms).
const yieldThen = (() => {
  if (typeof setImmediate === "function") return (f) => setImmediate(f);
  const channel = new MessageChannel();
  const waiting = [];
  channel.port1.onmessage = () => waiting.shift()();
  return (f) => { waiting.push(f); channel.port2.postMessage(null); };
})();

let petrel = null;
const models = new Map();  // handle -> PetrelModel
let nextModel = 1;
const chats = new Map();  // handle -> PetrelConversation
let nextChat = 1;
let stops = null;  // init's shared stop slots, or null

// Whether the client asked to stop request `id` (a running generation).
const stopRequested = (id) => stops !== null && Atomics.load(stops, id % stops.length) === id;

function errorReply(id, e) {
  port.post({ id, error: { message: e && e.message ? e.message : String(e), code: (e && e.code) || "PETREL_INTERNAL" } });
}

function modelOf(handle) {
  const model = models.get(handle);
  if (!model) {
    const e = new Error("no such model (freed, or never loaded)");
    e.code = "PETREL_INVALID_ARGUMENT";
    throw e;
  }
  return model;
}

function chatOf(handle) {
  const chat = chats.get(handle);
  if (!chat) {
    const e = new Error("no such conversation (freed, or never started)");
    e.code = "PETREL_INVALID_ARGUMENT";
    throw e;
  }
  return chat;
}

// A generation's options: streamed tokens go to the page, and a stoppable one ends at the
// first token after the page asked (the page's onToken returning false, or its signal).
function generationOptions(m) {
  const options = Object.assign({}, m.options || {});
  if (m.stream || (m.stoppable && stops !== null)) {
    options.onToken = (event) => {
      if (m.stream) port.post({ id: m.id, token: event });
      return !stopRequested(m.id);
    };
  }
  return options;
}

// --- The queue ---------------------------------------------------------------------------

// A binary heap of queued requests: the highest priority first, then the earliest.
class RequestHeap {
  constructor() { this.items = []; }
  get size() { return this.items.length; }
  static before(a, b) { return a.priority > b.priority || (a.priority === b.priority && a.seq < b.seq); }
  push(item) {
    const items = this.items;
    let i = items.length;
    items.push(item);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!RequestHeap.before(items[i], items[parent])) break;
      [items[i], items[parent]] = [items[parent], items[i]];
      i = parent;
    }
  }
  pop() {
    const items = this.items;
    const top = items[0];
    const last = items.pop();
    if (items.length > 0) {
      items[0] = last;
      for (let i = 0; ;) {
        const l = 2 * i + 1, r = l + 1;
        let best = i;
        if (l < items.length && RequestHeap.before(items[l], items[best])) best = l;
        if (r < items.length && RequestHeap.before(items[r], items[best])) best = r;
        if (best === i) break;
        [items[i], items[best]] = [items[best], items[i]];
        i = best;
      }
    }
    return top;
  }
}

// "init", "free" and "chatFree" keep their place: everything that arrived before one runs
// before it, everything after it runs after it (a model is not freed under a translation
// queued for it earlier). Between two of them requests run by priority.
const isBarrier = (m) => m.op === "init" || m.op === "free" || m.op === "chatFree";

class RequestQueue {
  constructor() {
    this.segments = [{ heap: new RequestHeap(), barrier: null }];
    this.seq = 0;
    this.byId = new Map();  // id -> queued item (to discard by id or key)
  }
  push(m) {
    if (isBarrier(m)) {
      this.segments[this.segments.length - 1].barrier = m;
      this.segments.push({ heap: new RequestHeap(), barrier: null });
      return;
    }
    const item = { priority: typeof m.priority === "number" ? m.priority : 0, seq: this.seq++, message: m };
    this.segments[this.segments.length - 1].heap.push(item);
    this.byId.set(m.id, item);
  }
  // The next request to run, or null. Discarded items are skipped here (lazy deletion).
  pop() {
    for (;;) {
      const front = this.segments[0];
      while (front.heap.size > 0) {
        const item = front.heap.pop();
        if (!item.message) continue;
        this.byId.delete(item.message.id);
        return item.message;
      }
      if (!front.barrier) return null;  // the last segment, empty
      this.segments.shift();
      return front.barrier;
    }
  }
  // Drops the queued requests of `key` (or with an id in `ids`); how many.
  discard(key, ids) {
    const dropped = [];
    if (Array.isArray(ids)) {
      for (const id of ids) if (this.byId.has(id)) dropped.push(this.byId.get(id));
    } else {
      for (const item of this.byId.values()) if (item.message.key === key) dropped.push(item);
    }
    for (const item of dropped) {
      this.byId.delete(item.message.id);
      item.message = null;  // the texts are not kept until the heap reaches the item
    }
    return dropped.length;
  }
}

const queue = new RequestQueue();
let running = false;    // a request is being handled (a load may await)
let scheduled = false;  // runNext is due

function schedule() {
  if (running || scheduled) return;
  scheduled = true;
  yieldThen(runNext);
}

async function runNext() {
  scheduled = false;
  const m = queue.pop();
  if (!m) return;
  running = true;
  try {
    if (m.op !== "init" && !petrel) throw new Error("the worker has not been initialized");
    port.post({ id: m.id, result: await handle(m) });
  } catch (e) {
    // A reply that could not be posted (uncloneable) becomes an error reply; if even that
    // fails, the next request still runs.
    try { errorReply(m.id, e); } catch { /* nothing more to tell */ }
  } finally {
    running = false;
    schedule();
  }
}

async function handle(m) {
  switch (m.op) {
    case "init": {
      if (!petrel) petrel = await loadPetrel(m.options && Object.keys(m.options).length ? m.options : undefined);
      if (m.stops instanceof Int32Array && m.stops.length > 0) stops = m.stops;
      return { version: petrel.version, timings: petrel.timings, threads: petrel.threads, threaded: petrel.threaded };
    }
    case "load": {
      const model = await petrel.loadModel(m.source, m.options || {});
      const id = nextModel++;
      models.set(id, model);
      return { model: id, info: model.info, name: model.name, isa: model.isa, threads: model.threads, loadMs: model.loadMs };
    }
    case "translate": {
      const model = modelOf(m.model);
      const options = Object.assign({}, m.options || {});
      if (m.second !== undefined) options.secondModel = modelOf(m.second);
      // Notification only: the page's answer cannot be awaited here, so nothing stops the input.
      if (m.stream) options.onToken = (event) => { port.post({ id: m.id, token: event }); };
      return model.translateDetailedSync(m.texts, options);
    }
    case "tokenize":
      return modelOf(m.model).tokenize(m.text, m.sourceLanguage);
    case "setDraftModel":
      return modelOf(m.model).setDraftModel(m.draft ? modelOf(m.draft) : null);
    case "translateSpeculation":
      return modelOf(m.model).lastTranslateSpeculation();
    case "free": {
      const model = models.get(m.model);
      if (model) model.free();
      models.delete(m.model);
      for (const [handle, chat] of chats) if (chat.freed) chats.delete(handle);  // freed with the model
      return true;
    }
    case "generate":
      return modelOf(m.model).generateDetailedSync(m.prompt, generationOptions(m));
    case "chat": {
      const chat = modelOf(m.model).chatSync(m.options);
      const id = nextChat++;
      chats.set(id, chat);
      return { chat: id };
    }
    case "reply":
      return chatOf(m.chat).replyDetailedSync(m.message, generationOptions(m));
    case "messages":
      return chatOf(m.chat).messages();
    case "makeRoom":
      return chatOf(m.chat).makeRoom(m.message, m.newTokens);
    case "chatFree": {
      const chat = chats.get(m.chat);
      if (chat) chat.free();
      chats.delete(m.chat);
      return true;
    }
    case "applyChatTemplate":
      return modelOf(m.model).applyChatTemplate(m.messages, m.options);
    case "detokenize":
      return modelOf(m.model).detokenize(m.ids);
    case "promptCache": {
      const model = modelOf(m.model);
      switch (m.action) {
        case "setBytes": return model.setPromptCacheBytes(m.bytes);
        case "stats": return model.promptCacheStats();
        case "save": return model.savePromptCache(m.path);
        case "load": return model.loadPromptCache(m.source, m.options);
        default: throw new Error(`unknown prompt cache action "${m.action}"`);
      }
    }
    default:
      throw new Error(`unknown request "${m.op}"`);
  }
}

// One message from the page: queued, or (a discard) done at once.
function receive(m) {
  // Anything may be posted here (a page's own message, null): each gets a reply and the
  // queue goes on, or one bad message would leave every later request unanswered.
  const id = m !== null && typeof m === "object" ? m.id : undefined;
  if (id === undefined) {
    errorReply(id, new Error("a request is an object with an id and an op"));
    return;
  }
  if (m.op === "discard") {
    port.post({ id, result: queue.discard(m.key, m.ids) });
    return;
  }
  queue.push(m);
}

port.listen((m) => {
  try {
    if (m !== null && typeof m === "object" && Array.isArray(m.batch)) m.batch.forEach(receive);
    else receive(m);
  } catch (e) {
    try { errorReply(undefined, e); } catch { /* nothing more to tell */ }
  }
  schedule();
});
port.post({ ready: true });
