// Language models through PetrelWorker: the same outputs as in the calling thread, token
// events across the worker boundary, conversations held in the worker, prompt caches,
// and stopping a generation the worker is running.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { packageUrl, petrelModule, chatLmF32, enDeF32, TMP } from "./helpers.mjs";

const { PetrelWorker, PetrelWorkerConversation } = await import(packageUrl("petrel-worker-client.mjs"));
const { loadPetrel } = await petrelModule();
const petrel = await loadPetrel();
const local = await petrel.loadModel(chatLmF32());

const PROMPTS = ["hello world", "the quick brown fox"];

// Each test ends its worker however it ends (a live worker keeps the test runner waiting).
async function startWorker(t) {
  const w = await PetrelWorker.create();
  t.after(() => w.terminate());
  return w;
}

test("PetrelWorker: generate (text and ids, sampled, constrained) equals the calling thread's; tokens stream across", async (t) => {
  const w = await startWorker(t);
  const model = await w.loadModel(chatLmF32());
  assert.equal(model.info.decoder_only, true);
  const settings = [{}, { doSample: true, seed: 9, topK: 30 }, { jsonSchema: { type: "array", items: { type: "integer" }, maxItems: 4 } },
                    { stop: ["gg"], kvCache: "f16" }];
  for (const prompt of PROMPTS) {
    for (const options of settings) {
      const want = local.generateDetailedSync(prompt, { maxNewTokens: 30, ...options });
      const events = [];
      const got = await model.generateDetailed(prompt, { maxNewTokens: 30, ...options, onToken: (e) => { events.push(e); } });
      assert.deepEqual(got.ids, want.ids, `${prompt} ${JSON.stringify(options)}`);
      assert.equal(got.text, want.text);
      assert.equal(got.endedOnEos, want.endedOnEos);
      assert.equal(got.endedOnStop, want.endedOnStop);
      assert.equal(events.at(-1).final, true);
      assert.equal(events.map((e) => e.delta).join(""), got.text);
      assert.equal(await w.generate(prompt, { maxNewTokens: 30, ...options }), want.text);  // the last loaded model
    }
  }
  assert.deepEqual(await model.generate([2, 8, 9], { maxNewTokens: 12 }), local.generateSync([2, 8, 9], { maxNewTokens: 12 }));
  assert.equal(await model.detokenize([2, 85, 6, 27]), local.detokenize([2, 85, 6, 27]));
  assert.equal(await model.applyChatTemplate([{ role: "user", content: "hi" }]), local.applyChatTemplate([{ role: "user", content: "hi" }]));
  // Errors cross as PetrelErrors with their codes; the worker goes on.
  await assert.rejects(model.generate("x", { temperature: -1 }), (e) => e.code === "PETREL_INVALID_ARGUMENT" && /temperature must be a number/.test(e.message));
  await assert.rejects(model.generate("x", { jsonSchema: { type: "string", pattern: "a" } }), (e) => e.code === "PETREL_UNSUPPORTED");
  await assert.rejects(model.translate("x"), /is a language model/);
  const translation = await w.loadModel(enDeF32());
  await assert.rejects(translation.generate("x"), /is a translation model: generate takes a language model/);
  await assert.rejects(w.generate("x"), /is a translation model/);  // w's model is the last loaded
  assert.equal(await model.generate(PROMPTS[0], { maxNewTokens: 5 }), local.generateSync(PROMPTS[0], { maxNewTokens: 5 }));
});

test("PetrelWorker: a conversation held in the worker replies as one in the calling thread", async (t) => {
  const w = await startWorker(t);
  const model = await w.loadModel(chatLmF32());
  const messages = ["hi there", "how are you", "and 1, 2, 3?"];
  const chat = await model.chat({ system: "Answer briefly." });
  assert.ok(chat instanceof PetrelWorkerConversation);
  const here = local.chatSync({ system: "Answer briefly." });
  for (const message of messages) {
    const want = here.replyDetailedSync(message, { maxNewTokens: 16 });
    const streamed = [];
    const got = await chat.replyDetailed(message, { maxNewTokens: 16, onToken: (e) => { streamed.push(e.delta); } });
    assert.deepEqual(got.ids, want.ids);
    assert.equal(got.text, want.text);
    assert.equal(got.reusedTokens, want.reusedTokens);
    assert.equal(streamed.join(""), got.text);
  }
  assert.deepEqual(await chat.messages(), here.messages());
  assert.equal(await chat.makeRoom("one more", 16), 0);
  here.free();
  // Two conversations of one model keep their own histories.
  const other = await model.chat();
  assert.equal(await other.reply("hi there", { maxNewTokens: 8 }), local.chatSync().replySync("hi there", { maxNewTokens: 8 }));
  assert.equal((await chat.messages()).length, 1 + 2 * messages.length);
  await chat.free();
  await assert.rejects(chat.reply("x"), /freed/);
  await model.free();
  assert.equal(other.freed, true);
  await assert.rejects(other.reply("x"), /freed/);
});

