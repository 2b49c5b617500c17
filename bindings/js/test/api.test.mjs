import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { petrelModule, convert, enDeInt8, enDeF32, testSentences, nativeRun, nativeLines, TMP } from "./helpers.mjs";

const { loadPetrel, PetrelError } = await petrelModule();
const petrel = await loadPetrel();
const SENTENCES = testSentences(50);

test("loadPetrel: one shared instance, a version", async () => {
  assert.equal(await loadPetrel(), petrel);
  assert.match(petrel.version, /^\d+\.\d+\.\d+/);
  assert.ok(petrel.timings.moduleMs >= 0);
});

test("loadModel from an ArrayBuffer, a Uint8Array, a file URL and a path; info", async () => {
  const file = enDeInt8();
  const bytes = fs.readFileSync(file);
  const sources = [
    bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength),
    new Uint8Array(bytes),
    pathToFileURL(file),
    pathToFileURL(file).href,
    file,
  ];
  for (const source of sources) {
    const model = await petrel.loadModel(source);
    assert.equal(model.info.d_model, 256);
    assert.equal(model.info.encoder_layers, 3);
    assert.equal(model.info.decoder_layers, 3);
    assert.equal(model.info.vocab_size, 7828);
    assert.equal(model.info.dtype, "int8");
    assert.equal(model.info.has_tokenizer, true);
    assert.equal(model.info.family, "marian");
    assert.equal(model.info.file_size, bytes.byteLength);
    assert.equal(await model.translate("Open the file"), "die Datei öffnen");
    model.free();
  }
});

for (const [dtype, file, nativeArgs] of [
  ["f32", enDeF32, []],
  // int8 rounds per kernel path (natively too): simd128 quantizes as avx2 does, and the
  // scalar paths are the same code.
  ["int8", enDeInt8, ["--isa", "avx2"]],
  ["int8 scalar", enDeInt8, ["--isa", "scalar"], "scalar"],
]) {
  test(`${dtype}: greedy outputs (text and ids) equal native petrel-run ${nativeArgs.join(" ")} on the test sentences`, async (t) => {
    const isa = dtype.endsWith("scalar") ? "scalar" : undefined;
    const model = await petrel.loadModel(file(), isa ? { isa } : {});
    const texts = isa === "scalar" ? SENTENCES.slice(0, 15) : SENTENCES;  // the scalar path is slow
    const want = nativeRun(file(), texts, ["--beam", "1", ...nativeArgs]);
    const got = await model.translateDetailed(texts);  // one batch
    assert.equal(got.length, want.length);
    got.forEach((g, i) => {
      assert.deepEqual(g.ids, want[i].ids, `sentence ${i + 1}: ${texts[i]}`);
      assert.equal(g.text, want[i].text);
      // Scores: f32 to rounding; int8 activations round per kernel path (up to 0.014 apart seen).
      const tolerance = dtype === "f32" ? 1e-4 : 0.05;
      assert.ok(Math.abs(g.score - want[i].score) < tolerance, `score ${g.score} vs ${want[i].score}`);
    });
    // One at a time: the same.
    for (let i = 0; i < 5; ++i) assert.equal(await model.translate(SENTENCES[i]), want[i].text);
    assert.deepEqual(await model.translate(SENTENCES.slice(0, 3)), want.slice(0, 3).map((w) => w.text));
    model.free();
  });
}

