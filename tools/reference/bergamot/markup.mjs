#!/usr/bin/env node
// Translates JSON requests (one a line on stdin) with Firefox Translations' engine, the WASM
// build of bergamot-translator from npm, in HTML or plain mode, with quality scores,
// alignments and pivoting; prints one JSON object a line on stdout.
// Usage, the request and response fields, and how the fields not exposed by embind are
// read: README.md next to this file.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { bergamotFiles, loadBergamot, alignedMemory } from "./bergamot_wasm.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const FILES = bergamotFiles();

const USAGE = `usage: node markup.mjs --model M.bin --vocab V.spm [--trg-vocab T.spm] [--shortlist lex.bin]
       [--pivot-model M2.bin --pivot-vocab V2.spm [--pivot-trg-vocab T2.spm]]
       [--precision float32|int8shiftAll|int8shiftAlphaAll] [--pivot-precision P]
       [--beam 1] [--max-length-factor 2] [--max-length-break 128]
       [--ssplit-mode paragraph|sentence|wrapped_text] < requests.jsonl
Each stdin line: {"text": "...", "html": bool, "qualityScores": bool, "alignment": bool}`;

// Marian ABORTs print their reason through emscripten's stderr before the WASM traps.
let engineLog = [];

function fail(message) {
  process.stderr.write(`markup.mjs: ${message}\n`);
  process.exit(1);
}

function parseArgs(argv) {
  const options = {
    model: null, vocab: null, trgVocab: null, shortlist: null,
    pivotModel: null, pivotVocab: null, pivotTrgVocab: null,
    precision: "float32", pivotPrecision: null,
    beam: 1, maxLengthFactor: 2, maxLengthBreak: 128, ssplitMode: "paragraph",
  };
  const valued = {
    "--model": "model", "--vocab": "vocab", "--trg-vocab": "trgVocab", "--shortlist": "shortlist",
    "--pivot-model": "pivotModel", "--pivot-vocab": "pivotVocab", "--pivot-trg-vocab": "pivotTrgVocab",
    "--precision": "precision", "--pivot-precision": "pivotPrecision", "--beam": "beam",
    "--max-length-factor": "maxLengthFactor", "--max-length-break": "maxLengthBreak",
    "--ssplit-mode": "ssplitMode",
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--help" || arg === "-h") { process.stdout.write(USAGE + "\n"); process.exit(0); }
    const key = valued[arg];
    if (!key) fail(`unknown argument ${arg}\n${USAGE}`);
    if (i + 1 >= argv.length) fail(`${arg} needs a value`);
    options[key] = argv[++i];
  }
  if (!options.model || !options.vocab) fail(`--model and --vocab are required\n${USAGE}`);
  if (!options.pivotModel !== !options.pivotVocab) fail("--pivot-model and --pivot-vocab go together");
  options.pivotPrecision = options.pivotPrecision || options.precision;
  for (const precision of [options.precision, options.pivotPrecision]) {
    if (!["float32", "int8shiftAll", "int8shiftAlphaAll"].includes(precision)) {
      fail(`precision ${precision}: the WASM build implements float32, int8shiftAll, int8shiftAlphaAll`);
    }
  }
  if (!["paragraph", "sentence", "wrapped_text"].includes(options.ssplitMode)) {
    fail(`--ssplit-mode ${options.ssplitMode}: one of paragraph, sentence, wrapped_text`);
  }
  for (const key of ["beam", "maxLengthFactor", "maxLengthBreak"]) {
    const value = Number(options[key]);
    if (!Number.isFinite(value) || value < 0) fail(`bad number for ${key}: ${options[key]}`);
    options[key] = value;
  }
  if (!Number.isInteger(options.beam) || options.beam < 1) fail("--beam must be a positive integer");
  return options;
}

function readInput(file) {
  if (!file) return null;
  try {
    return fs.readFileSync(file);
  } catch (error) {
    fail(`cannot read ${file}: ${error.message}`);
  }
}

// Firefox's settings (bergamot's translator-worker.js); `alignment: soft` is what HTML needs.
// Firefox sets no ssplit-mode, so bergamot's default, paragraph, applies.
function engineConfig(options, precision) {
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
    `gemm-precision: ${precision}`,
    "alignment: soft",
    `ssplit-mode: ${options.ssplitMode}`,
  ].join("\n") + "\n";
}

function makeModel(Module, options, files, precision) {
  const vocabs = new Module.AlignedMemoryList();
  vocabs.push_back(alignedMemory(Module, files.vocab, 64));
  if (files.trgVocab) vocabs.push_back(alignedMemory(Module, files.trgVocab, 64));
  const shortlist = files.shortlist
    ? alignedMemory(Module, files.shortlist, 64)
    : new Module.AlignedMemory(0, 64);
  return new Module.TranslationModel(engineConfig(options, precision),
                                     alignedMemory(Module, files.model, 256), shortlist, vocabs, null);
}

