// The benchmark page: side_by_side.mjs drives window.bench through the DevTools protocol:
// open() loads one engine with the model, run() generates (greedy, EOS ignored), close()
// unloads it, so no idle engine shares the cores with the one being measured. Both
// engines run in a Web Worker (wllama always does; Petrel through its PetrelWorker, as
// examples/web does). A prompt goes to Petrel as ids and to wllama as text (its
// completion takes only strings), the text being what those ids decode to.
const PETREL_MODEL = new URL("/models/model.petrel", location.href).href;
const GGUF_MODEL = new URL("/models/model.gguf", location.href).href;
// ?verbose=1 (side_by_side.mjs --verbose): wllama's log on the console too.
const VERBOSE = new URLSearchParams(location.search).get("verbose") === "1";

function env() {
  return {
    crossOriginIsolated: self.crossOriginIsolated === true,
    sharedArrayBuffer: typeof SharedArrayBuffer === "function",
    hardwareConcurrency: navigator.hardwareConcurrency,
    userAgent: navigator.userAgent,
    jspi: typeof WebAssembly.Suspending === "function",
    webgpu: !!navigator.gpu,
  };
}

// Each engine as { info, problems(), tokenize(text), generate(prompt, n) -> figures, close() }.
// Figures come from the engine's own timers (prompt: the prompt's forward pass; generation:
// the time after the first new token, i.e. n - 1 forward passes, for n tokens) plus the
// page's wall clock around the call (worker messages included).
async function openPetrel(threads, kvCache) {
  const { PetrelWorker } = await import("/petrel/petrel-worker-client.mjs");
  const start = performance.now();
  const worker = await PetrelWorker.create({ threads });
  try {
    const model = await worker.loadModel(PETREL_MODEL);
    const loadMs = performance.now() - start;
    const info = {
      engine: "petrel",
      version: worker.version,
      build: worker.threaded ? "petrel-threads.wasm" : "petrel.wasm",
      threaded: worker.threaded,
      threads: model.threads,
      isa: model.isa,
      dtype: model.info.dtype,
      kvCache: kvCache ?? "f32 (default)",
      fileBytes: model.info.file_size,
      loadMs,
      engineLoadMs: model.loadMs,
    };
    return {
      info,
      problems: () => [],
      tokenize: async (text) => (model.info.has_tokenizer ? (await model.tokenize(text)).ids : null),
      generate: async ({ ids }, n) => {
        const t0 = performance.now();
        const g = await model.generateDetailed(ids, { maxNewTokens: n, ignoreEos: true, doSample: false,
                                                      ...(kvCache ? { kvCache } : {}) });
        const wallMs = performance.now() - t0;
        const t = g.timings;
        return { wallMs, promptTokens: t.promptTokens, reusedTokens: t.reusedTokens, promptMs: t.prefillMs,
                 generatedTokens: g.ids.length, generateMs: t.generateMs, ids: g.ids };
      },
      close: async () => worker.terminate(),
    };
  } catch (err) {
    worker.terminate();
    throw err;
  }
}

