// Web pages, alignments and quality scores as Firefox asks bergamot for them: requests
// {text, html, qualityScores, alignment} against bergamot 0.4.9's own responses
// (tests/fixtures/markup, its README; the native engine equals them in
// tests/test_bergamot_response.cpp).
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { petrelModule, packageUrl, marianNative, enDeF32, convert, SOURCE_DIR } from "./helpers.mjs";

const { loadPetrel } = await petrelModule();
const petrel = await loadPetrel();
const readFixture = (name) => JSON.parse(fs.readFileSync(path.join(SOURCE_DIR, `tests/fixtures/markup/${name}.json`), "utf8"));
const fixture = readFixture("transformer_float32");

// bergamot's settings in the fixture: beam 1, max-length-factor 2, no shortlist, ssplit-mode
// paragraph, a request's sentences limited as one batch.
const BERGAMOT = { beam: 1, maxLengthFactor: 2, shortlist: false, ssplitMode: "paragraph", limitByLongestSentence: true };

const utf8 = new TextEncoder();

// Two HTML translations are equal when they are byte for byte, the quality scores written
// into them (x-bergamot-...-score="...") to 3 decimals.
function sameMarkup(a, b) {
  const score = /-score="([^"]*)"/g;
  if (a.replace(score, "") !== b.replace(score, "")) return false;
  const as = [...a.matchAll(score)].map((m) => Number(m[1]));
  const bs = [...b.matchAll(score)].map((m) => Number(m[1]));
  return as.length === bs.length && as.every((x, i) => Math.abs(x - bs[i]) <= 1e-3);
}

// bergamot's contiguous token bounds [t0, t1, ..., tn] of token ranges; null if they do not tile.
function boundsOf(tokens) {
  for (let k = 1; k < tokens.length; ++k) if (tokens[k][0] !== tokens[k - 1][1]) return null;
  return tokens.length ? [...tokens.map((t) => t[0]), tokens.at(-1)[1]] : [];
}

const close = (a, b, tolerance) => Math.abs(a - b) <= tolerance;
// A fixture number: "NaN" where bergamot's was NaN (a pivot alignment's row through an empty
// pivot token; the fixture README's notes).
const sameNumber = (got, want, tolerance) => (want === "NaN" ? Number.isNaN(got) : close(got, want, tolerance));

// How `got` (a detailed result) differs from bergamot's response `want`, or [] when it does not.
function differences(request, got, want) {
  const problems = [];
  if (request.html ? !sameMarkup(got.text, want.text) : got.text !== want.text) problems.push("text");
  if (got.source !== want.source) problems.push("source");
  if (got.sentences.length !== want.sentences.length) return [...problems, "sentence count"];
  got.sentences.forEach((s, k) => {
    const w = want.sentences[k];
    if (s.source[0] !== w.source[0] || s.source[1] !== w.source[1]) problems.push(`sentence ${k} source range`);
    if (s.target[0] !== w.target[0] || s.target[1] !== w.target[1]) problems.push(`sentence ${k} target range`);
    if (JSON.stringify(boundsOf(s.sourceTokens)) !== JSON.stringify(want.source_tokens[k])) problems.push(`sentence ${k} source tokens`);
    if (JSON.stringify(boundsOf(s.targetTokens)) !== JSON.stringify(want.target_tokens[k])) problems.push(`sentence ${k} target tokens`);
  });
  if (request.alignment) {
    got.alignments.forEach((matrix, k) => {
      const rows = want.alignments[k];
      if (matrix.length !== rows.length || matrix.some((row, r) => row.length !== rows[r].length ||
                                                       row.some((v, c) => !sameNumber(v, rows[r][c], 1e-4))))
        problems.push(`sentence ${k} alignment`);
    });
  }
  if (request.qualityScores) {
    got.qualityScores.forEach((q, k) => {
      const w = want.quality[k];
      if (!close(q.sentenceScore, w.sentence_score, 1e-3)) problems.push(`sentence ${k} sentenceScore`);
      if (q.wordScores.length !== w.word_scores.length || q.wordScores.some((v, i) => !close(v, w.word_scores[i], 1e-3)))
        problems.push(`sentence ${k} wordScores`);
      if (JSON.stringify(q.wordTokenRanges) !== JSON.stringify(w.word_token_ranges)) problems.push(`sentence ${k} word tokens`);
    });
  }
  return problems;
}

