import { test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { spawn, spawnSync } from "node:child_process";
import { PACKAGE_DIR, enDeInt8, enDeF32, testSentences, nativeLines, nativeRun } from "./helpers.mjs";

const CLI = path.join(PACKAGE_DIR, "petrel-translate.mjs");
const run = (args, input = "") => spawnSync(process.execPath, [CLI, ...args], { input, encoding: "utf8", maxBuffer: 1 << 28 });
const SENTENCES = testSentences(50);

test("CLI: standard input lines -> standard output lines equal native petrel-run", () => {
  for (const [file, nativeArgs] of [[enDeF32(), []], [enDeInt8(), ["--isa", "avx2"]]]) {
    const want = nativeLines(file, SENTENCES, ["--beam", "1", ...nativeArgs]);
    for (const batch of ["1", "8"]) {
      const r = run([file, "--batch", batch], SENTENCES.join("\n") + "\n");
      assert.equal(r.status, 0, r.stderr);
      assert.deepEqual(r.stdout.split("\n").slice(0, -1), want);
    }
  }
});

test("CLI: blank lines, --json, --stats, --no-split, --beam", () => {
  const file = enDeF32();
  const lines = [SENTENCES[0], "", SENTENCES[1]];
  const r = run([file, "--json", "--stats", "--no-split"], lines.join("\n") + "\n");
  assert.equal(r.status, 0, r.stderr);
  const out = r.stdout.trim().split("\n").map((l) => JSON.parse(l));
  assert.equal(out.length, 3);
  const want = nativeRun(file, [SENTENCES[0], SENTENCES[1]], ["--beam", "1"]);
  assert.deepEqual(out[0].ids, want[0].ids);
  assert.equal(out[1].text, "");
  assert.deepEqual(out[2].ids, want[1].ids);
  const stats = JSON.parse(r.stderr.trim().split("\n").at(-1));
  for (const key of ["module_ms", "load_ms", "first_ms", "translate_ms", "retry_ms", "lines", "tokens", "wasm_bytes", "glue_bytes"])
    assert.ok(typeof stats[key] === "number", `${key}: ${stats[key]}`);
  assert.equal(stats.lines, 3);  // input lines, the blank one included
  assert.equal(stats.retry_ms, 0);
  assert.equal(stats.tokens, want[0].ids.length + want[1].ids.length + 2);  // + EOS each

  const beam = run([file, "--beam", "4", "--no-split"], SENTENCES.slice(0, 5).join("\n"));
  assert.equal(beam.status, 0, beam.stderr);
  assert.deepEqual(beam.stdout.split("\n").slice(0, -1), nativeRun(file, SENTENCES.slice(0, 5), ["--beam", "4"]).map((h) => h.text));
});

test("CLI: --help, bad flags exit 2, engine errors exit 1", () => {
  const help = run(["--help"]);
  assert.equal(help.status, 0);
  assert.match(help.stdout, /usage: petrel-translate/);
  for (const bad of [[], ["--beam"], ["m", "--beam", "0"], ["m", "--frobnicate"], ["m", "--batch", "x"], ["a", "b"]]) {
    const r = run(bad);
    assert.equal(r.status, 2, `${bad.join(" ")}: ${r.stderr}`);
    assert.match(r.stderr, /petrel-translate: /);
  }
  const missing = run(["/no/such/model.petrel"], "hello\n");
  assert.equal(missing.status, 1);
  assert.match(missing.stderr, /no\/such\/model\.petrel/);
  const badLang = run([enDeF32(), "--target-lang", "xx"], "hello\n");
  assert.equal(badLang.status, 1);
  assert.match(badLang.stderr, /language/);
  const tooLong = run([enDeF32(), "--no-split", "--batch", "4", "--stats"], ["Open the file", "word ".repeat(2000), "Open the file"].join("\n") + "\n");
  assert.equal(tooLong.status, 1);
  assert.deepEqual(tooLong.stdout.split("\n").slice(0, 3), ["die Datei öffnen", "", "die Datei öffnen"]);
  assert.match(tooLong.stderr, /line 2/);
  const stats = JSON.parse(tooLong.stderr.trim().split("\n").at(-1));
  assert.equal(stats.failed, 1);
  // Each figure is rounded to 0.001 ms: their sum may exceed the rounded total by that much.
  assert.ok(stats.retry_ms > 0 && stats.translate_ms + 0.002 >= stats.first_ms + stats.retry_ms, JSON.stringify(stats));
});

test("CLI: a reader that goes away (EPIPE) ends the run quietly", async () => {
  const child = spawn(process.execPath, [CLI, enDeInt8(), "--no-split"], { stdio: ["pipe", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (d) => { stderr += d; });
  child.stdout.once("data", () => child.stdout.destroy());  // as "| head -1" does
  child.stdin.end(Array(200).fill("Open the file").join("\n") + "\n");
  const status = await new Promise((resolve) => child.on("close", (code, signal) => resolve(code ?? signal)));
  assert.equal(status, 141, stderr);
  assert.equal(stderr, "");
});
