// Petrel inside a module Web Worker (or a Node worker_threads Worker): the engine runs
// here, so a page's UI thread never blocks. Start it with petrel-worker-client.mjs
// (PetrelWorker); the message protocol is that file's business:
//   request  {id, op, ...}      op: "init" | "load" | "translate" | "free"
//   replies  {id, token: event} (streaming) ... then {id, result} or {id, error: {message, code}}
import { loadPetrel } from "./petrel.mjs";

let port = null;
if (typeof self !== "undefined" && typeof self.postMessage === "function" && typeof WorkerGlobalScope !== "undefined") {
  port = { post: (m) => self.postMessage(m), listen: (f) => self.addEventListener("message", (e) => f(e.data)) };
} else {
  const { parentPort } = await import("node:worker_threads");
  if (!parentPort) throw new Error("petrel-worker.mjs runs inside a Worker (see petrel-worker-client.mjs)");
  port = { post: (m) => parentPort.postMessage(m), listen: (f) => parentPort.on("message", f) };
}

let petrel = null;
const models = new Map();  // handle -> PetrelModel
let nextModel = 1;
let queue = Promise.resolve();  // one request at a time, in order

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

async function handle(m) {
  switch (m.op) {
    case "init": {
      if (!petrel) petrel = await loadPetrel(m.options && Object.keys(m.options).length ? m.options : undefined);
      return { version: petrel.version, timings: petrel.timings };
    }
    case "load": {
      const model = await petrel.loadModel(m.source, m.options || {});
      const id = nextModel++;
      models.set(id, model);
      return { model: id, info: model.info, name: model.name, isa: model.isa, loadMs: model.loadMs };
    }
    case "translate": {
      const model = modelOf(m.model);
      const options = Object.assign({}, m.options || {});
      // Notification only: the page's answer cannot be awaited here, so nothing stops the input.
      if (m.stream) options.onToken = (event) => { port.post({ id: m.id, token: event }); };
      return model.translateDetailedSync(m.texts, options);
    }
    case "tokenize":
      return modelOf(m.model).tokenize(m.text, m.sourceLanguage);
    case "free": {
      const model = models.get(m.model);
      if (model) model.free();
      models.delete(m.model);
      return true;
    }
    default:
      throw new Error(`unknown request "${m.op}"`);
  }
}

port.listen((m) => {
  queue = queue.then(async () => {
    // Anything may be posted here (a page's own message, null): each gets a reply and
    // the queue goes on, or one bad message would leave every later request unanswered.
    const id = m !== null && typeof m === "object" ? m.id : undefined;
    try {
      if (id === undefined) throw new Error("a request is an object with an id and an op");
      if (m.op !== "init" && !petrel) throw new Error("the worker has not been initialized");
      port.post({ id, result: await handle(m) });
    } catch (e) {
      errorReply(id, e);
    }
  }).catch(() => {});  // a reply that could not be posted (uncloneable): the next request still runs
});
port.post({ ready: true });
