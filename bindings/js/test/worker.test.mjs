import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import { packageUrl, enDeF32 } from "./helpers.mjs";

const { PetrelWorker } = await import(packageUrl("petrel-worker-client.mjs"));

// Each test ends its worker however it ends: a live worker thread keeps Node's test runner
// waiting, so one failed assertion hung the suite until ctest's timeout (30 minutes).
test("PetrelWorker (Node worker_threads): load, translate, stream, errors, terminate", async (t) => {
  const w = await PetrelWorker.create();
  t.after(() => w.terminate());
  assert.match(w.version, /^\d+\./);
  assert.equal(w.info, null);
  const model = await w.loadModel(new Uint8Array(fs.readFileSync(enDeF32())));
  assert.equal(w.info.d_model, 256);
  assert.equal(await w.translate("Open the file"), "die Datei öffnen");
  assert.deepEqual(await w.translate(["Open the file", "Open the file"]), ["die Datei öffnen", "die Datei öffnen"]);
  const events = [];
  assert.equal(await w.translate("Open the file", { onToken: (e) => events.push(e) }), "die Datei öffnen");
  assert.equal(events.at(-1).final, true);
  // onToken is notification only in a worker: false does not stop the input, and an
  // exception rejects the call once the translation has finished (the worker goes on).
  let calls = 0;
  assert.equal(await w.translate("Open the file", { onToken: () => { ++calls; return false; } }), "die Datei öffnen");
  assert.ok(calls >= 2);
  calls = 0;
  await assert.rejects(w.translate("Open the file", { onToken: () => { ++calls; throw new Error("boom"); } }), /boom/);
  assert.equal(calls, 1);
  assert.equal(await w.translate("Open the file"), "die Datei öffnen");
  await assert.rejects(w.translate("x", { beam: 0 }), (e) => e.code === "PETREL_INVALID_ARGUMENT" && /beam/.test(e.message));
  await assert.rejects(w.loadModel(new Uint8Array(10)), (e) => e.code === "PETREL_FORMAT");
  const byPath = await w.loadModel(enDeF32());
  assert.equal(await byPath.translate("Open the file"), "die Datei öffnen");
  await model.free();
  await assert.rejects(model.translate("x"), /freed/);
  w.terminate();
  await assert.rejects(w.translate("x"), /terminated/);
});

// Whatever a page posts to the worker gets an error reply or none, and the worker goes
// on: a null message killed it (Node) or left every later request unanswered (browsers).
test("PetrelWorker: stray messages (null, numbers, no id) do not stop the worker", async (t) => {
  const w = await PetrelWorker.create();
  t.after(() => w.terminate());
  await w.loadModel(new Uint8Array(fs.readFileSync(enDeF32())));
  for (const stray of [null, undefined, 42, "translate", { op: "translate" }, []]) w._worker.postMessage(stray);
  assert.equal(await w.translate("Open the file"), "die Datei öffnen");
  w.terminate();
});