// ---- Reading the parts of a Response that embind does not expose ------------------------
//
// Layout of marian::bergamot::Response (src/translator/response.h) in this wasm32 build
// (libc++, 4-byte size_t and pointers; a std::vector is {begin, end, end_of_storage}, a
// std::string 12 bytes):
//   0  AnnotatedText source  { std::string text @0; Annotation { vector<size_t> token_begin_ @12;
//                                                               vector<size_t> gap_ @24 } }
//  36  AnnotatedText target  (same, 36 bytes)
//  72  vector<SentenceQualityScore> qualityScores; each 28 bytes:
//        vector<float> wordScores @0, vector<SubwordRange{size_t begin, end}> wordRanges @12,
//        float sentenceScore @24
//  84  vector<vector<vector<float>>> alignments (per sentence, target token x source token)
// Every value read this way is checked against what embind does expose (texts, sentence
// ranges, counts) and against the invariants of the data (see checkResponse).
const RESPONSE = { source: 0, target: 36, qualityScores: 72, alignments: 84 };

class MemoryReader {
  constructor(Module) { this.Module = Module; this.decoder = new TextDecoder("utf-8", { fatal: true }); }
  u8(p) { return this.Module.HEAPU8[p]; }
  u32(p) { return this.Module.HEAPU32[p >>> 2]; }
  f32(p) { return this.Module.HEAPF32[p >>> 2]; }
  // This build's libc++ std::string (seen in memory, checked against getOriginalText()):
  // long form {data, size, capacity | 0x80000000}; short form: the characters from byte 0
  // and the size in byte 11 (its high bit clear).
  string(p) {
    const last = this.u8(p + 11);
    let data, size;
    if (last & 0x80) { data = this.u32(p); size = this.u32(p + 4); } else { size = last; data = p; }
    if (!(last & 0x80) && size > 10) throw new Error(`bad short string at ${p}: size ${size}`);
    return this.decoder.decode(this.Module.HEAPU8.subarray(data, data + size));
  }
  vector(p, elementBytes) {
    const begin = this.u32(p), end = this.u32(p + 4);
    if (end < begin || (end - begin) % elementBytes) throw new Error(`bad vector at ${p}: ${begin}..${end}`);
    return { begin, count: (end - begin) / elementBytes };
  }
  u32s(p) { const v = this.vector(p, 4); return Array.from({ length: v.count }, (_, i) => this.u32(v.begin + 4 * i)); }
  f32s(p) { const v = this.vector(p, 4); return Array.from({ length: v.count }, (_, i) => this.f32(v.begin + 4 * i)); }
  annotatedText(p) {
    return { text: this.string(p), tokenBegin: this.u32s(p + 12), gap: this.u32s(p + 24) };
  }
  qualityScores(p) {
    const v = this.vector(p, 28);
    const out = [];
    for (let i = 0; i < v.count; i++) {
      const q = v.begin + 28 * i;
      const ranges = this.u32s(q + 12);
      const wordRanges = [];
      for (let k = 0; k < ranges.length; k += 2) wordRanges.push([ranges[k], ranges[k + 1]]);
      out.push({ sentenceScore: this.f32(q + 24), wordScores: this.f32s(q), wordRanges });
    }
    return out;
  }
  alignments(p) {
    const sentences = this.vector(p, 12);
    const out = [];
    for (let s = 0; s < sentences.count; s++) {
      const rows = this.vector(sentences.begin + 12 * s, 12);
      const matrix = [];
      for (let t = 0; t < rows.count; t++) matrix.push(this.f32s(rows.begin + 12 * t));
      out.push(matrix);
    }
    return out;
  }
}

// A sentence's tokens as [begin, end) byte ranges of the text (UTF-8 bytes, as bergamot and
// Petrel count). Tokens of a sentence are contiguous, so they are printed as n + 1 bounds.
function sentenceTokens(annotated) {
  const { tokenBegin, gap } = annotated;
  const sentences = [];
  for (let s = 0; s + 1 < gap.length; s++) {
    const tokens = [];
    for (let t = gap[s] + 1; t < gap[s + 1]; t++) tokens.push([tokenBegin[t], tokenBegin[t + 1]]);
    sentences.push(tokens);
  }
  return sentences;
}

function tokenBounds(tokens) {
  return tokens.length ? [tokens[0][0], ...tokens.map((token) => token[1])] : [];
}

