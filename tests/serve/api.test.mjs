// petrel-serve's APIs through real clients: the official `openai` package for the language
// model, plain fetch for LibreTranslate's; every answer compared with what petrel-run gives
// for the same request.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';

import { models, petrelRun, postJson, startServer, testSentences, translateLines } from './harness.mjs';

let server, m, client;
before(async () => {
  m = models();
  server = await startServer(['--model', `en-de=${m['en-de']}`, '--model', `chat=${m.chat}`, '--model', `m2m100=${m.m2m100}`]);
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
});
after(async () => {
  const { code } = await server.stop();
  assert.equal(code, 0, server.stderr);
});

// petrel-run --chat's reply to one user message (greedy: the model's generation_config).
function chatOracle(message, maxNewTokens, system) {
  const args = [m.chat, '--chat', '--json-lines', '--max-new-tokens', String(maxNewTokens)];
  if (system) args.push('--system', system);
  return JSON.parse(petrelRun(args, `${message}\n`).trim().split('\n')[0]);
}
function promptOracle(prompt, args = []) {
  const out = JSON.parse(petrelRun([m.chat, '--prompt', prompt, '--json', ...args]));
  return { ...out.results[0].hypotheses[0], prompt_tokens: out.results[0].prompt_tokens };
}

describe('OpenAI chat completions (openai client)', () => {
  test('a reply equals petrel-run --chat, usage counts its tokens', async () => {
    for (const [message, system] of [['hello there', undefined], ['what is the time', 'Answer briefly.']]) {
      const messages = [...(system ? [{ role: 'system', content: system }] : []), { role: 'user', content: message }];
      const r = await client.chat.completions.create({ model: 'chat', messages, max_tokens: 12 });
      const expected = chatOracle(message, 12, system);
      assert.equal(r.object, 'chat.completion');
      assert.equal(r.model, 'chat');
      assert.equal(r.choices.length, 1);
      assert.equal(r.choices[0].message.role, 'assistant');
      assert.equal(r.choices[0].message.content, expected.text);
      assert.equal(r.choices[0].finish_reason, expected.ended_on_eos || expected.ended_on_stop ? 'stop' : 'length');
      assert.equal(r.usage.prompt_tokens, expected.prompt_tokens);
      assert.equal(r.usage.completion_tokens, expected.ids.length);
      assert.equal(r.usage.total_tokens, expected.prompt_tokens + expected.ids.length);
    }
  });

  test('streamed: the deltas add up to the reply, then finish_reason, usage and [DONE]', async () => {
    const request = { model: 'chat', messages: [{ role: 'user', content: 'tell me more' }], max_tokens: 20 };
    const whole = await client.chat.completions.create(request);
    const stream = await client.chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
    let text = '', role = null, finish = null, usage = null, chunks = 0;
    for await (const chunk of stream) {
      chunks++;
      assert.equal(chunk.object, 'chat.completion.chunk');
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) {
        if (c.delta.role) role = c.delta.role;
        text += c.delta.content ?? '';
        if (c.finish_reason) finish = c.finish_reason;
      }
    }
    assert.ok(chunks >= 3);
    assert.equal(role, 'assistant');
    assert.equal(text, whole.choices[0].message.content);
    assert.equal(finish, whole.choices[0].finish_reason);
    assert.deepEqual(usage, whole.usage);
  });

  test('a conversation with earlier turns is rendered by the chat template', async () => {
    const r = await client.chat.completions.create({
      model: 'chat', max_tokens: 8,
      messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'hello' }, { role: 'user', content: 'more' }],
    });
    const single = await client.chat.completions.create({ model: 'chat', max_tokens: 8, messages: [{ role: 'user', content: 'more' }] });
    assert.ok(r.usage.prompt_tokens > single.usage.prompt_tokens);
  });

  test('n choices sample with seed, seed + 1, ...: each equals petrel-run with that seed', async () => {
    const r = await client.completions.create({ model: 'chat', prompt: 'once upon', max_tokens: 10, n: 3, temperature: 1, seed: 40 });
    assert.equal(r.choices.length, 3);
    for (const [i, choice] of r.choices.entries()) {
      assert.equal(choice.index, i);
      const expected = promptOracle('once upon', ['--max-new-tokens', '10', '--sample', '--temperature', '1', '--seed', String(40 + i)]);
      assert.equal(choice.text, expected.text);
    }
  });

  test('stop strings end the text before them, as petrel-run --stop', async () => {
    const free = promptOracle('hello world', ['--max-new-tokens', '16']);
    const stop = free.text.slice(2, 4);
    assert.ok(stop.length === 2, `the free text is long enough: ${JSON.stringify(free.text)}`);
    const expected = promptOracle('hello world', ['--max-new-tokens', '16', '--stop', stop]);
    const r = await client.completions.create({ model: 'chat', prompt: 'hello world', max_tokens: 16, stop: [stop] });
    assert.equal(r.choices[0].text, expected.text);
    assert.equal(r.choices[0].finish_reason, 'stop');
  });
});