// Structure that holds whatever the numbers: ranges inside their texts, one matrix row per
// target token and one column per source token, words inside their sentence.
function checkShape(request, got) {
  const sourceBytes = utf8.encode(got.source).length, targetBytes = utf8.encode(got.text).length;
  got.sentences.forEach((s, k) => {
    assert.ok(s.source[0] <= s.source[1] && s.source[1] <= sourceBytes);
    assert.ok(s.target[0] <= s.target[1] && s.target[1] <= targetBytes);
    if (request.alignment) {
      const matrix = got.alignments[k];
      assert.equal(matrix.length, s.targetTokens.length);
      for (const row of matrix) {
        assert.equal(row.length, s.sourceTokens.length);
        if (row.every(Number.isNaN)) continue;  // through an empty pivot token, as bergamot's
        assert.ok(close(row.reduce((a, b) => a + b, 0), 1, 1e-3), "an alignment row sums to 1");
      }
    }
    if (request.qualityScores) {
      const q = got.qualityScores[k];
      assert.equal(q.wordByteRanges.length, q.wordScores.length);
      assert.equal(q.wordTokenRanges.length, q.wordScores.length);
      for (const [b, e] of q.wordByteRanges) assert.ok(s.target[0] <= b && b <= e && e <= s.target[1]);
    }
  });
  assert.equal("alignments" in got, !!request.alignment);
  assert.equal("qualityScores" in got, !!request.qualityScores);
}

test("bergamot-style requests {text, html, qualityScores, alignment}: texts, sentences, alignments and scores equal bergamot's", async () => {
  const model = await petrel.loadModel(marianNative("transformer"));
  let compared = 0, equal = 0, html = 0, aligned = 0, scored = 0;
  const differing = [];
  fixture.requests.forEach((r, i) => {
    if (r.expect_error) return;
    const request = { text: r.text, html: r.html, qualityScores: r.qualityScores, alignment: r.alignment };
    const got = model.translateDetailedSync(request, BERGAMOT);  // one request per call, as the fixture's
    checkShape(request, got);
    const problems = differences(request, got, fixture.responses[i]);
    ++compared;
    html += r.html ? 1 : 0;
    aligned += r.alignment ? 1 : 0;
    scored += r.qualityScores ? 1 : 0;
    if (problems.length === 0) ++equal;
    else differing.push(`request ${i} (${r.kind}): ${problems.join(", ")}\n  petrel:   ${got.text}\n  bergamot: ${fixture.responses[i].text}`);
  });
  if (differing.length) console.log(`${differing.length} of ${compared} requests differ from bergamot's:\n${differing.join("\n")}`);
  assert.ok(compared >= 350 && html >= 300 && aligned >= 100 && scored >= 150, `${compared} ${html} ${aligned} ${scored}`);
  // The native build equals every one; WebAssembly's float32 may turn a rare near-tie.
  assert.ok(equal * 100 >= compared * 98, `${equal} of ${compared} equal bergamot's`);
  model.free();
});