// The shortest decimal that reads back as the same float32 (the values are float32).
function f32Number(value) {
  if (!Number.isFinite(value)) return String(value);
  for (let digits = 1; digits <= 9; digits++) {
    const text = value.toPrecision(digits);
    if (Math.fround(Number(text)) === value) return Number(text);
  }
  return value;
}

function checkResponse(errors, notes, response, memory, request, pivoting) {
  const check = (ok, what) => { if (!ok) errors.push(what); };
  const utf8Length = (text) => Buffer.byteLength(text, "utf8");
  check(memory.source.text === response.getOriginalText(), "source text in memory != getOriginalText()");
  check(memory.target.text === response.getTranslatedText(), "target text in memory != getTranslatedText()");
  const count = response.size();
  for (const side of ["source", "target"]) {
    const annotated = memory[side];
    check(annotated.gap.length === count + 1, `${side}: ${annotated.gap.length - 1} sentences in memory, size() ${count}`);
    const tb = annotated.tokenBegin;
    check(tb[0] === 0 && tb[tb.length - 1] === utf8Length(annotated.text), `${side}: token ranges do not cover the text`);
    for (let i = 1; i < tb.length; i++) check(tb[i - 1] <= tb[i], `${side}: token ranges not monotone at ${i}`);
    for (let s = 0; s < count; s++) {
      const range = side === "source" ? response.getSourceSentence(s) : response.getTranslatedSentence(s);
      const begin = tb[annotated.gap[s] + 1], end = tb[annotated.gap[s + 1]];
      check(range.begin === begin && range.end === end,
            `${side} sentence ${s}: embind ${range.begin}..${range.end}, memory ${begin}..${end}`);
    }
  }
  const sourceTokens = sentenceTokens(memory.source), targetTokens = sentenceTokens(memory.target);
  if (memory.alignments.length) {
    check(memory.alignments.length === count, `${memory.alignments.length} alignment matrices for ${count} sentences`);
    memory.alignments.forEach((matrix, s) => {
      check(matrix.length === targetTokens[s].length,
            `sentence ${s}: ${matrix.length} alignment rows, ${targetTokens[s].length} target tokens`);
      matrix.forEach((row, t) => {
        check(row.length === sourceTokens[s].length,
              `sentence ${s} row ${t}: ${row.length} columns, ${sourceTokens[s].length} source tokens`);
        const sum = row.reduce((a, b) => a + b, 0);
        if (pivoting && Number.isNaN(sum)) {
          // bergamot's remapAlignments divides by the length of each pivot token of the second
          // model; an empty pivot token (a lone "▁" piece) makes 0/0 and NaN spreads.
          notes.push(`sentence ${s} row ${t}: NaN (from an empty pivot token)`);
          return;
        }
        check(Math.abs(sum - 1) < 1e-3 && row.every((p) => p >= 0), `sentence ${s} row ${t} sums to ${sum}`);
      });
    });
  } else {
    check(count === 0 || (!request.alignment && !request.html),
          "no alignments although alignment or html was requested");
  }
  if (request.qualityScores) {
    check(memory.qualityScores.length === count, `${memory.qualityScores.length} quality entries, ${count} sentences`);
    memory.qualityScores.forEach((q, s) => {
      check(q.wordScores.length === q.wordRanges.length, `sentence ${s}: word scores and ranges differ in count`);
      let next = 0;
      for (const [b, e] of q.wordRanges) {
        check(b === next && e > b, `sentence ${s}: word range ${b}..${e} does not follow ${next}`);
        next = e;
      }
      // The words cover the sentence's target tokens except its EOS.
      if (targetTokens[s]) check(next === targetTokens[s].length - 1 || next === targetTokens[s].length,
                                  `sentence ${s}: words end at token ${next} of ${targetTokens[s].length}`);
      const mean = q.wordScores.reduce((a, b) => a + b, 0) / q.wordScores.length;
      check(q.wordScores.length === 0 || Math.abs(mean - q.sentenceScore) <= 1e-4 * Math.max(1, Math.abs(mean)),
            `sentence ${s}: sentence score ${q.sentenceScore}, mean of word scores ${mean}`);
    });
  } else {
    check(memory.qualityScores.length === 0, "quality scores present although not requested");
  }
  return { sourceTokens, targetTokens };
}

function engineError(error) {
  if (typeof error === "number") return `engine threw a C++ exception (pointer ${error})`;
  return error && error.message ? error.message : String(error);
}

class Engine {
  constructor(options, files) {
    this.options = options;
    this.files = files;
    this.wasmBytes = fs.readFileSync(FILES.wasm);
    this.glueSource = fs.readFileSync(FILES.glue, "utf8");
    this.Module = null;
    this.starts = 0;
  }

