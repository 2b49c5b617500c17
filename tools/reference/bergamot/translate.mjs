#!/usr/bin/env node
// Translates stdin (one sentence per line) with Firefox Translations' engine, the WASM
// build of bergamot-translator from npm, and prints one JSON object on stdout.
// Usage and the JSON fields: README.md next to this file.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { bergamotFiles, loadBergamot, alignedMemory } from "./bergamot_wasm.mjs";
import { performance } from "node:perf_hooks";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const FILES = bergamotFiles();

const USAGE = `usage: node translate.mjs --model M.bin --vocab V.spm [--trg-vocab T.spm]
       [--shortlist lex.bin] [--precision float32|int8shiftAll|int8shiftAlphaAll]
       [--beam 1] [--max-length-factor 2] [--max-length-break 128] [--batch N]
       [--check-bytearray] < sentences.txt`;

// Marian ABORTs print their reason through emscripten's stderr before the WASM traps;
// kept so the error we report says why.
const engineLog = [];

function fail(message) {
  const tail = engineLog.slice(-5).join("\n");
  process.stderr.write(`translate.mjs: ${message}${tail ? `\n${tail}` : ""}\n`);
  process.exit(1);
}

function parseArgs(argv) {
  const options = {
    model: null, vocab: null, trgVocab: null, shortlist: null, precision: "float32",
    beam: 1, maxLengthFactor: 2, maxLengthBreak: 128, batch: 0, checkBytearray: false,
  };
  const valued = {
    "--model": "model", "--vocab": "vocab", "--trg-vocab": "trgVocab", "--shortlist": "shortlist",
    "--precision": "precision", "--beam": "beam", "--max-length-factor": "maxLengthFactor",
    "--max-length-break": "maxLengthBreak", "--batch": "batch",
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--help" || arg === "-h") { process.stdout.write(USAGE + "\n"); process.exit(0); }
    if (arg === "--check-bytearray") { options.checkBytearray = true; continue; }
    const key = valued[arg];
    if (!key) fail(`unknown argument ${arg}\n${USAGE}`);
    if (i + 1 >= argv.length) fail(`${arg} needs a value`);
    options[key] = argv[++i];
  }
  if (!options.model || !options.vocab) fail(`--model and --vocab are required\n${USAGE}`);
  if (!["float32", "int8shiftAll", "int8shiftAlphaAll"].includes(options.precision)) {
    fail(`--precision ${options.precision}: the WASM build implements float32, int8shiftAll, int8shiftAlphaAll`);
  }
  for (const key of ["beam", "maxLengthFactor", "maxLengthBreak", "batch"]) {
    const value = Number(options[key]);
    if (!Number.isFinite(value) || value < 0) fail(`bad number for ${key}: ${options[key]}`);
    options[key] = value;
  }
  if (!Number.isInteger(options.beam) || options.beam < 1) fail("--beam must be a positive integer");
  if (!Number.isInteger(options.batch)) fail("--batch must be an integer");
  return options;
}

function readInput(file) {
  try {
    return fs.readFileSync(file);
  } catch (error) {
    fail(`cannot read ${file}: ${error.message}`);
  }
}

// Firefox's settings (toolkit translations engine / bergamot translator-worker.js), with
// what the command line may change. One input line = one sentence: ssplit-mode sentence
// splits only at newlines, and each line is its own input text.
function engineConfig(options) {
  return [
    `beam-size: ${options.beam}`,
    "normalize: 1.0",
    "word-penalty: 0",
    `max-length-break: ${options.maxLengthBreak}`,
    "mini-batch-words: 1024",
    "workspace: 128",
    `max-length-factor: ${options.maxLengthFactor}`,
    "skip-cost: true",
    "cpu-threads: 0",
    "quiet: true",
    "quiet-translation: true",
    `gemm-precision: ${options.precision}`,
    "alignment: soft",
    "ssplit-mode: sentence",
    `check-bytearray: ${options.checkBytearray}`,
  ].join("\n") + "\n";
}

