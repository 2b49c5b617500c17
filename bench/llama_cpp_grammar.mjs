// llama.cpp's side of two comparisons in bench/README.md, through node-llama-cpp (a prebuilt
// llama.cpp, CPU only): "Grammar masks beside llama.cpp" (greedy generation with and without
// a grammar: the time per generated token and the grammar's share of a step) and "llama.cpp's
// KV cache types" (f16 vs q8_0 K/V at a context filled by a prompt: the time per generated
// token and the KV cache's memory). Prints one JSON object per line.
//
//   node bench/llama_cpp_grammar.mjs --lib NPM_DIR MODEL.gguf ids [--prompt TEXT] [--tokens 16] [--gbnf FILE]
//   node bench/llama_cpp_grammar.mjs --lib NPM_DIR MODEL.gguf grammar --gbnf FILE \
//       --schema SCHEMAS.json:NAME [--tokens 64] [--threads 1,2] [--reps 3] [--flash-attention auto|on|off]
//   node bench/llama_cpp_grammar.mjs --lib NPM_DIR MODEL.gguf kv [--contexts 2048,8192]
//       [--types f16,q8_0] [--tokens 32] [--threads 2]
//
// NPM_DIR holds node_modules/node-llama-cpp (3.21.1, installed with
// NODE_LLAMA_CPP_SKIP_DOWNLOAD=true: its prebuilt binaries, no download, no build).
// ids: the prompt's ids (BOS first when the model asks for it) and the greedy ids after it,
// to check against Petrel's before timing anything (under the grammar of --gbnf if given).
// grammar: per thread count, greedy generation of --tokens tokens from --prompt (default
// bench/grammar_bench.cpp's), EOS ignored without a grammar; under the GBNF grammar of
// --gbnf, and under the grammar node-llama-cpp makes from the JSON schema NAME of
// SCHEMAS.json (tests/fixtures/json_schema/schemas.json's layout), until the grammar is
// complete (EOS) or --tokens. Each in two sampling modes: "lazy" is llama.cpp's own
// (common_sampler, node-llama-cpp's AddonSampler::sample): the greedy token is checked against
// the grammar first and the whole vocabulary masked only when it is refused; "full" masks the
// whole vocabulary every step, as Petrel does (node-llama-cpp does that when the selected
// token's confidence is asked for, which adds a softmax: its no-grammar run pays that too).
// ms/step is the wall time between consecutive generated tokens (one decode + sampling +
// node-llama-cpp's JavaScript per token), the prompt and the first token not counted; the
// median over --reps runs after one warm-up run. share = (grammar - none) / none. cpu_ms:
// the process's CPU time over the same steps (every thread's, spinning included), steadier
// than wall time on a loaded host.
// kv: per K/V type and context size, a context of that size (flash attention on: llama.cpp
// needs it for a quantized V cache; both types get it), a prompt filling it but --tokens
// positions, then --tokens greedy tokens: prefill ms, ms/step as above, and the KV cache's
// MiB as llama.cpp's log states it (with the formula's figure beside it).
import fs from "node:fs";
import path from "node:path";
import os from "node:os";
import {pathToFileURL} from "node:url";

const DEFAULT_PROMPT = "Write a JSON object describing a petrel:";

function parseArgs(argv) {
  const a = {positional: []};
  for (let i = 0; i < argv.length; ++i) {
    if (argv[i].startsWith("--")) {
      const key = argv[i].slice(2);
      if (i + 1 >= argv.length) throw new Error(`--${key} needs a value`);
      a[key] = argv[++i];
    } else {
      a.positional.push(argv[i]);
    }
  }
  return a;
}

const args = parseArgs(process.argv.slice(2));
if (!args.lib || args.positional.length !== 2) {
  process.stderr.write(fs.readFileSync(new URL(import.meta.url), "utf8").split("\n").slice(0, 33).join("\n") + "\n");
  process.exit(2);
}
const [modelPath, mode] = args.positional;
const tokensWanted = Number(args.tokens ?? (mode === "grammar" ? 64 : mode === "kv" ? 32 : 16));
const prompt = args.prompt ?? DEFAULT_PROMPT;
// --flash-attention on|off|auto (grammar and ids; kv always turns it on)
const flashAttention = {on: true, off: false, auto: "auto"}[args["flash-attention"] ?? "auto"];
const list = (s, d) => (s ?? d).split(",").map((x) => x.trim()).filter(Boolean);

const lib = await import(pathToFileURL(path.join(args.lib, "node_modules/node-llama-cpp/dist/index.js")).href);
const {getLlama, LlamaLogLevel, LlamaGrammarEvaluationState} = lib;

