#!/usr/bin/env node
// HTML (and plain-text) translation speed in WebAssembly: Petrel's JavaScript package against
// Firefox Translations' engine (bergamot-translator 0.4.9, npm) on the same model, one text
// per call with Firefox's settings, in one Node process, rounds of the two engines
// interleaved. Prints one JSON object. How to run it and what it reports: README.md here.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { performance } from "node:perf_hooks";
import { bergamotFiles, loadBergamot, alignedMemory } from "../../tools/reference/bergamot/bergamot_wasm.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, "..", "..");

const USAGE = `usage: node markup_speed.mjs --petrel-model STUDENT.petrel [--pkg DIR] [--student DIR]
       [--bergamot DIR] [--fixture FILE] [--rounds N] [--warmup N] [--limit N]
       [--modes html,plain] [--engines petrel,bergamot] [--activation-scales file|dynamic]
       [--petrel-alignment true|false] [--outputs FILE]
  --petrel-model       the Firefox-shaped student converted by petrel-convert (int8, shortlist stored)
  --pkg                Petrel's JS package directory (default build/wasm/js)
  --student            the Marian files bergamot loads (default tools/firefox-student)
  --bergamot           where @browsermt/bergamot-translator is installed (default tools/reference/bergamot)
  --fixture            the HTML fragments (default tests/fixtures/markup/ssru_float32.json)
  --rounds             timed rounds per engine and mode, interleaved (default 3)
  --warmup             fragments each engine translates before the first timed round (default 40)
  --limit              time only the first N fragments (default: all)
  --activation-scales  Petrel's int8 activation scales (default file: the model's alphas, as bergamot)
  --petrel-alignment   ask Petrel for alignments (default true, as Firefox asks bergamot)
  --outputs            write both engines' translations of the first round (JSON lines) to FILE`;