function translateTexts(Module, service, model, texts) {
  const input = new Module.VectorString();
  const responseOptions = new Module.VectorResponseOptions();
  for (const text of texts) {
    input.push_back(text);
    responseOptions.push_back({ qualityScores: false, alignment: false, html: false });
  }
  const responses = service.translate(model, input, responseOptions);
  const out = [];
  for (let i = 0; i < texts.length; i++) {
    const response = responses.get(i);
    out.push({ text: response.getTranslatedText(), sentences: response.size() });
  }
  responses.delete();
  input.delete();
  responseOptions.delete();
  return out;
}

function engineError(error) {
  if (typeof error === "number") return `engine threw a C++ exception (pointer ${error})`;
  return error && error.message ? error.message : String(error);
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  const modelBytes = readInput(options.model);
  const vocabBytes = readInput(options.vocab);
  const trgVocabBytes = options.trgVocab ? readInput(options.trgVocab) : null;
  const shortlistBytes = options.shortlist ? readInput(options.shortlist) : null;

  let lines = fs.readFileSync(0, "utf8").split("\n");
  if (lines.length && lines[lines.length - 1] === "") lines.pop();
  lines = lines.map((line) => line.replace(/\r$/, ""));

  let Module;
  try {
    if (!FILES) fail(`bergamot-translator is not installed: run \`npm ci\` in ${HERE}`);
    Module = await loadBergamot({ glue: FILES.glue, wasmBytes: fs.readFileSync(FILES.wasm),
                                  glueSource: fs.readFileSync(FILES.glue, "utf8") },
                                { printErr: (text) => { engineLog.push(text); if (engineLog.length > 50) engineLog.shift(); } });
  } catch (error) {
    fail(`cannot start the engine: ${engineError(error)}`);
  }

  let model;
  let service;
  const loadStart = performance.now();
  try {
    const vocabs = new Module.AlignedMemoryList();
    vocabs.push_back(alignedMemory(Module, vocabBytes, 64));
    if (trgVocabBytes) vocabs.push_back(alignedMemory(Module, trgVocabBytes, 64));
    const shortlist = shortlistBytes
      ? alignedMemory(Module, shortlistBytes, 64)
      : new Module.AlignedMemory(0, 64);
    model = new Module.TranslationModel(engineConfig(options), alignedMemory(Module, modelBytes, 256),
                                        shortlist, vocabs, null);
  } catch (error) {
    fail(`cannot load the model: ${engineError(error)}`);
  }
  const loadMs = performance.now() - loadStart;

  const translated = [];
  let firstMs = 0;
  let translateMs = 0;
  try {
    service = new Module.BlockingService({ cacheSize: 0 });
    if (lines.length) {
      // The engine builds its graph on the first translation: timed alone, on line 1.
      const firstStart = performance.now();
      translateTexts(Module, service, model, [lines[0]]);
      firstMs = performance.now() - firstStart;
    }
    const batch = options.batch > 0 ? options.batch : Math.max(lines.length, 1);
    const start = performance.now();
    for (let i = 0; i < lines.length; i += batch) {
      translated.push(...translateTexts(Module, service, model, lines.slice(i, i + batch)));
    }
    translateMs = performance.now() - start;
  } catch (error) {
    fail(`translation failed: ${engineError(error)}`);
  }

  const result = {
    translations: translated.map((t) => t.text),
    // Sentences the engine made of each line: 1, or more when a line is longer than
    // max-length-break tokens (wrapped into pieces), 0 for a line with no tokens.
    sentence_counts: translated.map((t) => t.sentences),
    precision: options.precision,
    load_ms: loadMs,
    first_ms: firstMs,
    translate_ms: translateMs,
    peak_rss_bytes: process.resourceUsage().maxRSS * 1024,
    wasm_bytes: fs.statSync(FILES.wasm).size,
  };
  process.stdout.write(JSON.stringify(result) + "\n");
}

main().catch((error) => fail(engineError(error)));
