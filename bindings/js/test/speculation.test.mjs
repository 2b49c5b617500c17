// Speculative decoding in the package: lookupNgram / maxDraftTokens on generate and
// translate, setDraftModel, and the counts (generation timings, lastTranslateSpeculation),
// in the calling thread and through PetrelWorker. Drafts never change an output, so each
// test compares a call with drafts with the same call without them.
import { test } from "node:test";
import assert from "node:assert/strict";
import { packageUrl, petrelModule, chatLmInt8, chatLmF32, enDeInt8, enDeF32, testSentences } from "./helpers.mjs";

const { loadPetrel, PetrelError } = await petrelModule();
const { PetrelWorker } = await import(packageUrl("petrel-worker-client.mjs"));
const petrel = await loadPetrel();
// f32 weights: prompt lookup's drafts for PROMPT are accepted in part; the int8 file (the
// same tokens, other numbers) drafts.
const lm = await petrel.loadModel(chatLmF32());
const lmDraft = await petrel.loadModel(chatLmInt8());
const enDe = await petrel.loadModel(enDeInt8());
const enDeDraft = await petrel.loadModel(enDeF32());

const PROMPT = Array.from({ length: 40 }, (_, i) => 3 + ((i * 7) % 11));
const SENTENCES = testSentences(6);

test("generate: prompt lookup and a draft model give the tokens plain generation gives, with counts", () => {
  const options = { maxNewTokens: 100, doSample: false, ignoreEos: true };
  const plain = lm.generateDetailedSync(PROMPT, options);
  assert.equal(plain.timings.verifications, 0);
  assert.equal(plain.timings.draftedTokens, 0);
  const lookup = lm.generateDetailedSync(PROMPT, { ...options, lookupNgram: 4, maxDraftTokens: 8 });
  assert.deepEqual(lookup.ids, plain.ids);
  assert.ok(lookup.timings.verifications > 0);
  assert.ok(lookup.timings.acceptedTokens > 0 && lookup.timings.acceptedTokens <= lookup.timings.draftedTokens);
  assert.equal(lookup.timings.draftModelTokens, 0);
  // Text, seeded sampling, streamed: the same text and deltas.
  const sampled = { maxNewTokens: 40, doSample: true, temperature: 0.7, seed: 5, ignoreEos: true };
  const want = lm.generateDetailedSync("a b a b a b a b", sampled);
  const deltas = [];
  const got = lm.generateDetailedSync("a b a b a b a b", { ...sampled, lookupNgram: 2, onToken: (e) => { deltas.push(e.delta); } });
  assert.equal(got.text, want.text);
  assert.equal(deltas.join(""), want.text);
  lm.setDraftModel(lmDraft);
  try {
    const drafted = lm.generateDetailedSync(PROMPT, options);
    assert.deepEqual(drafted.ids, plain.ids);
    assert.ok(drafted.timings.draftModelTokens > 0 && drafted.timings.verifications > 0);
  } finally {
    lm.setDraftModel(null);
  }
  assert.equal(lm.generateDetailedSync(PROMPT, options).timings.draftModelTokens, 0);
});

test("translate: prompt lookup and a draft model give the translations plain greedy search gives, with counts", () => {
  assert.equal(enDe.lastTranslateSpeculation(), null);
  const plain = enDe.translateDetailedSync(SENTENCES);
  assert.equal(enDe.lastTranslateSpeculation().verifications, 0);
  const lookup = enDe.translateDetailedSync(SENTENCES, { lookupNgram: 2 });
  assert.deepEqual(lookup.map((r) => r.ids), plain.map((r) => r.ids));
  assert.deepEqual(lookup.map((r) => r.score), plain.map((r) => r.score));
  const counts = enDe.lastTranslateSpeculation();
  assert.ok(counts.verifications > 0 && counts.acceptedTokens <= counts.draftedTokens);
  const plainSplit = enDe.translateSync(SENTENCES.slice(0, 2), { splitSentences: true });
  enDe.setDraftModel(enDeDraft);
  try {
    const drafted = enDe.translateDetailedSync(SENTENCES, { maxDraftTokens: 4 });
    assert.deepEqual(drafted.map((r) => r.ids), plain.map((r) => r.ids));
    assert.ok(enDe.lastTranslateSpeculation().draftModelTokens > 0);
    // Sentence splitting runs on the batch translator, which takes the draft model too.
    const split = enDe.translateSync(SENTENCES.slice(0, 2), { splitSentences: true });
    assert.deepEqual(split, plainSplit);
    assert.ok(enDe.lastTranslateSpeculation().verifications > 0);
  } finally {
    enDe.setDraftModel(null);
  }
  enDe.translateSync(SENTENCES);
  assert.equal(enDe.lastTranslateSpeculation().draftModelTokens, 0);
});

test("speculative decoding's errors name what is wrong", () => {
  assert.throws(() => lm.generateSync("hi", { lookupNgram: 1000 }), (e) => e instanceof PetrelError && /lookup_ngram/.test(e.message));
  assert.throws(() => lm.generateSync("hi", { lookupNgram: 2, maxDraftTokens: 1000 }), /max_draft_tokens/);
  assert.throws(() => lm.generateSync("hi", { lookupNgram: -1 }), /lookupNgram/);
  assert.throws(() => enDe.translateSync("Hello.", { beam: 4, lookupNgram: 2 }), /lookup_ngram/);
  assert.throws(() => lm.setDraftModel(enDe), (e) => e instanceof PetrelError && /not a decoder-only model/.test(e.message));
  assert.throws(() => enDe.setDraftModel(lm), /not a translation/);
  assert.throws(() => enDe.setDraftModel("en-de.petrel"), /PetrelModel/);
  // A refused draft model leaves none behind.
  assert.equal(lm.generateDetailedSync(PROMPT, { maxNewTokens: 8 }).timings.draftModelTokens, 0);
});

test("PetrelWorker: the same outputs and counts with lookupNgram and a draft model", async (t) => {
  const w = await PetrelWorker.create();
  t.after(() => w.terminate());
  const model = await w.loadModel(chatLmF32());
  const draft = await w.loadModel(chatLmInt8());
  const options = { maxNewTokens: 50, doSample: false, ignoreEos: true };
  const want = lm.generateDetailedSync(PROMPT, options);
  const lookup = await model.generateDetailed(PROMPT, { ...options, lookupNgram: 3 });
  assert.deepEqual(lookup.ids, want.ids);
  assert.ok(lookup.timings.verifications > 0);
  await model.setDraftModel(draft);
  const drafted = await model.generateDetailed(PROMPT, options);
  assert.deepEqual(drafted.ids, want.ids);
  assert.ok(drafted.timings.draftModelTokens > 0);
  await model.setDraftModel(null);
  await assert.rejects(model.setDraftModel(await w.loadModel(enDeInt8())), /not a decoder-only model/);

  const translator = await w.loadModel(enDeInt8());
  const plain = enDe.translateSync(SENTENCES);
  assert.deepEqual(await translator.translate(SENTENCES, { lookupNgram: 2 }), plain);
  assert.ok((await translator.lastTranslateSpeculation()).verifications > 0);
  await translator.setDraftModel(await w.loadModel(enDeF32()));
  assert.deepEqual(await translator.translate(SENTENCES), plain);
  assert.ok((await translator.lastTranslateSpeculation()).draftModelTokens > 0);
});
