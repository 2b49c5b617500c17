import { test } from "node:test";
import assert from "node:assert/strict";
import { petrelModule, convert, nativeRun } from "./helpers.mjs";

const { loadPetrel } = await petrelModule();

test("multilingual (m2m100_tiny fixture): languages in info, targetLanguage equals native --target-lang", async () => {
  const file = convert("tests/fixtures/oracle/m2m100_tiny", "m2m100-tiny-f32.petrel", ["--quantize", "f32", "--embeddings", "f32"]);
  const petrel = await loadPetrel();
  const model = await petrel.loadModel(file);
  assert.equal(model.info.multilingual, true);
  assert.equal(model.info.family, "m2m100");
  assert.ok(model.info.languages.length > 2, JSON.stringify(model.info.languages));
  const texts = ["Open the file", "the house"];
  for (const target of model.info.languages.slice(0, 3)) {
    const want = nativeRun(file, texts, ["--beam", "1", "--target-lang", target, "--max-new-tokens", "8"]);
    const got = await model.translateDetailed(texts, { targetLanguage: target, maxNewTokens: 8 });
    got.forEach((g, i) => {
      assert.deepEqual(g.ids, want[i].ids, `${target}: ${texts[i]}`);
      assert.equal(g.text, want[i].text);
    });
  }
  await assert.rejects(model.translate("x", { targetLanguage: "not-a-language" }), (e) => e.code === "PETREL_INVALID_ARGUMENT");
  model.free();
});