const logLines = [];
const llama = await getLlama({
  build: "never", usePrebuiltBinaries: true, gpu: false, logLevel: LlamaLogLevel.info,
  logger: (level, message) => {
    logLines.push(message);
    if (level === LlamaLogLevel.error || level === LlamaLogLevel.fatal) process.stderr.write(message + "\n");
  },
});
const model = await llama.loadModel({modelPath});
// The CPU library ggml chose for this host (one per x86 level), from the process's mappings.
const cpuLib = fs.readFileSync("/proc/self/maps", "utf8").match(/libggml-cpu-[\w-]+\.so/)?.[0] ?? null;

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}

function environment() {
  const load = os.loadavg().map((x) => Math.round(x * 100) / 100);
  return {date: new Date().toISOString(), load, cpus: os.cpus().length, cpu: os.cpus()[0]?.model};
}

function promptTokens(text) {
  const ids = Array.from(model.tokenize(text, false));
  return model.tokens.shouldPrependBosToken && model.tokens.bos != null ? [model.tokens.bos, ...ids] : ids;
}

const median = (xs) => {
  const s = [...xs].sort((x, y) => x - y);
  return s.length === 0 ? NaN : s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const round = (x, d = 3) => Math.round(x * 10 ** d) / 10 ** d;

// Greedy generation after `ids` on a fresh sequence: ids, per-token arrival times.
async function generate(sequence, ids, {grammar = null, full = false, stopAtEog = false, n = tokensWanted} = {}) {
  await sequence.clearHistory();
  const t0 = performance.now();
  if (ids.length > 1) await sequence.evaluateWithoutGeneratingNewTokens(ids.slice(0, -1));
  const prefillMs = performance.now() - t0;
  const options = {temperature: 0, yieldEogToken: true};
  if (grammar) options.grammarEvaluationState = new LlamaGrammarEvaluationState({model, grammar});
  const out = [];
  const times = [];
  const iterator = full ? sequence.evaluateWithMetadata(ids.slice(-1), {confidence: true}, options)
                        : sequence.evaluate(ids.slice(-1), options);
  let cpuFirst = null;
  for await (const item of iterator) {
    const token = full ? item.token : item;
    times.push(performance.now());
    if (cpuFirst == null) cpuFirst = process.cpuUsage();
    out.push(token);
    if ((stopAtEog && model.isEogToken(token)) || out.length >= n) break;
  }
  const steps = times.length - 1;
  const cpu = process.cpuUsage(cpuFirst);
  return {
    cpuMs: steps > 0 ? (cpu.user + cpu.system) / 1000 / steps : NaN,
    ids: out, prefillMs, firstMs: times[0] - t0 - prefillMs,
    stepMs: steps > 0 ? (times[times.length - 1] - times[0]) / steps : NaN,
  };
}

if (mode === "ids") {
  const context = await model.createContext({contextSize: 512, threads: Number(args.threads ?? 2), flashAttention});
  const ids = promptTokens(prompt);
  const grammar = args.gbnf ? await llama.createGrammar({grammar: fs.readFileSync(args.gbnf, "utf8")}) : null;
  const r = await generate(context.getSequence(), ids, {grammar, full: grammar != null, stopAtEog: grammar != null});
  emit({mode, model: modelPath, prompt, gbnf: args.gbnf ?? null, prompt_ids: ids, greedy_ids: r.ids,
        text: model.detokenize(r.ids), ms_per_step: round(r.stepMs), cpu_ms_per_step: round(r.cpuMs)});
  await context.dispose();
} else if (mode === "grammar") {
  if (!args.gbnf || !args.schema) throw new Error("grammar needs --gbnf FILE and --schema SCHEMAS.json:NAME");
  const [schemaFile, schemaName] = args.schema.split(/:(?=[^:]*$)/);
  const schemas = JSON.parse(fs.readFileSync(schemaFile, "utf8")).schemas;
  const entry = schemas.find((s) => s.name === schemaName);
  if (!entry) throw new Error(`${schemaFile}: no schema named ${schemaName}`);
  let t = performance.now();
  const gbnf = await llama.createGrammar({grammar: fs.readFileSync(args.gbnf, "utf8")});
  const gbnfMs = performance.now() - t;
  t = performance.now();
  const schemaGrammar = await llama.createGrammarForJsonSchema(entry.schema);
  const schemaMs = performance.now() - t;
  emit({mode, what: "grammars", gbnf_file: args.gbnf, gbnf_create_ms: round(gbnfMs), schema: schemaName,
        schema_create_ms: round(schemaMs), schema_gbnf: schemaGrammar.grammar});
  const ids = promptTokens(prompt);
  const reps = Number(args.reps ?? 3);
  for (const threads of list(args.threads, "1,2").map(Number)) {
    const context = await model.createContext({contextSize: 512, threads, flashAttention});
    const sequence = context.getSequence();
    const env = environment();
    const cases = [["none", null], ["gbnf", gbnf], ["schema", schemaGrammar]];
    const results = {};
    for (const full of [false, true]) {
      for (const [name, grammar] of cases) {
        const key = `${full ? "full" : "lazy"}/${name}`;
        const runs = [];
        for (let r = 0; r <= reps; ++r) {  // run 0 warms up
          const res = await generate(sequence, ids, {grammar, full, stopAtEog: grammar != null});
          if (r > 0) runs.push(res);
        }
        results[key] = runs;
        const last = runs[runs.length - 1];
        emit({mode, threads, sampling: full ? "full" : "lazy", grammar: name,
              ms_per_step: round(median(runs.map((x) => x.stepMs))), ms_per_step_runs: runs.map((x) => round(x.stepMs)),
              cpu_ms_per_step: round(median(runs.map((x) => x.cpuMs))),
              first_ms: round(median(runs.map((x) => x.firstMs))), tokens: last.ids.length,
              text: model.detokenize(last.ids.filter((id) => !model.isEogToken(id))).slice(0, 120)});
      }
      const none = median(results[`${full ? "full" : "lazy"}/none`].map((x) => x.stepMs));
      for (const name of ["gbnf", "schema"]) {
        const g = median(results[`${full ? "full" : "lazy"}/${name}`].map((x) => x.stepMs));
        const cpuNone = median(results[`${full ? "full" : "lazy"}/none`].map((x) => x.cpuMs));
        const cpuG = median(results[`${full ? "full" : "lazy"}/${name}`].map((x) => x.cpuMs));
        emit({mode, threads, sampling: full ? "full" : "lazy", summary: name, ms_none: round(none), ms_grammar: round(g),
              share: round((g - none) / none, 4), cpu_ms_none: round(cpuNone), cpu_ms_grammar: round(cpuG),
              cpu_share: round((cpuG - cpuNone) / cpuNone, 4)});
      }
    }
    emit({mode, threads, flash_attention: context.flashAttention, cpu_library: cpuLib, ...env, load_after: environment().load});
    await context.dispose();
  }
} else if (mode === "kv") {
  const threads = Number(args.threads ?? 2);
  // A prompt that reads like text: a paragraph's ids repeated, BOS first.
  const paragraph = Array.from(model.tokenize(
    "The petrel is a seabird of the open ocean. It rarely comes to land except to breed, and it flies low over "
    + "the waves, feeding on fish, squid and plankton. Sailors once named it after Saint Peter, who walked on water. ",
    false));
  const arch = model.fileInfo.metadata.general.architecture;
  const hp = model.fileInfo.metadata[arch];
  const nLayer = hp.block_count;
  const kvWidth = hp.attention.head_count_kv * hp.attention.key_length;
  for (const ctxSize of list(args.contexts, "2048,8192").map(Number)) {
    for (const type of list(args.types, "f16,q8_0")) {
      const ggmlType = type.toUpperCase();
      const from = logLines.length;
      const context = await model.createContext({
        contextSize: ctxSize, threads, flashAttention: true, batchSize: 512,
        experimentalKvCacheKeyType: ggmlType, experimentalKvCacheValueType: ggmlType,
      });
      const log = logLines.slice(from);
      const kvLines = log.filter((l) => /kv_cache|KV (self|buffer)|K \(|V \(/.test(l)).map((l) => l.trim());
      // "llama_kv_cache: size = X MiB (N cells, L layers, ...)": one line per cache (the
      // global layers' and, with sliding-window layers, the window's)
      const mib = kvLines.map((l) => l.match(/size\s*=\s*([\d.]+) MiB \(\s*\d+ cells/)).filter(Boolean).map((m) => Number(m[1]));
      const fill = ctxSize - tokensWanted - 1;
      const ids = [model.tokens.bos];
      while (ids.length < fill) ids.push(...paragraph);
      ids.length = fill;
      const env = environment();
      const r = await generate(context.getSequence(), ids);
      // K and V of n_layer layers: cells x n_embd_k_gqa x (2 bytes for f16, 34/32 for q8_0) each
      const formula = (cells, layers) => 2 * cells * layers * kvWidth * (type === "q8_0" ? 34 / 32 : 2) / 2 ** 20;
      const caches = kvLines.map((l) => l.match(/size\s*=\s*[\d.]+ MiB \(\s*(\d+) cells,\s*(\d+) layers/)).filter(Boolean);
      emit({mode, kv_type: type, context: context.contextSize, prompt_tokens: ids.length, generated: r.ids.length,
            threads, prefill_ms: round(r.prefillMs, 1), ms_per_step: round(r.stepMs), cpu_ms_per_step: round(r.cpuMs), kv_mib_logged: mib,
            kv_mib_logged_total: round(mib.reduce((x, y) => x + y, 0), 2),
            kv_mib_formula: round(caches.reduce((x, m) => x + formula(Number(m[1]), Number(m[2])), 0), 2), kv_log: kvLines, n_layer: nLayer,
            flash_attention: context.flashAttention, cpu_library: cpuLib, ...env, load_after: environment().load});
      await context.dispose();
    }
  }
} else {
  throw new Error(`unknown mode ${mode}: ids, grammar or kv`);
}
await model.dispose();
await llama.dispose();