// Firefox's own kind of model: a Marian intgemm8 file with alphas (tools/firefox-student),
// its shortlist on by default, with the file's static activation scales as bergamot's
// int8shiftAlphaAll and with dynamic ones.
test("a Marian int8 model with alphas: activationScales file and dynamic equal native", async () => {
  const file = convert("tools/firefox-student", "firefox-student.petrel");
  const texts = SENTENCES;
  for (const scales of ["file", "dynamic"]) {
    const model = await petrel.loadModel(file, { activationScales: scales });
    const want = nativeRun(file, texts, ["--beam", "1", "--isa", "avx2", "--activation-scales", scales]);
    const got = await model.translateDetailed(texts);
    // This briefly trained student has many near-ties, and float sums round differently
    // per path (SIMD128 has no fused multiply-add; natively the paths disagree as well).
    const same = got.filter((g, i) => JSON.stringify(g.ids) === JSON.stringify(want[i].ids)).length;
    console.log(`student int8, ${scales} activation scales: ${same}/${texts.length} equal to native avx2`);
    assert.ok(same >= 0.9 * texts.length, `${scales}: only ${same}/${texts.length} equal`);
    model.free();
  }
  // A model without alphas cannot take the file's scales; a bad value is refused by name.
  await assert.rejects(petrel.loadModel(enDeInt8(), { activationScales: "file" }),
                       (e) => e instanceof PetrelError && /activation scales/.test(e.message));
  await assert.rejects(petrel.loadModel(file, { activationScales: "static" }),
                       (e) => e instanceof PetrelError && /activationScales/.test(e.message));
});

test("beam 4 equals native beam 4", async () => {
  const model = await petrel.loadModel(enDeF32());
  const texts = SENTENCES.slice(0, 12);
  const want = nativeRun(enDeF32(), texts, ["--beam", "4"]);
  const got = await model.translateDetailed(texts, { beam: 4 });
  got.forEach((g, i) => assert.deepEqual(g.ids, want[i].ids, texts[i]));
  model.free();
});

test("streaming: deltas concatenate to the final text, the final event comes last", async () => {
  const model = await petrel.loadModel(enDeF32());
  for (const text of SENTENCES.slice(0, 5)) {
    const events = [];
    const result = await model.translate(text, { onToken: (e) => { events.push(e); } });
    assert.ok(events.length >= 2);
    assert.equal(events.at(-1).final, true);
    assert.equal(events.filter((e) => e.final).length, 1);
    let shown = "";
    for (const e of events) shown = e.restarted ? e.text : shown + e.delta;
    assert.equal(shown, result);
    assert.equal(events.at(-1).text, result);
  }
  // Returning false stops the translation early.
  let n = 0;
  const short = await model.translateDetailed(SENTENCES[0], { onToken: () => ++n < 2 });
  assert.ok(short.ids.length <= 2);
  // An exception in the callback becomes the call's error, and the model stays usable.
  await assert.rejects(model.translate("Open the file", { onToken: () => { throw new Error("boom"); } }), /boom/);
  assert.equal(await model.translate("Open the file"), "die Datei öffnen");
  model.free();
});