  async start() {
    // An abort during a translation is reported by the exception the call throws.
    this.Module = await loadBergamot({ glue: FILES.glue, wasmBytes: this.wasmBytes, glueSource: this.glueSource }, {
      printErr: (text) => { engineLog.push(text); if (engineLog.length > 50) engineLog.shift(); },
    });
    this.starts += 1;
    const { Module, options, files } = this;
    this.model = makeModel(Module, options, files.first, options.precision);
    this.pivotModel = files.second ? makeModel(Module, options, files.second, options.pivotPrecision) : null;
    this.service = new Module.BlockingService({ cacheSize: 0 });
    this.reader = new MemoryReader(Module);
  }

  translate(request) {
    const { Module } = this;
    const input = new Module.VectorString();
    const responseOptions = new Module.VectorResponseOptions();
    input.push_back(request.text);
    responseOptions.push_back({ qualityScores: !!request.qualityScores, alignment: !!request.alignment,
                                html: !!request.html });
    const responses = this.pivotModel
      ? this.service.translateViaPivoting(this.model, this.pivotModel, input, responseOptions)
      : this.service.translate(this.model, input, responseOptions);
    input.delete();
    responseOptions.delete();
    const response = responses.get(0);  // embind copies the Response out of the vector
    try {
      const ptr = response.$$.ptr;
      const memory = {
        source: this.reader.annotatedText(ptr + RESPONSE.source),
        target: this.reader.annotatedText(ptr + RESPONSE.target),
        qualityScores: this.reader.qualityScores(ptr + RESPONSE.qualityScores),
        alignments: this.reader.alignments(ptr + RESPONSE.alignments),
      };
      const errors = [], notes = [];
      const { sourceTokens, targetTokens } =
        checkResponse(errors, notes, response, memory, request, !!this.pivotModel);
      if (errors.length) throw new Error(`response memory does not check out: ${errors.slice(0, 5).join("; ")}`);
      const sentences = [];
      for (let s = 0; s < response.size(); s++) {
        const source = response.getSourceSentence(s), target = response.getTranslatedSentence(s);
        sentences.push({ source: [source.begin, source.end], target: [target.begin, target.end] });
      }
      const out = {
        text: response.getTranslatedText(),
        source: response.getOriginalText(),
        sentences,
        source_tokens: sourceTokens.map(tokenBounds),
        target_tokens: targetTokens.map(tokenBounds),
      };
      if (notes.length) out.notes = notes;
      if (request.alignment) out.alignments = memory.alignments.map((m) => m.map((row) => row.map(f32Number)));
      if (request.qualityScores) {
        out.quality = memory.qualityScores.map((q) => ({
          sentence_score: f32Number(q.sentenceScore),
          word_scores: q.wordScores.map(f32Number),
          word_token_ranges: q.wordRanges,
        }));
      }
      return out;
    } finally {
      response.delete();
      responses.delete();
    }
  }
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  if (!FILES) {
    fail(`bergamot-translator is not installed: run \`npm ci\` in ${HERE}`);
  }
  const files = {
    first: { model: readInput(options.model), vocab: readInput(options.vocab),
             trgVocab: readInput(options.trgVocab), shortlist: readInput(options.shortlist) },
    second: options.pivotModel
      ? { model: readInput(options.pivotModel), vocab: readInput(options.pivotVocab),
          trgVocab: readInput(options.pivotTrgVocab), shortlist: null }
      : null,
  };
  let lines = fs.readFileSync(0, "utf8").split("\n");
  if (lines.length && lines[lines.length - 1] === "") lines.pop();

  const engine = new Engine(options, files);
  let healthy = false;
  for (const line of lines) {
    let request;
    try {
      request = JSON.parse(line);
      if (typeof request.text !== "string") throw new Error("\"text\" must be a string");
    } catch (error) {
      process.stdout.write(JSON.stringify({ error: `bad request: ${error.message}` }) + "\n");
      continue;
    }
    try {
      if (!healthy) {
        engineLog = [];
        await engine.start();
        healthy = true;
      }
    } catch (error) {
      fail(`cannot start the engine or load the models: ${engineError(error)}\n${engineLog.slice(-5).join("\n")}`);
    }
    engineLog = [];
    let out;
    try {
      out = engine.translate(request);
    } catch (error) {
      // An abort (or a C++ exception) leaves the runtime unusable: start a new one next time.
      healthy = false;
      out = { error: engineError(error), engine_log: engineLog.slice(-5) };
    }
    process.stdout.write(JSON.stringify(out) + "\n");
  }
}

main().catch((error) => fail(engineError(error)));