test("the Firefox-shaped student with its shortlist: shortlistOfInput gives bergamot's outputs", async () => {
  // A model nobody wrote these fixtures for, float32, its shortlist as Firefox loads it: a
  // request's sentences decode over the union of their shortlists, as in bergamot's batch.
  const student = readFixture("firefox-student_float32");
  const model = await petrel.loadModel(convert("tools/firefox-student", "student-f32.petrel",
                                               ["--quantize", "f32", "--embeddings", "f32"]));
  const settings = { ...BERGAMOT, shortlist: true, shortlistOfInput: true };
  let compared = 0, equal = 0;
  const differing = [];
  student.requests.forEach((r, i) => {
    if (r.expect_error) return;
    const request = { text: r.text, html: r.html, qualityScores: r.qualityScores, alignment: r.alignment };
    const got = model.translateDetailedSync(request, settings);
    let problems = differences(request, got, student.responses[i]);
    // A score printed into the markup with another last digit (WebAssembly's float32 sums)
    // moves the byte ranges after it: those count only where the texts are byte-equal.
    if (got.text !== student.responses[i].text) problems = problems.filter((p) => !/target (range|tokens)/.test(p));
    ++compared;
    if (problems.length === 0) ++equal;
    else differing.push(`request ${i}: ${problems.join(", ")}`);
  });
  if (differing.length) console.log(`student: ${differing.length} of ${compared} differ:\n${differing.join("\n")}`);
  assert.ok(compared >= 350);
  assert.ok(equal * 100 >= compared * 98, `${equal} of ${compared} equal bergamot's`);
  model.free();
});

test("a call may mix strings and request objects: each gets its own options, in order, as alone", async () => {
  const model = await petrel.loadModel(marianNative("transformer"));
  const picked = fixture.requests.map((r, i) => ({ r, i })).filter(({ r }) => !r.expect_error).slice(0, 24);
  const requests = picked.map(({ r }, k) =>
    k % 4 === 3 ? r.text : { text: r.text, html: r.html, qualityScores: r.qualityScores, alignment: r.alignment });
  const together = model.translateDetailedSync(requests, BERGAMOT);
  assert.equal(together.length, requests.length);
  requests.forEach((request, k) => {
    const alone = model.translateDetailedSync(request, BERGAMOT);
    assert.deepEqual(together[k], alone, `request ${picked[k].i}`);
    if (typeof request === "string") assert.ok(!("alignments" in alone) && !("qualityScores" in alone));
  });
  // The call's options are the defaults a request object overrides.
  const [plain, scored] = model.translateDetailedSync(["Open the file.", { text: "Open the file.", qualityScores: false }],
                                                      { ...BERGAMOT, qualityScores: true });
  assert.equal(plain.qualityScores.length, plain.sentences.length);
  assert.ok(!("qualityScores" in scored));
  assert.equal(plain.text, scored.text);
  // translate() gives the texts; a single request object gives a single result.
  assert.equal(await model.translate({ text: "<b>Open</b> the file.", html: true }, BERGAMOT),
               model.translateDetailedSync({ text: "<b>Open</b> the file.", html: true }, BERGAMOT).text);
  // onToken reports each input by its index in the call, across the calls its groups make.
  const finals = [];
  model.translateDetailedSync(["Open the file", { text: "Save the file", alignment: true }, "Close it"],
                              { onToken: (e) => { if (e.final) finals.push(e.input); } });
  assert.deepEqual(finals.sort(), [0, 1, 2]);
  model.free();
});

test("plain text: sentences as byte ranges of the input and the translation; ssplitMode", async () => {
  const model = await petrel.loadModel(marianNative("transformer"));
  const text = "Öffne «the» file\nand save it.";
  const bytes = utf8.encode(text);
  const sentenceCount = (options) => model.translateDetailedSync(text, options).sentences.length;
  assert.equal(sentenceCount({}), 1);  // the default: the text as one unit
  assert.equal(sentenceCount({ splitSentences: true }), 1);  // a line break is a space
  assert.equal(sentenceCount({ ssplitMode: "sentence" }), 2);  // a line, a sentence
  assert.equal(sentenceCount({ ssplitMode: "paragraph" }), 2);
  assert.equal(sentenceCount({ ssplitMode: "wrapped_text" }), 1);  // the paragraph goes on over the line break
  const got = model.translateDetailedSync(text, { ssplitMode: "paragraph", alignment: true, qualityScores: true });
  assert.equal(got.source, text);
  const decode = (b, [begin, end]) => new TextDecoder().decode(b.subarray(begin, end));
  assert.deepEqual(got.sentences.map((s) => decode(bytes, s.source)), ["Öffne «the» file", "and save it."]);
  const target = utf8.encode(got.text);
  assert.equal(got.sentences.map((s) => decode(target, s.target)).join("\n"), got.text);
  for (const [k, s] of got.sentences.entries()) {
    // The tokens tile their sentence, the last of each side being the EOS (empty).
    assert.equal(s.sourceTokens[0][0], s.source[0]);
    assert.deepEqual(s.sourceTokens.at(-1), [s.source[1], s.source[1]]);
    assert.equal(boundsOf(s.targetTokens)[0], s.target[0]);
    assert.equal(boundsOf(s.targetTokens).at(-1), s.target[1]);
    checkShape({ alignment: true, qualityScores: true }, got);
    const q = got.qualityScores[k];
    const mean = q.wordScores.reduce((a, b) => a + b, 0) / q.wordScores.length;
    assert.ok(close(q.sentenceScore, mean, 1e-4), "the sentence score is the mean of its word scores");
  }
  model.free();
});