test("errors: corrupt, truncated, empty and bit-flipped models, bad options, use after free", async () => {
  const bytes = new Uint8Array(fs.readFileSync(enDeInt8()));
  const expectEngineError = async (promise, code, pattern) => {
    await assert.rejects(promise, (e) => {
      assert.ok(e instanceof Error && e instanceof PetrelError, String(e));
      assert.equal(e.code, code, e.message);
      if (pattern) assert.match(e.message, pattern);
      return true;
    });
  };
  await expectEngineError(petrel.loadModel(new Uint8Array(0)), "PETREL_FORMAT", /empty/);
  await expectEngineError(petrel.loadModel(new Uint8Array(1000)), "PETREL_FORMAT", /not a Petrel model/);
  await expectEngineError(petrel.loadModel(bytes.slice(0, bytes.length >> 1), { name: "half.petrel" }), "PETREL_FORMAT", /half\.petrel/);
  await expectEngineError(petrel.loadModel(bytes.slice(0, 200)), "PETREL_FORMAT");
  // Bit flips all over the header and metadata: each loads or fails with an Error, never aborts.
  for (let at = 0; at < 4096; at += 61) {
    const flipped = bytes.slice();
    flipped[at] ^= 0x5a;
    try {
      const m = await petrel.loadModel(flipped);
      try { await m.translate("Open the file"); } catch (e) { assert.ok(e instanceof PetrelError, String(e)); }
      m.free();
    } catch (e) {
      assert.ok(e instanceof PetrelError, `flip at ${at}: ${e}`);
      assert.ok(e.message.length > 0);
    }
  }
  await expectEngineError(petrel.loadModel(TMP + "/no-such-file.petrel"), "PETREL_IO");

  const model = await petrel.loadModel(bytes);
  await expectEngineError(model.translate("x", { beam: 0 }), "PETREL_INVALID_ARGUMENT", /beam/);
  await expectEngineError(model.translate("x", { beam: 1000 }), "PETREL_INVALID_ARGUMENT", /beam/);
  await expectEngineError(model.translate("x", { beam: "2" }), "PETREL_INVALID_ARGUMENT", /beam/);
  await expectEngineError(model.translate("x", { max_new_tokens: 3 }), "PETREL_INVALID_ARGUMENT", /unknown/);
  await expectEngineError(model.translate(42), "PETREL_INVALID_ARGUMENT", /string/);
  await expectEngineError(model.translate(["a", null]), "PETREL_INVALID_ARGUMENT", /text 2/);
  await expectEngineError(model.translate("x", { targetLanguage: "de" }), "PETREL_INVALID_ARGUMENT", /language/);
  await expectEngineError(model.translate("x", { onToken: 3 }), "PETREL_INVALID_ARGUMENT", /onToken/);
  await expectEngineError(model.translate("word ".repeat(2000)), "PETREL_INVALID_ARGUMENT");
  // Strings that cannot cross to the engine intact are refused, not cut or merged.
  await expectEngineError(model.translate("hello\u0000 secret words"), "PETREL_INVALID_ARGUMENT", /U\+0000 at index 5/);
  await expectEngineError(model.translate(["ok", "a\ud800b"]), "PETREL_INVALID_ARGUMENT", /text 2 .*lone surrogate \(U\+D800\) at index 1/);
  await expectEngineError(model.translate("a\udc00"), "PETREL_INVALID_ARGUMENT", /lone surrogate/);
  await expectEngineError(model.translate("x", { sourceLanguage: "en\u0000" }), "PETREL_INVALID_ARGUMENT", /sourceLanguage/);
  assert.throws(() => model.tokenize("a\ud800b"), /lone surrogate/);
  assert.ok(model.tokenize("\ud83d\ude00").ids.length > 0);  // a pair is fine
  assert.equal(await model.translate("Open the file"), "die Datei öffnen");  // still usable
  model.free();
  model.free();  // twice is fine
  await expectEngineError(model.translate("Open the file"), "PETREL_INVALID_ARGUMENT", /freed/);
  assert.throws(() => model.tokenize("x"), /freed/);
});

test("sentence splitting as petrel-run does it", async () => {
  const model = await petrel.loadModel(enDeF32());
  const texts = SENTENCES.slice(0, 20);
  const want = nativeLines(enDeF32(), texts, ["--beam", "1"]);
  const got = await model.translate(texts, { splitSentences: true });
  assert.deepEqual(got, want);
  // More texts than one batch takes: several batches (this failed naming a batch option
  // the caller never set).
  const many = await model.translate(new Array(65537).fill(""), { splitSentences: true });
  assert.equal(many.length, 65537);
  model.free();
});


// A Response streaming a real model's bytes under the given Content-Length.
function streamedResponse(bytes, contentLength, chunk = 65536) {
  let at = 0;
  const body = new ReadableStream({
    pull(controller) {
      if (at >= bytes.length) return controller.close();
      controller.enqueue(bytes.slice(at, at + chunk));
      at += chunk;
    },
  });
  return new Response(body, { headers: { "Content-Length": String(contentLength) } });
}