test("PetrelWorker: prompt caches as bytes and, in Node, files", async (t) => {
  const w = await startWorker(t);
  const model = await w.loadModel(chatLmF32());
  const prompt = "the quick brown fox jumps over the lazy dog";
  const options = { maxNewTokens: 12, ignoreEos: true };
  await model.setPromptCacheBytes(1 << 22);
  const first = await model.generateDetailed(prompt, options);
  assert.equal((await model.promptCacheStats()).entries, 1);
  const bytes = await model.savePromptCache();
  assert.ok(bytes instanceof Uint8Array && bytes.length > 0);
  const file = path.join(TMP, "worker.prompt-cache");
  assert.equal(await model.savePromptCache(file), undefined);
  assert.deepEqual(new Uint8Array(fs.readFileSync(file)), bytes);
  // The worker's bytes in a model of the calling thread, and the file in a fresh worker model.
  const here = await petrel.loadModel(chatLmF32());
  here.loadPromptCacheSync(bytes);
  const restored = here.generateDetailedSync(prompt, options);
  assert.deepEqual(restored.ids, first.ids);
  assert.equal(restored.reusedTokens, restored.promptTokens - 1);
  here.free();
  const fresh = await w.loadModel(chatLmF32());
  await fresh.loadPromptCache(file);
  const again = await fresh.generateDetailed(prompt, options);
  assert.deepEqual(again.ids, first.ids);
  assert.equal(again.reusedTokens, again.promptTokens - 1);
  await assert.rejects(fresh.loadPromptCache(new Uint8Array(64)), (e) => e.code === "PETREL_FORMAT" && /header/.test(e.message));
});

// A generation runs synchronously in the worker; the client reaches it through shared
// memory (Node has it): it writes the call's id into a stop slot the worker reads after
// each token. These tests set the slot before the worker runs the call, so what they see
// does not depend on timing.
test("PetrelWorker: a stop slot set for a running generation ends it; onToken returning false and abort set it", async (t) => {
  const w = await startWorker(t);
  const model = await w.loadModel(chatLmF32());
  const options = { maxNewTokens: 60, ignoreEos: true };
  const full = local.generateDetailedSync(PROMPTS[0], options);
  assert.equal(full.ids.length, 60);
  assert.ok(w._stops instanceof Int32Array, "Node gives the client shared memory");

  // The slot of the next call, set before it runs: the worker stops after its first token.
  w._stop(w._next);
  const stopped = await model.generateDetailed(PROMPTS[0], { ...options, onToken: () => {} });
  assert.deepEqual(stopped.ids, full.ids.slice(0, 1));
  // A call that is not stoppable (no onToken, no signal) runs whole even with its slot set.
  w._stop(w._next);
  assert.deepEqual((await model.generateDetailed(PROMPTS[0], options)).ids, full.ids);

  // onToken returning false writes the call's slot (the worker stops when it reads it).
  let id = w._next;
  let calls = 0;
  const partial = await model.generateDetailed(PROMPTS[0], { ...options, onToken: () => (++calls < 2 ? undefined : false) });
  assert.equal(Atomics.load(w._stops, id % w._stops.length), id);
  assert.deepEqual(partial.ids, full.ids.slice(0, partial.ids.length), "what it generated before it stopped");
  // So does aborting: the call rejects at once.
  id = w._next;
  const controller = new AbortController();
  const aborted = model.generate(PROMPTS[0], { ...options, signal: controller.signal, onToken: () => controller.abort() });
  await assert.rejects(aborted, (e) => e.name === "AbortError");
  assert.equal(Atomics.load(w._stops, id % w._stops.length), id);
  // The worker goes on with the next call, whole.
  assert.deepEqual((await model.generateDetailed(PROMPTS[0], options)).ids, full.ids);
});

test("PetrelWorker: queued generations are cancelled by their signal or their page's discardTranslations", async (t) => {
  const w = await startWorker(t);
  const model = await w.loadModel(chatLmF32());
  const options = { maxNewTokens: 20 };
  const want = local.generateSync(PROMPTS[1], options);
  const outcome = (p) => p.then((text) => ({ text }), (e) => ({ error: e.name, code: e.code }));
  const chat = await model.chat();
  // One turn: the worker receives the burst whole, so these outcomes do not depend on timing.
  const controller = new AbortController();
  const calls = [
    model.generate(PROMPTS[1], { ...options, innerWindowId: 7 }),
    model.generate(PROMPTS[1], { ...options, signal: controller.signal }),
    model.generate(PROMPTS[1], options),
    chat.reply("hi there", { maxNewTokens: 8, innerWindowId: 7 }),
  ].map(outcome);
  controller.abort();
  const discarded = await w.discardTranslations(7);
  const results = await Promise.all(calls);
  assert.deepEqual(results[0], { error: "AbortError", code: "PETREL_CANCELLED" });
  assert.equal(results[1].error, "AbortError");
  assert.deepEqual(results[2], { text: want });
  assert.deepEqual(results[3], { error: "AbortError", code: "PETREL_CANCELLED" });
  assert.equal(discarded.cancelled, 2);
  // The skipped reply left the conversation as it was.
  assert.deepEqual(await chat.messages(), []);
});
