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

// What a call became: its text, or how it was cancelled.
const outcome = (p) => p.then((text) => ({ text }), (e) => ({ error: e.name, code: e.code }));

// Calls made in one turn reach the worker together (one message), so what it runs first is
// decided on the whole burst: the outcomes below do not depend on timing.
test("PetrelWorker: discardTranslations(innerWindowId) rejects that page's calls and the worker skips them", async (t) => {
  const w = await PetrelWorker.create();
  t.after(() => w.terminate());
  const model = await w.loadModel(enDeF32());
  const texts = ["Open the file", "Save the file", "Close the window", "Open a new window", "Save all changes"];
  const expected = await model.translate(texts);  // one batch: each as alone (greedy, f32)
  const calls = [];
  for (let i = 0; i < 15; ++i) {
    const innerWindowId = i % 3 === 1 ? 7 : 8;  // 5 calls of page 7, 10 of page 8
    calls.push({ i, innerWindowId, result: outcome(model.translate(texts[i % 5], { innerWindowId })) });
  }
  const discarded = w.discardTranslations(7);
  const got = await Promise.all(calls.map((c) => c.result));
  assert.deepEqual(await discarded, { cancelled: 5, skipped: 5 });  // none of them ran
  calls.forEach((c, k) => {
    if (c.innerWindowId === 7) assert.deepEqual(got[k], { error: "AbortError", code: "PETREL_CANCELLED" }, `call ${c.i}`);
    else assert.deepEqual(got[k], { text: expected[c.i % 5] }, `call ${c.i}`);
  });
  // Two discards of one page in one turn: the second finds nothing left, neither fails.
  const again = [model.translate(texts[0], { innerWindowId: 9 }), w.discardTranslations(9), w.discardTranslations(9)];
  await assert.rejects(again[0], (e) => e.name === "AbortError");
  assert.deepEqual(await Promise.all(again.slice(1)), [{ cancelled: 1, skipped: 1 }, { cancelled: 0, skipped: 0 }]);
  // A call that cannot be sent (a function is not cloneable) fails alone, not its turn's others.
  const sent = await Promise.all([model.translate(texts[1]), model.translate(texts[2], { lengthPenalty: () => 1 }),
                                  model.translate(texts[3])].map(outcome));
  assert.deepEqual(sent, [{ text: expected[1] }, { error: "DataCloneError", code: 25 }, { text: expected[3] }]);
  // Another page's key, an unknown key and later calls of the discarded key are unaffected.
  assert.deepEqual(await w.discardTranslations("no such page"), { cancelled: 0, skipped: 0 });
  assert.equal(await model.translate(texts[0], { innerWindowId: 7 }), expected[0]);
  await assert.rejects(w.discardTranslations({}), (e) => e.code === "PETREL_INVALID_ARGUMENT");
});

test("PetrelWorker: a discarded call that is running finishes in the worker, its result and events dropped", async (t) => {
  const w = await PetrelWorker.create();
  t.after(() => w.terminate());
  const model = await w.loadModel(enDeF32());
  let events = 0, afterDiscard = 0, discarded = null;
  const running = outcome(model.translate("Open the file and save all changes before you close the window", {
    innerWindowId: 3,
    onToken: () => {
      ++events;
      if (discarded) ++afterDiscard;
      else discarded = w.discardTranslations(3);  // the worker is running it: events come only from a running call
    },
  }));
  assert.deepEqual(await running, { error: "AbortError", code: "PETREL_CANCELLED" });
  assert.deepEqual(await discarded, { cancelled: 1, skipped: 0 });
  assert.equal(events, 1);
  assert.equal(afterDiscard, 0);
  // The dropped reply is not taken for another call's.
  assert.equal(await model.translate("Open the file"), "die Datei öffnen");
});

test("PetrelWorker: higher priorities run first, equal ones in call order; free() waits for earlier calls", async (t) => {
  const w = await PetrelWorker.create();
  t.after(() => w.terminate());
  const model = await w.loadModel(enDeF32());
  const plan = [0, 0, 5, 0, 1, 5, -2, 1, 0, 5, 0, -2];  // each call's priority, in call order
  const finished = [];
  const calls = plan.map((priority, i) =>
    model.translate("Open the file", priority === 0 && i % 2 ? {} : { priority }).then((text) => {
      finished.push(i);
      return text;
    }));
  assert.deepEqual(await Promise.all(calls), plan.map(() => "die Datei öffnen"));
  const order = plan.map((priority, i) => ({ priority, i })).sort((a, b) => b.priority - a.priority || a.i - b.i).map((c) => c.i);
  assert.deepEqual(finished, order);
  assert.deepEqual(finished, [2, 5, 9, 4, 7, 0, 1, 3, 8, 10, 6, 11]);
  // A free() waits for the calls made before it, whatever their priority; calls made after
  // it, however urgent, are refused.
  const late = model.translate("Open the file", { priority: -5 });
  const freed = model.free();
  await assert.rejects(model.translate("Open the file", { priority: 100 }), /freed/);
  assert.equal(await late, "die Datei öffnen");
  await freed;
  for (const bad of [{ priority: "high" }, { priority: Infinity }, { innerWindowId: {} }, { signal: 5 }]) {
    const other = await w.loadModel(enDeF32());
    await assert.rejects(other.translate("x", bad), (e) => e.code === "PETREL_INVALID_ARGUMENT", JSON.stringify(bad));
  }
});

test("PetrelWorker: an AbortSignal cancels one call, as fetch does", async (t) => {
  const w = await PetrelWorker.create();
  t.after(() => w.terminate());
  const model = await w.loadModel(enDeF32());
  const controller = new AbortController();
  const aborted = model.translate("Open the file", { signal: controller.signal, innerWindowId: 4 });
  const kept = model.translate("Save the file");
  controller.abort();
  // The worker dropped it already: nothing of page 4 is left to reject or to skip.
  const discarded = w.discardTranslations(4);
  await assert.rejects(aborted, (e) => e.name === "AbortError");
  assert.deepEqual(await discarded, { cancelled: 0, skipped: 0 });
  assert.equal(await kept, await model.translate("Save the file"));
  // Already aborted: rejected without reaching the worker; a reason is the rejection.
  await assert.rejects(model.translate("x", { signal: AbortSignal.abort() }), (e) => e.name === "AbortError");
  const reason = new Error("page closed");
  const withReason = new AbortController();
  const call = model.translate("Open the file", { signal: withReason.signal });
  withReason.abort(reason);
  await assert.rejects(call, (e) => e === reason);
  // A signal aborted after its call finished changes nothing.
  const done = new AbortController();
  assert.equal(await model.translate("Open the file", { signal: done.signal }), "die Datei öffnen");
  done.abort();
  assert.equal(await model.translate("Open the file"), "die Datei öffnen");
});