test("qualityModel: bergamot's logistic regression (.quality.lr bytes); a bad file is refused by name", async () => {
  const model = await petrel.loadModel(marianNative("transformer"));
  const corpus = path.join(SOURCE_DIR, "tests/fuzz/corpus/fuzz_quality_model");
  const lr = new Uint8Array(fs.readFileSync(path.join(corpus, "hand-valid.lr")));
  const text = "Open the file in a new window. Save all changes before you close it.";
  const free = model.translateDetailedSync(text, { ...BERGAMOT, qualityScores: true });
  const regression = model.translateDetailedSync(text, { ...BERGAMOT, qualityScores: true, qualityModel: lr });
  assert.equal(regression.qualityScores.length, free.qualityScores.length);
  for (const [k, q] of regression.qualityScores.entries()) {
    assert.equal(q.wordScores.length, free.qualityScores[k].wordScores.length);
    // log(1 - sigmoid(z)): a log-probability, where the free estimator gives this model's logits.
    for (const score of q.wordScores) assert.ok(score < 0 && Number.isFinite(score), `word score ${score}`);
    for (const score of free.qualityScores[k].wordScores) assert.ok(score > 0, `free word score ${score}`);
    const mean = q.wordScores.reduce((a, b) => a + b, 0) / q.wordScores.length;
    assert.ok(close(q.sentenceScore, mean, 1e-4));
  }
  const broken = new Uint8Array(fs.readFileSync(path.join(corpus, "hand-dims_0.lr")));
  assert.throws(() => model.translateSync(text, { qualityScores: true, qualityModel: broken }),
                (e) => e.code === "PETREL_FORMAT" && /qualityModel/.test(e.message) && /dims/.test(e.message));
  model.free();
});

test("bad html / quality / alignment / split options and request objects are refused", async () => {
  const model = await petrel.loadModel(marianNative("transformer"));
  const refused = (texts, options, pattern) =>
    assert.throws(() => model.translateSync(texts, options), (e) => e.code === "PETREL_INVALID_ARGUMENT" && pattern.test(e.message));
  refused("x", { html: "yes" }, /html must be a boolean/);
  refused("x", { qualityScores: 1 }, /qualityScores must be a boolean/);
  refused("x", { ssplitMode: "line" }, /ssplitMode must be "sentence", "paragraph" or "wrapped_text"/);
  refused("x", { maxLengthFactor: 0 }, /maxLengthFactor/);
  refused("x", { qualityModel: "model.quality.lr" }, /qualityModel must be the bytes/);
  refused("x", { limitByLongestSentence: "no" }, /limitByLongestSentence must be a boolean/);
  refused([{ text: "x", beam: 4 }], {}, /request 1: unknown field "beam"/);
  refused(["a", { html: true }], {}, /request 2: text is not a string/);
  refused([{ text: "x", alignment: "on" }], {}, /request 1: alignment must be a boolean/);
  refused({ text: "x", html: true }, { onToken: () => {} }, /onToken\) cannot be combined with html/);
  // A fragment bergamot aborts on is repaired (as a browser's parser would), not refused.
  const repaired = model.translateDetailedSync({ text: "<p>Open <b>the file</p>", html: true }, BERGAMOT);
  assert.match(repaired.source, /^<p>Open <b>the file<\/b><\/p>$/);
  model.free();
});