function fail(message) {
  process.stderr.write(`markup_speed.mjs: ${message}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const options = {
    petrelModel: null,
    pkg: path.join(ROOT, "build", "wasm", "js"),
    student: path.join(ROOT, "tools", "firefox-student"),
    bergamot: path.join(ROOT, "tools", "reference", "bergamot"),
    fixture: path.join(ROOT, "tests", "fixtures", "markup", "ssru_float32.json"),
    rounds: 3, warmup: 40, limit: 0,
    modes: "html,plain", engines: "petrel,bergamot", activationScales: "file",
    petrelAlignment: "true", outputs: null,
  };
  const valued = {
    "--petrel-model": "petrelModel", "--pkg": "pkg", "--student": "student", "--bergamot": "bergamot",
    "--fixture": "fixture", "--rounds": "rounds", "--warmup": "warmup", "--limit": "limit",
    "--modes": "modes", "--engines": "engines", "--activation-scales": "activationScales",
    "--petrel-alignment": "petrelAlignment", "--outputs": "outputs",
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--help" || arg === "-h") { process.stdout.write(USAGE + "\n"); process.exit(0); }
    const key = valued[arg];
    if (!key) fail(`unknown argument ${arg}\n${USAGE}`);
    if (i + 1 >= argv.length) fail(`${arg} needs a value`);
    options[key] = argv[++i];
  }
  for (const key of ["rounds", "warmup", "limit"]) {
    const value = Number(options[key]);
    if (!Number.isInteger(value) || value < 0) fail(`--${key} must be a non-negative integer`);
    options[key] = value;
  }
  if (options.rounds < 1) fail("--rounds must be at least 1");
  options.modes = options.modes.split(",");
  options.engines = options.engines.split(",");
  for (const mode of options.modes) if (!["html", "plain"].includes(mode)) fail(`unknown mode ${mode}`);
  for (const engine of options.engines) if (!["petrel", "bergamot"].includes(engine)) fail(`unknown engine ${engine}`);
  if (!["file", "dynamic"].includes(options.activationScales)) fail("--activation-scales: file or dynamic");
  if (!["true", "false"].includes(options.petrelAlignment)) fail("--petrel-alignment: true or false");
  options.petrelAlignment = options.petrelAlignment === "true";
  if (options.engines.includes("petrel") && !options.petrelModel) fail(`--petrel-model is required\n${USAGE}`);
  return options;
}

// The fixture's HTML requests that bergamot translates (html on, no abort expected).
function readFragments(file) {
  const fixture = JSON.parse(fs.readFileSync(file, "utf8"));
  return fixture.requests.filter((r) => r.html && !r.expect_error).map((r) => r.text);
}

// The plain-text run's inputs: each fragment's text as a page's text nodes give it — tags
// dropped, block boundaries and <br> as line breaks, entities decoded, white space collapsed.
const BLOCK = /<\/?(?:p|div|li|ul|ol|dl|dt|dd|h[1-6]|tr|td|th|table|caption|pre|blockquote|br)\b[^>]*>/gi;
const NAMED = { lt: "<", gt: ">", amp: "&", quot: "\"", apos: "'", nbsp: "\u00a0" };
function plainText(html) {
  return html
    .replace(/<!--[\s\S]*?-->/g, "")
    .replace(BLOCK, "\n")
    .replace(/<[^>]*>/g, "")
    .replace(/&(#x[0-9a-f]+|#[0-9]+|[a-z]+);/gi, (all, name) => {
      if (name[0] !== "#") return NAMED[name.toLowerCase()] ?? all;
      const code = name[1] === "x" || name[1] === "X" ? parseInt(name.slice(2), 16) : parseInt(name.slice(1), 10);
      return code > 0 && code < 0x110000 && !(code >= 0xd800 && code < 0xe000) ? String.fromCodePoint(code) : all;
    })
    .split("\n").map((line) => line.replace(/\s+/g, " ").trim()).filter((line) => line).join("\n");
}

// ---- bergamot-translator 0.4.9 (Firefox's engine), driven as tools/reference/bergamot does ----

function studentFiles(dir) {
  const names = fs.readdirSync(dir);
  const pick = (test, what) => {
    const found = names.filter(test);
    if (found.length !== 1) fail(`${dir}: expected one ${what}, found ${found.length}`);
    return fs.readFileSync(path.join(dir, found[0]));
  };
  return {
    model: pick((n) => /^model.*\.bin$/.test(n), "model*.bin"),
    vocab: pick((n) => /^vocab.*\.spm$/.test(n), "vocab*.spm"),
    shortlist: pick((n) => /^lex.*\.bin$/.test(n), "lex*.bin"),
  };
}

class Bergamot {
  static async create(options) {
    const engine = new Bergamot();
    const found = bergamotFiles(options.bergamot);
    if (!found) fail(`bergamot-translator is not installed: run \`npm ci\` in ${options.bergamot}`);
    const Module = await loadBergamot({ glue: found.glue, wasmBytes: fs.readFileSync(found.wasm),
                                        glueSource: fs.readFileSync(found.glue, "utf8") },
                                      { printErr: (text) => process.stderr.write(`bergamot: ${text}\n`) });
    const files = studentFiles(options.student);
    // Firefox's settings (bergamot's translator-worker.js); Firefox sets no ssplit-mode, so
    // bergamot's default, paragraph, applies.
    const config = [
      "beam-size: 1", "normalize: 1.0", "word-penalty: 0", "max-length-break: 128",
      "mini-batch-words: 1024", "workspace: 128", "max-length-factor: 2.0", "skip-cost: true",
      "cpu-threads: 0", "quiet: true", "quiet-translation: true",
      "gemm-precision: int8shiftAlphaAll", "alignment: soft", "ssplit-mode: paragraph",
    ].join("\n") + "\n";
    const vocabs = new Module.AlignedMemoryList();
    vocabs.push_back(alignedMemory(Module, files.vocab, 64));
    engine.Module = Module;
    engine.model = new Module.TranslationModel(config, alignedMemory(Module, files.model, 256),
                                               alignedMemory(Module, files.shortlist, 64), vocabs, null);
    engine.service = new Module.BlockingService({ cacheSize: 0 });
    return engine;
  }

  // One text per call, as Firefox sends them. Sentences: the response's; target tokens (each
  // sentence's EOS included) from the Response's target annotation, which embind does not
  // expose: in this wasm32 build its token_begin_ vector (begin, end pointers) is at byte 48
  // of the Response and gap_ at byte 60 (tools/reference/bergamot/markup.mjs documents and
  // checks the layout). token_begin_ bounds every token, the sentences' and the gaps
  // around them (one gap per gap_ entry).
  translate(text, html) {
    const { Module } = this;
    const input = new Module.VectorString();
    const responseOptions = new Module.VectorResponseOptions();
    input.push_back(text);
    responseOptions.push_back({ qualityScores: false, alignment: true, html });
    const responses = this.service.translate(this.model, input, responseOptions);
    input.delete();
    responseOptions.delete();
    const response = responses.get(0);
    const sentences = response.size();
    const ptr = response.$$.ptr;
    const vectorSize = (at) => (Module.HEAPU32[(ptr + at + 4) >>> 2] - Module.HEAPU32[(ptr + at) >>> 2]) / 4;
    const tokens = vectorSize(48) - 1 - vectorSize(60);
    if (vectorSize(60) !== sentences + 1 || tokens < sentences) {
      throw new Error(`bergamot's Response layout is not the one expected (${sentences} sentences, ${vectorSize(60)} gaps)`);
    }
    const out = { text: response.getTranslatedText(), sentences, tokens };
    response.delete();
    responses.delete();
    return out;
  }
}

