// petrel-serve under load (autocannon, 8 connections): no error, no lost answer, and every
// answer equal to what the same request gets alone -- translation requests batched
// together by the server, and language-model requests queued.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { load } from './load.mjs';
import { models, postJson, startServer, testSentences, translateLines } from './harness.mjs';

let server, m;
before(async () => {
  m = models();
  server = await startServer(['--model', `en-de=${m['en-de']}`, '--model', `chat=${m.chat}`]);
});
after(async () => {
  const { code } = await server.stop();
  assert.equal(code, 0, server.stderr);
});

test('translation: every answer under load equals the request alone (and petrel-run)', async () => {
  const sentences = testSentences().slice(100, 148);
  // Varied requests: one sentence, or a list of one to three.
  const bodies = sentences.map((s, i) => ({
    q: i % 3 === 0 ? s : sentences.slice(i, i + 1 + (i % 3)),
    source: 'en',
    target: 'de',
  }));
  const alone = [];
  for (const body of bodies) alone.push((await postJson(`${server.url}/translate`, body)).json.translatedText);
  const oracle = translateLines(m['en-de'], sentences);
  bodies.forEach((b, i) => assert.deepEqual(alone[i], Array.isArray(b.q) ? oracle.slice(i, i + b.q.length) : oracle[i]));

  const r = await load({ url: server.url, path: '/translate', bodies, expected: alone, answer: (j) => j.translatedText,
                         connections: 8, seconds: 5 });
  assert.equal(r.errors, 0);
  assert.equal(r.timeouts, 0);
  assert.equal(r.non2xx, 0);
  assert.ok(r.checked > 0 && r.checked === r.ok, JSON.stringify(r));
  assert.equal(r.mismatches, 0, JSON.stringify(r.firstMismatch));
  const stats = (await (await fetch(`${server.url}/stats`)).json()).models['en-de'];
  assert.ok(stats.texts_per_call > 1, `requests were batched together: ${JSON.stringify(stats)}`);
});

test('chat completions: every answer under load equals the request alone', async () => {
  const words = ['hello', 'tell me', 'what now', 'a story', 'why', 'again', 'more please', 'the end'];
  const bodies = words.map((w, i) => ({ model: 'chat', messages: [{ role: 'user', content: w }], max_tokens: 4 + i }));
  const alone = [];
  for (const body of bodies) alone.push((await postJson(`${server.url}/v1/chat/completions`, body)).json.choices[0].message.content);
  const r = await load({ url: server.url, path: '/v1/chat/completions', bodies, expected: alone,
                         answer: (j) => j.choices[0].message.content, connections: 8, seconds: 3 });
  assert.equal(r.errors, 0);
  assert.equal(r.timeouts, 0);
  assert.equal(r.non2xx, 0);
  assert.ok(r.checked > 0 && r.checked === r.ok, JSON.stringify(r));
  assert.equal(r.mismatches, 0, JSON.stringify(r.firstMismatch));
});