async function openWllama(threads, nCtx) {
  const { Wllama } = await import("/wllama/index.js");
  const lines = [];
  const keep = (level) => (...args) => {
    lines.push(`${level}: ${args.map(String).join(" ")}`);
    if (VERBOSE) console.log(`wllama ${level}:`, ...args);
    if (lines.length > 400) lines.shift();
  };
  const logger = { debug: keep("debug"), log: keep("log"), warn: keep("warn"), error: keep("error") };
  const wllama = new Wllama({ default: "/wllama/wasm/wllama.wasm" }, { logger });
  const start = performance.now();
  try {
    // fetch + Blob, as loadModelFromUrl does without its download cache (kept out: it
    // would add a copy into the profile's storage).
    const response = await fetch(GGUF_MODEL);
    if (!response.ok) throw new Error(`${GGUF_MODEL}: HTTP ${response.status}`);
    const blob = await response.blob();
    // n_gpu_layers 0: the CPU (wasm) backend only, as Petrel; n_parallel 1: one slot.
    await wllama.loadModel([blob], { n_threads: threads, n_gpu_layers: 0, n_ctx: nCtx, n_parallel: 1, seed: 0 });
    // A file llama.cpp refuses only shows in its log (loadModel resolves all the same).
    if (lines.some((l) => l.startsWith("error:") && /failed to load model/.test(l))) throw new Error(`llama.cpp could not load ${GGUF_MODEL}`);
    const loadMs = performance.now() - start;
    const ctx = wllama.getLoadedContextInfo();
    const info = {
      engine: "wllama",
      version: Wllama.getLibllamaVersion?.() ?? null,
      build: `wllama.wasm (${wllama.isMultithread() ? "pthreads" : "no pthreads"})`,
      threaded: wllama.isMultithread(),
      threads: wllama.getNumThreads(),
      fileType: ctx.metadata["general.file_type"] ?? null,
      nCtx: ctx.n_ctx,
      kvCache: "f16 (default)",
      fileBytes: blob.size,
      loadMs,
      // What says which backend and buffers ran (the rest of the log is the model's metadata).
      log: lines.filter((l) => /file type|model buffer size|compute buffer size|llama_kv_cache: size|adapter|compat|flash_attn  /i.test(l)).slice(0, 20),
    };
    return {
      info,
      problems: () => lines.filter((l) => l.startsWith("error:") || l.startsWith("warn:")).slice(-20),
      tokenize: async () => null,
      generate: async ({ text }, n) => {
        const t0 = performance.now();
        // llama-server's completion tokenizes the text, BOS first (the GGUF's add_bos_token);
        // temperature 0 and top_k 1: greedy; cache_prompt false: every call runs its whole prompt.
        const r = await wllama.createCompletion({ prompt: text, max_tokens: n, temperature: 0, top_k: 1,
                                                  ignore_eos: true, cache_prompt: false, stream: false });
        const wallMs = performance.now() - t0;
        const t = r.timings;
        if (!t) throw new Error("wllama: the completion has no timings");
        return { wallMs, promptTokens: t.prompt_n, reusedTokens: t.cache_n, promptMs: t.prompt_ms,
                 generatedTokens: t.predicted_n, generateMs: t.predicted_ms, finish: r.choices[0]?.finish_reason ?? null,
                 completionTokens: r.usage?.completion_tokens ?? null };
      },
      close: async () => wllama.exit(),
    };
  } catch (err) {
    await wllama.exit().catch(() => {});
    const problems = lines.filter((l) => l.startsWith("error:") || l.startsWith("warn:")).slice(-20);
    throw new Error(`${err?.message ?? err}\nwllama's errors and warnings:\n${problems.join("\n")}`);
  }
}

function check(what, got, want) {
  if (got !== want) throw new Error(`${what}: ${got}, expected ${want}`);
}

// One engine at a time; side_by_side.mjs reads the renderer's CPU time between the calls.
let current = null;

async function withProblems(fn) {
  try {
    return await fn();
  } catch (err) {
    const problems = current?.handle.problems() ?? [];
    throw problems.length ? new Error(`${err?.message ?? err}\n${current.engine}'s errors and warnings:\n${problems.join("\n")}`) : err;
  }
}

async function open({ engine, threads, nCtx, petrelKvCache }) {
  if (current) await close();
  const handle = engine === "petrel" ? await openPetrel(threads, petrelKvCache)
               : engine === "wllama" ? await openWllama(threads, nCtx)
               : null;
  if (!handle) throw new Error(`unknown engine ${engine}`);
  current = { engine, handle };
  return withProblems(async () => {
    check(`${engine}: threads`, handle.info.threads, threads);
    check(`${engine}: threaded build`, handle.info.threaded, threads > 1);
    return handle.info;
  });
}

// Petrel's tokenizer's ids for `text` (null for wllama, or a file without a tokenizer).
const tokenize = (text) => withProblems(() => current.handle.tokenize(text));

// One generation: `prompt` ({ids, text}) and `n` new tokens; checks that the engine ran
// the whole prompt (nothing reused) and generated exactly n tokens.
const run = ({ prompt, n }) =>
  withProblems(async () => {
    const r = await current.handle.generate(prompt, n);
    check(`${current.engine}: prompt tokens run`, r.promptTokens, prompt.ids.length);
    check(`${current.engine}: prompt tokens reused`, r.reusedTokens, 0);
    check(`${current.engine}: generated tokens`, r.generatedTokens, n);
    return r;
  });

async function close() {
  const was = current;
  current = null;
  if (was) await was.handle.close();
}

window.bench = { env, open, tokenize, run, close };
document.body.dataset.ready = "1";
