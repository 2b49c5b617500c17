// Shared by the package tests: where the package and the native tools are, and model
// files converted once per run by the native petrel-convert.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { execFileSync } from "node:child_process";
import { pathToFileURL } from "node:url";

export const SOURCE_DIR = process.env.PETREL_SOURCE_DIR || path.resolve(new URL("../../..", import.meta.url).pathname);
export const PACKAGE_DIR = process.env.PETREL_JS_PACKAGE || path.join(SOURCE_DIR, "build/wasm/js");
export const NATIVE_TOOLS = process.env.PETREL_NATIVE_TOOLS || path.join(SOURCE_DIR, "build/release/tools");

for (const f of ["petrel.mjs", "petrel.wasm", "petrel-core.mjs"])
  if (!fs.existsSync(path.join(PACKAGE_DIR, f)))
    throw new Error(`the JavaScript package is not built: ${path.join(PACKAGE_DIR, f)} is missing ` +
                    "(cmake --build build/wasm --target petrel_js; or set PETREL_JS_PACKAGE)");
for (const tool of ["petrel-convert", "petrel-run"])
  if (!fs.existsSync(path.join(NATIVE_TOOLS, tool)))
    throw new Error(`the native tools are needed to convert models and to compare outputs: ${path.join(NATIVE_TOOLS, tool)} ` +
                    "is missing (cmake --preset release && cmake --build build/release --target petrel-convert petrel-run; " +
                    "or set PETREL_NATIVE_TOOLS to their directory)");

export const packageUrl = (file) => pathToFileURL(path.join(PACKAGE_DIR, file)).href;
export const petrelModule = () => import(packageUrl("petrel.mjs"));

export const TMP = fs.mkdtempSync(path.join(os.tmpdir(), "petrel-js-test-"));
process.on("exit", () => fs.rmSync(TMP, { recursive: true, force: true }));

export function convert(checkpoint, out, extra = []) {
  const file = path.join(TMP, out);
  if (!fs.existsSync(file))
    execFileSync(path.join(NATIVE_TOOLS, "petrel-convert"), [path.join(SOURCE_DIR, checkpoint), "-o", file, "--quiet", ...extra]);
  return file;
}

// A Marian-native fixture model (tests/fixtures/marian-native/<name>: model.bin and the
// shared vocab.spm, as Firefox ships them) converted with f32 weights.
export function marianNative(name) {
  const file = path.join(TMP, `native-${name}-f32.petrel`);
  if (fs.existsSync(file)) return file;
  const fixture = path.join(SOURCE_DIR, "tests/fixtures/marian-native");
  const dir = path.join(TMP, `native-${name}`);
  fs.mkdirSync(dir, { recursive: true });
  fs.copyFileSync(path.join(fixture, name, "model.bin"), path.join(dir, "model.bin"));
  fs.copyFileSync(path.join(fixture, "vocab.spm"), path.join(dir, "vocab.spm"));
  execFileSync(path.join(NATIVE_TOOLS, "petrel-convert"),
               [dir, "-o", file, "--quiet", "--quantize", "f32", "--embeddings", "f32"]);
  return file;
}

export const enDeInt8 = () => convert("tools/en-de-model", "en-de-int8.petrel");
export const enDeF32 = () => convert("tools/en-de-model", "en-de-f32.petrel", ["--quantize", "f32", "--embeddings", "f32"]);

// The first `n` English test sentences of the en-de model (tests/fixtures/en-de/test.en).
export function testSentences(n = 50) {
  return fs.readFileSync(path.join(SOURCE_DIR, "tests/fixtures/en-de/test.en"), "utf8").split("\n").filter(Boolean).slice(0, n);
}

// Native petrel-run --json on `texts` (one batch): [{text, ids, score}].
export function nativeRun(model, texts, args = []) {
  const argv = [model, "--json", "--quiet", ...args];
  for (const t of texts) argv.push("--text", t);
  const out = execFileSync(path.join(NATIVE_TOOLS, "petrel-run"), argv, { maxBuffer: 1 << 28, encoding: "utf8" });
  return JSON.parse(out).results.map((r) => r.hypotheses[0]);
}

// Native petrel-run on standard input (its defaults: sentence splitting, batches): lines out.
export function nativeLines(model, lines, args = []) {
  const out = execFileSync(path.join(NATIVE_TOOLS, "petrel-run"), [model, "--quiet", ...args],
                           { input: lines.join("\n") + "\n", maxBuffer: 1 << 28, encoding: "utf8" });
  return out.split("\n").slice(0, lines.length);
}

// The language-model fixture (tests/fixtures/decoder_only/gemma3_chat: random weights, a
// small Gemma-style tokenizer and chat template), converted with its default int8 weights
// or with f32 ones.
export const chatLmInt8 = () => convert("tests/fixtures/decoder_only/gemma3_chat", "gemma3-chat-int8.petrel");
export const chatLmF32 = () =>
  convert("tests/fixtures/decoder_only/gemma3_chat", "gemma3-chat-f32.petrel", ["--quantize", "f32", "--embeddings", "f32"]);

// Native petrel-run --json on language-model prompts (--prompt texts, or --ids lists):
// the results, each {prompt_tokens, reused_tokens, hypotheses: [{text, ids, ended_on_eos, ...}]}.
export function nativeGenerate(model, prompts, args = []) {
  const argv = [model, "--json", "--quiet", ...args];
  for (const p of prompts) argv.push(...(typeof p === "string" ? ["--prompt", p] : ["--ids", p.join(" ")]));
  const out = execFileSync(path.join(NATIVE_TOOLS, "petrel-run"), argv, { maxBuffer: 1 << 28, encoding: "utf8" });
  return JSON.parse(out).results;
}

// Native petrel-run --chat --json-lines: one object per user message (the reply's text, ids, ...).
export function nativeChat(model, messages, args = []) {
  const out = execFileSync(path.join(NATIVE_TOOLS, "petrel-run"), [model, "--chat", "--json-lines", "--quiet", ...args],
                           { input: messages.join("\n") + "\n", maxBuffer: 1 << 28, encoding: "utf8" });
  return out.split("\n").filter(Boolean).map((line) => JSON.parse(line));
}
