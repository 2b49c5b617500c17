#!/usr/bin/env node
// petrel-translate: Petrel's WebAssembly build on the command line (Node 20+). Lines on
// standard input, one translation per line on standard output. See --help.
import fs from "node:fs";
import { fileURLToPath } from "node:url";
import { loadPetrel } from "./petrel.mjs";

const USAGE = `usage: petrel-translate.mjs MODEL.petrel [options] < input.txt > output.txt

Translates standard input line by line with Petrel's WebAssembly build: one output line
per input line, in order (a blank line gives a blank line). Greedy search unless --beam
says otherwise. Standard input is read whole, then translated --batch lines per call.
A line is split into sentences and reassembled, as petrel-run does (--no-split: whole).

options:
  --beam N              beam size (default 1: greedy)
  --max-new-tokens N    generated tokens at most per line (default: the model's)
  --source-lang CODE    multilingual models: the input's language (eng_Latn, __en__, en_XX)
  --target-lang CODE    multilingual models: the output's language
  --batch N             lines per translation call, translated as one batch (default 1)
  --threads N           threads (default 1: the single-threaded build, petrel.wasm); above 1
                        the threaded build (petrel-threads.wasm, a worker thread per extra one)
  --no-split            translate each line whole, without splitting it into sentences
  --isa PATH            kernel path: simd128 (default) or scalar
  --activation-scales S int8 models: dynamic (default) or file (a Marian model's alphas)
  --json                one JSON object per line: {"text", "ids", "score"} (ids: output
                        token ids without EOS)
  --stats               at the end, one JSON object on standard error: module_ms (compile +
                        instantiate), load_ms (model bytes in memory -> ready), read_ms (reading
                        the file), first_ms (the first call alone, even if it failed),
                        translate_ms (all calls, including the line-by-line retries after a
                        batch failed), retry_ms (those retries alone), lines (input lines,
                        blank ones included), tokens (output ids + 1 per line whose
                        translation ended on EOS; with sentence splitting approximate: one EOS
                        per line, not per sentence, so use --no-split to count tokens),
                        threads (requested), model_threads (those the model got), wasm_bytes,
                        glue_bytes (of the build that ran)
  -h, --help            show this help

Exit status: 0; 1 when the model cannot be loaded or a line fails (its error on standard
error, a blank line or {"error": ...} in its place, and the run goes on); 2 on bad usage;
141 (as a process killed by SIGPIPE) when standard output is closed early (EPIPE): the run
ends there, quietly.`;

class UsageError extends Error {}

function parseArgs(argv) {
  const o = { beam: 1, maxNewTokens: undefined, sourceLanguage: undefined, targetLanguage: undefined, batch: 1,
              split: true, threads: 1, isa: "", activationScales: "dynamic", json: false, stats: false, model: null, help: false };
  const int = (flag, value, min) => {
    if (value === undefined) throw new UsageError(`${flag} needs a value`);
    if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > 0x7fffffff)
      throw new UsageError(`${flag} must be an integer >= ${min} (got "${value}")`);
    return Number(value);
  };
  const str = (flag, value) => {
    if (value === undefined || value === "") throw new UsageError(`${flag} needs a value`);
    return value;
  };
  for (let i = 0; i < argv.length; ++i) {
    let arg = argv[i];
    let inline;
    if (arg.startsWith("--") && arg.includes("=")) {
      inline = arg.slice(arg.indexOf("=") + 1);
      arg = arg.slice(0, arg.indexOf("="));
    }
    const value = () => (inline !== undefined ? inline : argv[++i]);
    switch (arg) {
      case "-h": case "--help": o.help = true; break;
      case "--beam": o.beam = int(arg, value(), 1); break;
      case "--max-new-tokens": o.maxNewTokens = int(arg, value(), 1); break;
      case "--source-lang": o.sourceLanguage = str(arg, value()); break;
      case "--target-lang": o.targetLanguage = str(arg, value()); break;
      case "--batch": o.batch = int(arg, value(), 1); break;
      case "--threads": o.threads = int(arg, value(), 1); break;
      case "--isa": o.isa = str(arg, value()); break;
      case "--activation-scales": o.activationScales = str(arg, value()); break;
      case "--no-split": o.split = false; break;
      case "--json": o.json = true; break;
      case "--stats": o.stats = true; break;
      default:
        if (arg.startsWith("-") && arg !== "-") throw new UsageError(`unknown option ${arg}`);
        if (o.model !== null) throw new UsageError(`one model only (got "${o.model}" and "${arg}")`);
        o.model = arg;
    }
    if (inline !== undefined && ["-h", "--help", "--no-split", "--json", "--stats"].includes(arg))
      throw new UsageError(`${arg} takes no value`);
  }
  if (!o.help && o.model === null) throw new UsageError("no model given");
  return o;
}

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}

function writeOut(text) {
  return new Promise((resolve, reject) => {
    if (process.stdout.write(text)) resolve();
    else process.stdout.once("drain", resolve).once("error", reject);
  });
}