// ---- Petrel's JavaScript package ------------------------------------------------------------

class Petrel {
  static async create(options) {
    const engine = new Petrel();
    const pkg = path.resolve(options.pkg);
    const entry = path.join(pkg, "petrel.mjs");
    if (!fs.existsSync(entry)) fail(`${entry} not found: build it (cmake --preset wasm && cmake --build --preset wasm) or pass --pkg`);
    const { loadPetrel } = await import(pathToFileURL(entry).href);
    engine.petrel = await loadPetrel();
    engine.model = await engine.petrel.loadModel(path.resolve(options.petrelModel),
                                                 { activationScales: options.activationScales });
    if (!engine.model.info.shortlist) fail(`${options.petrelModel} holds no shortlist: convert it from ${options.student}`);
    // Firefox's settings as bergamot applies them: greedy, 2 x the longest sentence of the
    // text (bergamot translates a text's sentences as one batch), paragraph splitting.
    engine.options = { beam: 1, maxLengthFactor: 2, limitByLongestSentence: true, ssplitMode: "paragraph",
                       shortlist: true, shortlistOfInput: true, qualityScores: false, alignment: options.petrelAlignment };
    return engine;
  }

  translate(text, html) {
    const [r] = this.model.translateDetailedSync([{ text, html }], this.options);
    let tokens = 0;
    for (const s of r.sentences) tokens += s.targetTokens.length;
    return { text: r.text, sentences: r.sentences.length, tokens };
  }
}

// ---- timing ---------------------------------------------------------------------------------

function timedRound(engine, texts, html, keep) {
  const outputs = keep ? [] : null;
  let sentences = 0, tokens = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (const text of texts) {
    const r = engine.translate(text, html);
    sentences += r.sentences;
    tokens += r.tokens;
    if (keep) outputs.push(r);
  }
  const wall = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  return { wall_s: wall, cpu_s: (cpu.user + cpu.system) / 1e6, fragments: texts.length, sentences, tokens, outputs };
}

