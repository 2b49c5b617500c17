// A pthread of the threaded module under Node: the globals of a Web Worker (self,
// postMessage, onmessage) over worker_threads, then emscripten's worker script, whose URL
// petrel.mjs passes as workerData.
import { parentPort, workerData } from "node:worker_threads";

globalThis.self = globalThis;
globalThis.postMessage = (message, transfer) => parentPort.postMessage(message, transfer);
await import(workerData);
// After the script has set self.onmessage: a port queues what arrives before it listens.
parentPort.on("message", (data) => globalThis.onmessage({ data }));