async function main() {
  // A reader that goes away (| head) ends the run quietly, as SIGPIPE ends native tools.
  process.stdout.on("error", (e) => {
    if (e && e.code === "EPIPE") process.exit(141);
    process.stderr.write(`petrel-translate: standard output: ${e && e.message ? e.message : e}\n`);
    process.exit(1);
  });

  let args;
  try {
    args = parseArgs(process.argv.slice(2));
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    process.stderr.write(`petrel-translate: ${e.message}\n(petrel-translate.mjs --help for usage)\n`);
    return 2;
  }
  if (args.help) {
    process.stdout.write(USAGE + "\n");
    return 0;
  }

  let petrel;
  try {
    petrel = await loadPetrel({ threads: args.threads });
  } catch (e) {
    process.stderr.write(`petrel-translate: ${e.message}\n`);
    return 1;
  }
  const readStart = performance.now();
  let model;
  try {
    model = await petrel.loadModel(args.model, { isa: args.isa, activationScales: args.activationScales });
  } catch (e) {
    process.stderr.write(`petrel-translate: ${e.message}\n`);
    return 1;
  }
  const readMs = performance.now() - readStart - model.loadMs;

  const input = await readStdin();
  const lines = input.split("\n");
  if (lines.length && lines[lines.length - 1] === "") lines.pop();  // the final newline
  for (let i = 0; i < lines.length; ++i) if (lines[i].endsWith("\r")) lines[i] = lines[i].slice(0, -1);

  const options = { beam: args.beam, splitSentences: args.split };
  if (args.maxNewTokens !== undefined) options.maxNewTokens = args.maxNewTokens;
  if (args.sourceLanguage !== undefined) options.sourceLanguage = args.sourceLanguage;
  if (args.targetLanguage !== undefined) options.targetLanguage = args.targetLanguage;

  try {
    model.checkOptions(options);
  } catch (e) {
    process.stderr.write(`petrel-translate: ${e.message}\n`);
    return 1;
  }

  const results = new Array(lines.length).fill(null);  // {text, ids, score, eos} | {error}
  const todo = [];
  lines.forEach((line, i) => { if (line.trim() !== "") todo.push(i); });
  let failed = 0, firstMs = null, translateMs = 0, retryMs = 0, tokens = 0;
  let written = 0;
  const format = (r) => {
    if (!args.json) return (r && r.text !== undefined ? r.text : "") + "\n";
    if (!r) return JSON.stringify({ text: "", ids: [], score: 0 }) + "\n";
    if (r.error) return JSON.stringify({ error: r.error }) + "\n";
    return JSON.stringify({ text: r.text, ids: r.ids, score: r.score }) + "\n";
  };
  const flush = async (upTo) => {  // lines before `upTo` are done: write them in order
    let out = "";
    for (; written < upTo; ++written) out += format(results[written]);
    if (out) await writeOut(out);
  };
  const fail = (i, e) => {
    failed++;
    results[i] = { error: e.message };
    process.stderr.write(`petrel-translate: line ${i + 1}: ${e.message}\n`);
  };

  for (let k = 0; k < todo.length; k += args.batch) {
    const chunk = todo.slice(k, k + args.batch);
    const start = performance.now();
    let got = null, error = null;
    try {
      got = model.translateDetailedSync(chunk.map((i) => lines[i]), options);
    } catch (e) {
      error = e;
    }
    const ms = performance.now() - start;
    if (firstMs === null) firstMs = ms;
    translateMs += ms;
    if (error && chunk.length === 1) fail(chunk[0], error);
    else if (error) {  // find the failing line(s): translate the chunk's lines one by one
      const retryStart = performance.now();
      got = chunk.map((i) => {
        try {
          return model.translateDetailedSync(lines[i], options);
        } catch (e1) {
          fail(i, e1);
          return null;
        }
      });
      const retry = performance.now() - retryStart;
      retryMs += retry;
      translateMs += retry;
    }
    if (got) {
      chunk.forEach((i, j) => {
        if (!got[j]) return;
        results[i] = got[j];
        tokens += got[j].ids.length + (got[j].eos ? 1 : 0);
      });
    }
    await flush(k + args.batch < todo.length ? todo[k + args.batch] : lines.length);
  }
  await flush(lines.length);

  if (args.stats) {
    const dir = fileURLToPath(new URL(".", import.meta.url));
    const size = (f) => { try { return fs.statSync(dir + f).size; } catch { return null; } };
    const round = (x) => (x === null ? null : Math.round(x * 1000) / 1000);
    process.stderr.write(JSON.stringify({
      module_ms: round(petrel.timings.moduleMs),
      load_ms: round(model.loadMs),
      read_ms: round(readMs),
      first_ms: round(firstMs),
      translate_ms: round(translateMs),
      retry_ms: round(retryMs),
      lines: lines.length,
      tokens,
      tokens_counted: args.split
        ? "output ids + 1 EOS per line that ended on EOS (approximate with sentence splitting: one EOS per line)"
        : "output ids + 1 EOS per line that ended on EOS",
      failed,
      beam: args.beam,
      batch: args.batch,
      split: args.split,
      isa: model.isa,
      threads: petrel.threads,
      model_threads: model.threads,
      wasm_bytes: size(petrel.threaded ? "petrel-threads.wasm" : "petrel.wasm"),
      glue_bytes: size(petrel.threaded ? "petrel-threads-core.mjs" : "petrel-core.mjs"),
    }) + "\n");
  }
  model.free();
  return failed ? 1 : 0;
}

main().then(
  (code) => { process.exitCode = code; },
  (e) => {
    process.stderr.write(`petrel-translate: ${e && e.message ? e.message : e}\n`);
    process.exitCode = 1;
  });