describe('OpenAI completions (openai client)', () => {
  test('a prompt continues as petrel-run --prompt; a list of prompts gives a choice each, in order', async () => {
    const prompts = ['hello world', 'the cat sat', 'abc'];
    const r = await client.completions.create({ model: 'chat', prompt: prompts, max_tokens: 9 });
    assert.equal(r.object, 'text_completion');
    assert.equal(r.choices.length, prompts.length);
    let promptTokens = 0, completionTokens = 0;
    for (const [i, p] of prompts.entries()) {
      const expected = promptOracle(p, ['--max-new-tokens', '9']);
      assert.equal(r.choices[i].index, i);
      assert.equal(r.choices[i].text, expected.text);
      promptTokens += expected.prompt_tokens;
      completionTokens += expected.ids.length;
    }
    assert.deepEqual(r.usage, { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens });
  });

  test('streamed completions add up to the whole one', async () => {
    const whole = await client.completions.create({ model: 'chat', prompt: 'stream me', max_tokens: 15 });
    let text = '', finish = null;
    for await (const chunk of await client.completions.create({ model: 'chat', prompt: 'stream me', max_tokens: 15, stream: true })) {
      assert.equal(chunk.object, 'text_completion');
      text += chunk.choices[0]?.text ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    assert.equal(text, whole.choices[0].text);
    assert.equal(finish, whole.choices[0].finish_reason);
  });

  test('GET /v1/models lists every model; one can be retrieved', async () => {
    const ids = [];
    for await (const model of client.models.list()) ids.push(model.id);
    assert.deepEqual(ids.sort(), ['chat', 'en-de', 'm2m100']);
    const chat = await client.models.retrieve('chat');
    assert.equal(chat.id, 'chat');
    assert.equal(chat.object, 'model');
  });
});

describe('OpenAI errors: status and {error: {message, type, param, code}}', () => {
  async function failure(promise) {
    try {
      await promise;
    } catch (e) {
      return e;
    }
    assert.fail('the request succeeded');
  }
  test('an unknown model is 404 model_not_found', async () => {
    const e = await failure(client.chat.completions.create({ model: 'nope', messages: [{ role: 'user', content: 'x' }] }));
    assert.equal(e.status, 404);
    assert.equal(e.code, 'model_not_found');
    assert.equal(e.param, 'model');
    assert.match(e.message, /nope/);
  });
  test('a field of the wrong type is 400 naming it; unknown fields are ignored', async () => {
    const e = await failure(client.chat.completions.create({ model: 'chat', messages: [{ role: 'user', content: 'x' }], max_tokens: 'ten' }));
    assert.equal(e.status, 400);
    assert.equal(e.param, 'max_tokens');
    assert.equal(e.type, 'invalid_request_error');
    const e2 = await failure(client.chat.completions.create({ model: 'chat', messages: [{ role: 7, content: 'x' }] }));
    assert.equal(e2.param, 'messages[0].role');
    const ok = await client.chat.completions.create({ model: 'chat', messages: [{ role: 'user', content: 'x' }], max_tokens: 2, some_future_field: { a: 1 } });
    assert.equal(ok.choices.length, 1);
  });
  test('a translation model is not a chat model; an unknown route is 404 in the same shape', async () => {
    const e = await failure(client.chat.completions.create({ model: 'en-de', messages: [{ role: 'user', content: 'x' }] }));
    assert.equal(e.status, 400);
    assert.equal(e.param, 'model');
    const r = await fetch(`${server.url}/v1/embeddings`, { method: 'POST', body: '{}' });
    assert.equal(r.status, 404);
    const body = await r.json();
    assert.equal(typeof body.error.message, 'string');
    assert.ok('type' in body.error && 'param' in body.error && 'code' in body.error);
  });
  test('a JSON schema keyword outside the supported subset is 400 naming response_format', async () => {
    const e = await failure(client.chat.completions.create({
      model: 'chat', messages: [{ role: 'user', content: 'x' }],
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', patternProperties: { a: {} } } } },
    }));
    assert.equal(e.status, 400);
    assert.equal(e.param, 'response_format');
    assert.match(e.message, /patternProperties/);
  });
  test('more sequences than the queue holds is 400 naming n; a full queue is 503 queue_full with Retry-After', async () => {
    const r = await postJson(`${server.url}/v1/completions`, { model: 'chat', prompt: Array(16).fill('x'), n: 16, max_tokens: 1 });
    assert.equal(r.status, 400);
    assert.equal(r.json.error.param, 'n');
    const small = await startServer(['--model', `chat=${m.chat}`, '--queue', '1']);
    try {
      // A burst of long generations on one queued sequence at a time: some find it full.
      const burst = await Promise.all(Array.from({ length: 40 }, (_, i) =>
        postJson(`${small.url}/v1/completions`, { model: 'chat', prompt: `burst ${i}`, max_tokens: 400 })));
      const refused = burst.filter((b) => b.status === 503);
      assert.ok(refused.length > 0, 'the queue of one was full at least once');
      for (const b of burst) assert.ok(b.status === 200 || b.status === 503, b.text);
      for (const b of refused) {
        assert.equal(b.headers.get('retry-after'), '1');
        assert.equal(b.json.error.code, 'queue_full');
        assert.equal(b.json.error.type, 'unavailable_error');
      }
    } finally {
      assert.equal((await small.stop()).code, 0);
    }
  });
});

describe('LibreTranslate', () => {
  const sentences = testSentences().slice(0, 24);
  let expected;
  before(() => { expected = translateLines(m['en-de'], sentences); });

  test('q as a string and as a list: the same translations as petrel-run, in order', async () => {
    const one = await postJson(`${server.url}/translate`, { q: sentences[0], source: 'en', target: 'de' });
    assert.equal(one.status, 200);
    assert.deepEqual(one.json, { translatedText: expected[0] });
    const list = await postJson(`${server.url}/translate`, { q: sentences, source: 'en', target: 'de', format: 'text' });
    assert.equal(list.status, 200);
    assert.deepEqual(list.json.translatedText, expected);
  });

  test('form-encoded fields, as LibreTranslate takes them', async () => {
    const r = await fetch(`${server.url}/translate`, {
      method: 'POST',
      body: new URLSearchParams({ q: sentences[3], source: 'en', target: 'de' }),
    });
    assert.equal(r.status, 200);
    assert.deepEqual(await r.json(), { translatedText: expected[3] });
  });

  test('alternatives are the other hypotheses of a beam of alternatives + 1', async () => {
    const r = await postJson(`${server.url}/translate`, { q: sentences[1], source: 'en', target: 'de', alternatives: 2 });
    const beam = JSON.parse(petrelRun([m['en-de'], '--json-lines', '--beam', '3', '--n-best', '3'], `${sentences[1]}\n`).split('\n')[0]);
    assert.equal(r.json.translatedText, beam.hypotheses[0].text);
    assert.deepEqual(r.json.alternatives, beam.hypotheses.slice(1).map((h) => h.text));
  });

  test('GET /languages: the pair of en-de and the 100 languages of a multilingual file', async () => {
    const languages = await (await fetch(`${server.url}/languages`)).json();
    const en = languages.find((l) => l.code === 'en');
    assert.equal(en.name, 'English');
    assert.ok(en.targets.includes('de') && en.targets.includes('fr'));
    assert.equal(languages.length, 100);
    for (const l of languages) assert.ok(Array.isArray(l.targets) && typeof l.name === 'string');
  });

  test('a multilingual model translates a pair it records, as petrel-run with its codes', async () => {
    const r = await postJson(`${server.url}/translate`, { q: 'hello world', source: 'en', target: 'fr' });
    const expectedText = translateLines(m.m2m100, ['hello world'], ['--source-lang', '__en__', '--target-lang', '__fr__'])[0];
    assert.equal(r.status, 200);
    assert.equal(r.json.translatedText, expectedText);
  });

  test('errors are {"error": "..."}: unserved pairs, auto with many sources, missing q, html without byte ranges', async () => {
    for (const [body, pattern] of [
      [{ q: 'x', source: 'en', target: 'xx' }, /not served/],
      [{ q: 'x', source: 'auto', target: 'de' }, /does not detect languages/],
      [{ source: 'en', target: 'de' }, /missing q/],
      [{ q: 'x', source: 'en', target: 'de', format: 'html' }, /cannot put markup back/],
      [{ q: [1, 2], source: 'en', target: 'de' }, /q: expected/],
    ]) {
      const r = await postJson(`${server.url}/translate`, body);
      assert.equal(r.status, 400, r.text);
      assert.match(r.json.error, pattern);
    }
  });
});

describe('one server, other settings', () => {
  test('HTML (a Marian C++ model) as petrel-run --html; auto is the one source served', async () => {
    const html = await startServer(['--model', `en-de=${m.firefox}`]);
    try {
      const fragments = ['<p>Cannot open the <b>file</b>.</p>', 'Current <i>password</i>:'];
      const expected = translateLines(m.firefox, fragments, ['--html']);
      const r = await postJson(`${html.url}/translate`, { q: fragments, source: 'auto', target: 'de', format: 'html' });
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(r.json.translatedText, expected);
      assert.deepEqual(r.json.detectedLanguage, { language: 'en', confidence: 100 });
    } finally {
      assert.equal((await html.stop()).code, 0);
    }
  });

  test('--api-key: Bearer for OpenAI (401 otherwise), api_key for LibreTranslate (403 otherwise); /health open', async () => {
    const keyed = await startServer(['--api-key', 'sesame', '--model', `en-de=${m['en-de']}`, '--model', `chat=${m.chat}`]);
    try {
      assert.equal((await fetch(`${keyed.url}/health`)).status, 200);
      const wrong = new OpenAI({ baseURL: `${keyed.url}/v1`, apiKey: 'wrong', maxRetries: 0 });
      await assert.rejects(wrong.models.list(), (e) => e.status === 401 && e.code === 'invalid_api_key');
      const right = new OpenAI({ baseURL: `${keyed.url}/v1`, apiKey: 'sesame', maxRetries: 0 });
      const r = await right.chat.completions.create({ model: 'chat', messages: [{ role: 'user', content: 'x' }], max_tokens: 2 });
      assert.equal(r.choices.length, 1);
      const refused = await postJson(`${keyed.url}/translate`, { q: 'x', source: 'en', target: 'de', api_key: 'wrong' });
      assert.equal(refused.status, 403);
      assert.equal(typeof refused.json.error, 'string');
      const allowed = await postJson(`${keyed.url}/translate`, { q: 'x', source: 'en', target: 'de', api_key: 'sesame' });
      assert.equal(allowed.status, 200);
    } finally {
      assert.equal((await keyed.stop()).code, 0);
    }
  });
});
