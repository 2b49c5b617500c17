// The threaded module's first lines (emcc --pre-js), inside its factory: the Worker class
// its pthreads start in. A page's or a Web Worker's own; Node has none, so petrel.mjs
// passes an adapter over worker_threads as Module.petrelWorker (no global is set).
var Worker = Module["petrelWorker"] || globalThis.Worker;