const median = (values) => {
  const s = [...values].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const round = (x, digits = 3) => Number(x.toFixed(digits));

function summary(rounds) {
  const first = rounds[0];
  const rate = (count, key) => round(median(rounds.map((r) => count / r[key])), 2);
  return {
    fragments: first.fragments,
    sentences: first.sentences,
    target_tokens: first.tokens,
    wall_s: rounds.map((r) => round(r.wall_s)),
    cpu_s: rounds.map((r) => round(r.cpu_s)),
    sentences_per_s_wall: rate(first.sentences, "wall_s"),
    sentences_per_s_cpu: rate(first.sentences, "cpu_s"),
    fragments_per_s_wall: rate(first.fragments, "wall_s"),
    fragments_per_s_cpu: rate(first.fragments, "cpu_s"),
    tokens_per_s_cpu: rate(first.tokens, "cpu_s"),
  };
}

function cpuModel() {
  try {
    const line = fs.readFileSync("/proc/cpuinfo", "utf8").split("\n").find((l) => l.startsWith("model name"));
    if (line) return line.split(":")[1].trim();
  } catch { /* not Linux */ }
  return os.cpus()[0]?.model || "unknown";
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  const fragments = readFragments(options.fixture);
  const inputs = { html: fragments, plain: fragments.map(plainText) };
  if (options.limit) for (const mode of Object.keys(inputs)) inputs[mode] = inputs[mode].slice(0, options.limit);

  const engines = {};
  const load = {};
  for (const name of options.engines) {
    const t0 = performance.now();
    engines[name] = await (name === "petrel" ? Petrel : Bergamot).create(options);
    load[name] = round((performance.now() - t0) / 1000);
  }

  const results = {};
  const outputs = {};
  for (const mode of options.modes) {
    const html = mode === "html";
    const texts = inputs[mode];
    // Warm-up: the WebAssembly tiers up (Liftoff -> TurboFan) and the engines size their
    // workspaces on the first calls.
    for (const name of options.engines) for (const text of texts.slice(0, options.warmup)) engines[name].translate(text, html);
    const rounds = Object.fromEntries(options.engines.map((name) => [name, []]));
    for (let k = 0; k < options.rounds; k++) {
      // Alternate which engine goes first, so drift in the host's speed favours neither.
      const order = k % 2 ? [...options.engines].reverse() : options.engines;
      for (const name of order) {
        const r = timedRound(engines[name], texts, html, k === 0);
        if (k === 0) { outputs[`${mode}/${name}`] = r.outputs; }
        delete r.outputs;
        rounds[name].push(r);
      }
    }
    results[mode] = Object.fromEntries(options.engines.map((name) => [name, summary(rounds[name])]));
    if (results[mode].petrel && results[mode].bergamot) {
      const p = results[mode].petrel, b = results[mode].bergamot;
      const po = outputs[`${mode}/petrel`], bo = outputs[`${mode}/bergamot`];
      results[mode].petrel_over_bergamot = {
        sentences_per_s_cpu: round(p.sentences_per_s_cpu / b.sentences_per_s_cpu, 2),
        sentences_per_s_wall: round(p.sentences_per_s_wall / b.sentences_per_s_wall, 2),
        fragments_per_s_cpu: round(p.fragments_per_s_cpu / b.fragments_per_s_cpu, 2),
        fragments_per_s_wall: round(p.fragments_per_s_wall / b.fragments_per_s_wall, 2),
        tokens_per_s_cpu: round(p.tokens_per_s_cpu / b.tokens_per_s_cpu, 2),
        same_text: po.filter((r, i) => r.text === bo[i].text).length,
        same_sentence_count: po.filter((r, i) => r.sentences === bo[i].sentences).length,
      };
    }
  }

  if (options.outputs) {
    const lines = [];
    for (const [key, list] of Object.entries(outputs)) {
      const [mode, engine] = key.split("/");
      list.forEach((r, i) => lines.push(JSON.stringify({ mode, engine, index: i, input: inputs[mode][i], ...r })));
    }
    fs.writeFileSync(options.outputs, lines.join("\n") + "\n");
  }

  const report = {
    host: { cpu: cpuModel(), logical_cpus: os.cpus().length, loadavg_at_end: os.loadavg().map((x) => round(x, 2)),
            node: process.version, platform: `${process.platform} ${os.release()}` },
    settings: {
      fixture: path.relative(ROOT, path.resolve(options.fixture)),
      fragments: fragments.length, timed_fragments: inputs.html.length,
      rounds: options.rounds, warmup_fragments: options.warmup,
      firefox: { beam: 1, max_length_factor: 2, ssplit: "paragraph", alignment: true, quality_scores: false,
                 one_text_per_call: true },
      bergamot: { version: "0.4.9", gemm_precision: "int8shiftAlphaAll", shortlist: true,
                  model: path.relative(ROOT, path.resolve(options.student)) },
      petrel: options.engines.includes("petrel")
        ? { pkg: path.resolve(options.pkg), model: path.resolve(options.petrelModel),
            activation_scales: options.activationScales, shortlist: true, alignment: options.petrelAlignment,
            limit_by_longest_sentence: true, shortlist_of_input: true }
        : null,
      plain_inputs: "each fragment's text: tags dropped, block ends and <br> as line breaks, entities decoded",
      load_s: load,
    },
    results,
  };
  process.stdout.write(JSON.stringify(report, null, 2) + "\n");
}

main().catch((error) => {
  process.stderr.write(`markup_speed.mjs: ${error && error.stack ? error.stack : error}\n`);
  process.exit(1);
});
