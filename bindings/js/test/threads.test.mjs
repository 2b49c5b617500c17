// The package's two builds side by side: petrel.wasm (one thread) and petrel-threads.wasm
// (emscripten pthreads; Node always runs it). Outputs must not depend on the build or on
// the thread count; the threaded build's models get the threads asked for, fewer when
// other models hold the Workers, and never hang for one.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { spawnSync } from "node:child_process";
import { PACKAGE_DIR, petrelModule, enDeInt8, chatLmInt8, testSentences, nativeRun, nativeLines } from "./helpers.mjs";

const { loadPetrel, PetrelError, threadsSupported } = await petrelModule();
const { PetrelWorker } = await import(path.join(PACKAGE_DIR, "petrel-worker-client.mjs"));
const single = await loadPetrel({ threads: 1 });
const threaded = await loadPetrel({ threads: 2 });
const SENTENCES = testSentences(50);

test("threads: 1 runs petrel.wasm, threads: 2 petrel-threads.wasm; Node supports threads", () => {
  assert.equal(threadsSupported(), true);
  assert.equal(single.threaded, false);
  assert.equal(single.threads, 1);
  assert.equal(threaded.threaded, true);
  assert.equal(threaded.threads, 2);
  assert.ok(fs.existsSync(path.join(PACKAGE_DIR, "petrel-threads.wasm")));
});

test("translation: the builds' outputs (ids, text) equal each other and native, batched and one by one", async () => {
  const file = enDeInt8();
  const a = await single.loadModel(file);
  const b = await threaded.loadModel(file);
  assert.equal(a.threads, 1);
  assert.equal(b.threads, 2);
  const want = nativeRun(file, SENTENCES, ["--beam", "1", "--isa", "avx2"]);
  const one = await a.translateDetailed(SENTENCES);
  const two = await b.translateDetailed(SENTENCES);
  two.forEach((g, i) => {
    assert.deepEqual(g.ids, one[i].ids, `sentence ${i + 1}`);
    assert.equal(g.text, one[i].text);
    assert.equal(g.score, one[i].score);
    assert.deepEqual(g.ids, want[i].ids, `sentence ${i + 1}: native`);
  });
  for (let i = 0; i < 5; ++i) assert.equal(await b.translate(SENTENCES[i]), want[i].text);
  // Beam search and sentence splitting (the batch translator: a second pool of threads).
  const beamOne = await a.translateDetailed(SENTENCES.slice(0, 8), { beam: 4 });
  const beamTwo = await b.translateDetailed(SENTENCES.slice(0, 8), { beam: 4 });
  assert.deepEqual(beamTwo.map((r) => r.ids), beamOne.map((r) => r.ids));
  const joined = [SENTENCES.slice(0, 3).join(" "), SENTENCES.slice(3, 6).join(" ")];
  assert.deepEqual(await b.translate(joined, { splitSentences: true }), await a.translate(joined, { splitSentences: true }));
  a.free();
  b.free();
});

test("generation: greedy ids and text equal between the builds, streamed too", async () => {
  const file = chatLmInt8();
  const a = await single.loadModel(file);
  const b = await threaded.loadModel(file);
  for (const prompt of ["hello world", "the quick brown fox", "Zyx"]) {
    const one = await a.generateDetailed(prompt, { maxNewTokens: 40 });
    const deltas = [];
    const two = await b.generateDetailed(prompt, { maxNewTokens: 40, onToken: (e) => { deltas.push(e.delta); } });
    assert.deepEqual(two.ids, one.ids, prompt);
    assert.equal(two.text, one.text);
    assert.equal(deltas.join(""), two.text);
  }
  a.free();
  b.free();
});

test("more models than Workers: later ones compute with fewer threads, to the same outputs", async () => {
  // threads: 2 loads 2 Workers: a translator's pool takes one.
  const file = enDeInt8();
  const models = [];
  for (let i = 0; i < 3; ++i) models.push(await threaded.loadModel(file));
  assert.deepEqual(models.map((m) => m.threads), [2, 2, 1]);
  const want = await models[0].translate(SENTENCES.slice(0, 10));
  for (const m of models.slice(1)) assert.deepEqual(await m.translate(SENTENCES.slice(0, 10)), want);
  for (const m of models) m.free();
});

test("errors: threads 0, not an integer, or above 1 with the single-threaded module", async () => {
  await assert.rejects(loadPetrel({ threads: 0 }), (e) => e instanceof PetrelError && /threads must be an integer >= 1/.test(e.message));
  await assert.rejects(loadPetrel({ threads: 1.5 }), (e) => e instanceof PetrelError && /threads/.test(e.message));
  await assert.rejects(loadPetrel({ threads: 2, wasmModule: single.wasmModule }),
                       (e) => e instanceof PetrelError && /single-threaded build/.test(e.message));
  // A module given without threads says which build it is.
  const again = await loadPetrel({ wasmModule: threaded.wasmModule });
  assert.equal(again.threaded, true);
  const plain = await loadPetrel({ wasmModule: single.wasmModule });
  assert.equal(plain.threaded, false);
  assert.equal(plain.threads, 1);
  again.dispose();
  plain.dispose();
});

test("PetrelWorker: threads pass to the worker's loadPetrel; outputs equal the single-threaded build", async () => {
  const w = await PetrelWorker.create({ threads: 2 });
  try {
    assert.equal(w.threaded, true);
    assert.equal(w.threads, 2);
    const model = await w.loadModel(enDeInt8());
    assert.equal(model.threads, 2);
    const a = await single.loadModel(enDeInt8());
    assert.deepEqual(await model.translate(SENTENCES.slice(0, 10)), await a.translate(SENTENCES.slice(0, 10)));
    a.free();
  } finally {
    w.terminate();
  }
});

test("CLI: --threads 2 equals --threads 1 and native; --stats says which build ran", () => {
  const cli = path.join(PACKAGE_DIR, "petrel-translate.mjs");
  const file = enDeInt8();
  const input = SENTENCES.join("\n") + "\n";
  const want = nativeLines(file, SENTENCES, ["--beam", "1", "--isa", "avx2"]);
  for (const threads of ["1", "2"]) {
    const r = spawnSync(process.execPath, [cli, file, "--threads", threads, "--batch", "16", "--stats"],
                        { input, encoding: "utf8", maxBuffer: 1 << 28 });
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(r.stdout.split("\n").slice(0, -1), want);
    const stats = JSON.parse(r.stderr.trim().split("\n").at(-1));
    assert.equal(stats.threads, Number(threads));
    assert.equal(stats.model_threads, Number(threads));
    assert.equal(stats.wasm_bytes, fs.statSync(path.join(PACKAGE_DIR, threads === "1" ? "petrel.wasm" : "petrel-threads.wasm")).size);
  }
  const bad = spawnSync(process.execPath, [cli, file, "--threads", "0"], { input, encoding: "utf8" });
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /--threads must be an integer >= 1/);
});