test("Response: a Content-Length beyond the heap is refused; a short one grows the buffer", async () => {
  const bytes = new Uint8Array(fs.readFileSync(enDeInt8()));
  for (const huge of [4294967360, 2 ** 31, 2 ** 53 + 2]) {
    await assert.rejects(petrel.loadModel(streamedResponse(bytes, huge), { name: "huge.petrel" }), (e) => {
      assert.ok(e instanceof PetrelError, String(e));
      assert.equal(e.code, "PETREL_OUT_OF_MEMORY");
      assert.match(e.message, /huge\.petrel/);
      return true;
    });
  }
  // The instance still works, and an understated length only costs a copy.
  const model = await petrel.loadModel(streamedResponse(bytes, 100), { name: "short.petrel" });
  assert.equal(model.info.file_size, bytes.byteLength);
  assert.equal(await model.translate("Open the file"), "die Datei öffnen");
  model.free();
});

test("a dispose() while a load awaits: the load fails with a PetrelError", async () => {
  const own = await loadPetrel({ wasmModule: petrel.wasmModule });
  const bytes = new Uint8Array(fs.readFileSync(enDeInt8()));
  const loading = own.loadModel(streamedResponse(bytes, bytes.byteLength));
  own.dispose();
  await assert.rejects(loading, (e) => e instanceof PetrelError && /disposed/.test(e.message));
});

test("file paths and URLs with % in the name", async () => {
  const file = path.join(TMP, "100%.petrel");
  fs.copyFileSync(enDeInt8(), file);
  for (const source of [file, pathToFileURL(file), pathToFileURL(file).href]) {
    const model = await petrel.loadModel(source);
    assert.equal(model.name, "100%.petrel");
    assert.equal(await model.translate("Open the file"), "die Datei öffnen");
    model.free();
  }
  await assert.rejects(petrel.loadModel(path.join(TMP, "50%zz.petrel")), (e) => e instanceof PetrelError && e.code === "PETREL_IO");
  await assert.rejects(petrel.loadModel(new Uint8Array(1000), { name: "%" }), (e) => e instanceof PetrelError && e.code === "PETREL_FORMAT");
});

// Last: it disposes the instance the tests above share.
test("cacheBytes: a repeated sentence comes from the cache, equal to a fresh translation, per option set", async () => {
  const cached = await petrel.loadModel(enDeInt8(), { cacheBytes: 1 << 20 });
  const plain = await petrel.loadModel(enDeInt8());
  try {
    assert.equal(plain.cacheStats(), null);
    const texts = SENTENCES.slice(0, 6);
    for (const options of [{}, { beam: 3 }, { alignment: true }, { maxNewTokens: 4 }]) {
      const fresh = plain.translateDetailedSync(texts, options);
      const before = cached.cacheStats();
      const first = cached.translateDetailedSync(texts, options);   // stored
      const second = cached.translateDetailedSync(texts, options);  // found
      const after = cached.cacheStats();
      assert.equal(after.misses - before.misses, texts.length, JSON.stringify(options));
      assert.equal(after.hits - before.hits, texts.length, JSON.stringify(options));
      for (let i = 0; i < texts.length; ++i) {
        assert.equal(first[i].text, fresh[i].text);
        assert.equal(second[i].text, fresh[i].text);
        assert.deepEqual(second[i].ids, fresh[i].ids);
        assert.deepEqual(second[i].alignments, fresh[i].alignments);
      }
    }
    assert.ok(cached.cacheStats().bytes <= 1 << 20);
    await assert.rejects(petrel.loadModel(enDeInt8(), { cacheBytes: -1 }), /cacheBytes must be an integer/);
  } finally {
    cached.free();
    plain.free();
  }
});

test("after the shared instance's dispose(), loadPetrel() makes a new one", async () => {
  const shared = await loadPetrel();
  if (shared !== petrel) return;  // another test disposed it first
  const again = await loadPetrel();
  assert.equal(again, shared);
  const model = await again.loadModel(new Uint8Array(fs.readFileSync(enDeInt8())));
  assert.equal(await model.translate("Open the file"), "die Datei öffnen");
  again.dispose();
  const fresh = await loadPetrel();
  assert.notEqual(fresh, again);
  const reloaded = await fresh.loadModel(new Uint8Array(fs.readFileSync(enDeInt8())));
  assert.equal(await reloaded.translate("Open the file"), "die Datei öffnen");
  reloaded.free();
});