test("PetrelWorker: the same bergamot-style requests and results (alignments, quality scores) through a worker", async (t) => {
  const { PetrelWorker } = await import(packageUrl("petrel-worker-client.mjs"));
  const w = await PetrelWorker.create();
  t.after(() => w.terminate());
  const file = marianNative("transformer");
  const inWorker = await w.loadModel(file);
  const direct = await petrel.loadModel(file);
  const requests = fixture.requests.filter((r) => !r.expect_error).slice(0, 30)
    .map((r) => ({ text: r.text, html: r.html, qualityScores: r.qualityScores, alignment: r.alignment }));
  const lr = new Uint8Array(fs.readFileSync(path.join(SOURCE_DIR, "tests/fuzz/corpus/fuzz_quality_model/hand-valid.lr")));
  for (const options of [BERGAMOT, { ...BERGAMOT, qualityModel: lr }]) {
    const got = await inWorker.translateDetailed(requests, options);
    assert.deepEqual(got, direct.translateDetailedSync(requests, options));
    assert.ok(got.some((d) => d.alignments) && got.some((d) => d.qualityScores));
  }
  assert.equal(await w.translate({ text: "<b>Open</b> the file.", html: true }, BERGAMOT),
               direct.translateSync({ text: "<b>Open</b> the file.", html: true }, BERGAMOT));
  await assert.rejects(w.translate({ text: "x", html: 1 }), (e) => e.code === "PETREL_INVALID_ARGUMENT" && /html/.test(e.message));
  direct.free();
  w.terminate();
});

test("a model without token byte ranges (a Hugging Face Marian one): no sentences, html and quality refused", async () => {
  const model = await petrel.loadModel(enDeF32());
  const got = model.translateDetailedSync("Open the file", { alignment: true });
  assert.equal(got.text, "die Datei öffnen");
  assert.equal(got.source, "Open the file");
  assert.deepEqual([got.sentences, got.alignments], [[], []]);
  assert.throws(() => model.translateSync({ text: "<b>Open</b> the file", html: true }),
                (e) => e.code === "PETREL_UNSUPPORTED" && /html: this model's tokenizer does not give the byte ranges/.test(e.message));
  assert.throws(() => model.translateSync({ text: "Open the file", qualityScores: true }),
                (e) => e.code === "PETREL_UNSUPPORTED" && /quality_scores: this model's tokenizer does not give the byte ranges/.test(e.message));
  model.free();
});

// translateViaPivoting: the transformer model then the ssru one (both en->de toys: a
// mechanical test), against bergamot's responses in pivot-transformer-ssru_float32.json.
const pivotFixture = readFixture("pivot-transformer-ssru_float32");

test("secondModel (pivoting): texts, markup, sentences, alignments and scores equal bergamot's translateViaPivoting", async () => {
  const first = await petrel.loadModel(marianNative("transformer"));
  const second = await petrel.loadModel(marianNative("ssru"));
  let compared = 0, equal = 0, aligned = 0, scored = 0, nanRows = 0;
  const differing = [];
  pivotFixture.requests.forEach((r, i) => {
    if (r.expect_error) return;
    const request = { text: r.text, html: r.html, qualityScores: r.qualityScores, alignment: r.alignment };
    const got = first.translateDetailedSync(request, { ...BERGAMOT, secondModel: second });
    checkShape(request, got);
    const problems = differences(request, got, pivotFixture.responses[i]);
    ++compared;
    aligned += r.alignment ? 1 : 0;
    scored += r.qualityScores ? 1 : 0;
    if (r.alignment) nanRows += got.alignments.flat().filter((row) => row.every(Number.isNaN)).length;
    if (problems.length === 0) ++equal;
    else differing.push(`request ${i} (${r.kind}): ${problems.join(", ")}\n  petrel:   ${got.text}\n  bergamot: ${pivotFixture.responses[i].text}`);
  });
  console.log(`pivot: ${equal} of ${compared} requests equal bergamot's in every field`);
  if (differing.length) console.log(`${differing.length} of ${compared} pivot requests differ from bergamot's:\n${differing.join("\n")}`);
  assert.ok(compared >= 350 && aligned >= 100 && scored >= 150, `${compared} ${aligned} ${scored}`);
  assert.ok(nanRows > 0, "bergamot's NaN rows (an empty pivot token) are reproduced");
  assert.ok(equal * 100 >= compared * 98, `${equal} of ${compared} equal bergamot's`);
  first.free();
  second.free();
});

test("secondModel: a batch of requests equals them one by one; bad second models are refused", async () => {
  const first = await petrel.loadModel(marianNative("transformer"));
  const second = await petrel.loadModel(marianNative("ssru"));
  const requests = pivotFixture.requests.filter((r) => !r.expect_error).slice(0, 20)
    .map((r) => ({ text: r.text, html: r.html, qualityScores: r.qualityScores, alignment: r.alignment }));
  const together = first.translateDetailedSync(requests, { ...BERGAMOT, secondModel: second });
  requests.forEach((request, k) => assert.deepEqual(together[k], first.translateDetailedSync(request, { ...BERGAMOT, secondModel: second })));
  // A model may be its own second (source -> source' -> source'').
  assert.equal(typeof first.translateSync("Open the file.", { secondModel: first }), "string");
  const refused = (options, code, pattern) =>
    assert.throws(() => first.translateSync("Open the file.", options), (e) => e.code === code && pattern.test(e.message));
  refused({ secondModel: "ssru" }, "PETREL_INVALID_ARGUMENT", /secondModel must be a PetrelModel/);
  refused({ secondModel: second, onToken: () => {} }, "PETREL_INVALID_ARGUMENT", /onToken cannot be combined with a secondModel/);
  const other = await loadPetrel({ wasmModule: petrel.wasmModule });
  const elsewhere = await other.loadModel(marianNative("ssru"));
  refused({ secondModel: elsewhere }, "PETREL_INVALID_ARGUMENT", /another Petrel instance/);
  other.dispose();
  // Models without token byte ranges cannot pivot, first or second.
  const hf = await petrel.loadModel(enDeF32());
  refused({ secondModel: hf }, "PETREL_UNSUPPORTED", /the second model's tokenizer does not give the byte ranges/);
  assert.throws(() => hf.translateSync("Open the file.", { secondModel: second }),
                (e) => e.code === "PETREL_UNSUPPORTED" && /the first model's tokenizer does not give the byte ranges/.test(e.message));
  hf.free();
  second.free();
  refused({ secondModel: second }, "PETREL_INVALID_ARGUMENT", /freed/);
  first.free();
});

test("PetrelWorker: secondModel (pivoting) gives the same results as in this thread", async (t) => {
  const { PetrelWorker } = await import(packageUrl("petrel-worker-client.mjs"));
  const w = await PetrelWorker.create();
  const other = await PetrelWorker.create();
  t.after(() => { w.terminate(); other.terminate(); });
  const [first, second] = [await w.loadModel(marianNative("transformer")), await w.loadModel(marianNative("ssru"))];
  const [directFirst, directSecond] = [await petrel.loadModel(marianNative("transformer")), await petrel.loadModel(marianNative("ssru"))];
  const requests = pivotFixture.requests.filter((r) => !r.expect_error).slice(0, 30)
    .map((r) => ({ text: r.text, html: r.html, qualityScores: r.qualityScores, alignment: r.alignment }));
  const got = await first.translateDetailed(requests, { ...BERGAMOT, secondModel: second });
  assert.deepEqual(got, directFirst.translateDetailedSync(requests, { ...BERGAMOT, secondModel: directSecond }));
  // The worker client's own checks: a model of this worker, not freed.
  await assert.rejects(first.translate("x", { secondModel: directSecond }), /secondModel must be a PetrelWorkerModel/);
  const foreign = await other.loadModel(marianNative("ssru"));
  await assert.rejects(first.translate("x", { secondModel: foreign }), /another PetrelWorker/);
  await second.free();
  await assert.rejects(first.translate("x", { secondModel: second }), /freed/);
  directFirst.free();
  directSecond.free();
});
