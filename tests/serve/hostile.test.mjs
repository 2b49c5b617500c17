// petrel-serve against hostile or broken HTTP: huge bodies, malformed and deep JSON,
// invalid UTF-8, truncated requests, slow clients, clients that leave, a full queue, a
// deadline, and a graceful shutdown with work in progress.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';

import { models, postJson, sleep, startServer, testSentences, tools } from './harness.mjs';

let server, m;
before(async () => {
  m = models();
  // A short read deadline so that slow clients are cut within the test's time.
  server = await startServer(['--model', `en-de=${m['en-de']}`, '--model', `chat=${m.chat}`, '--read-timeout', '2',
                              '--max-body', '1000000']);
});
after(async () => {
  const { code } = await server.stop();
  assert.equal(code, 0, server.stderr);
});

// Sends `chunks` (strings or Buffers, `gapMs` apart) on a raw connection, optionally
// half-closes, and resolves with everything the server sent until it closed.
function raw(port, chunks, { gapMs = 0, halfClose = false } = {}) {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let received = '';
    let closed = false;
    socket.on('data', (d) => { received += d.toString('latin1'); });
    socket.on('error', () => {});
    socket.on('close', () => { closed = true; resolve(received); });
    socket.on('connect', async () => {
      for (const chunk of chunks) {
        if (closed) return;
        socket.write(chunk);
        if (gapMs) await sleep(gapMs);
      }
      if (halfClose && !closed) socket.end();
    });
  });
}
const status = (response) => Number(/^HTTP\/1\.1 (\d+)/.exec(response)?.[1] ?? 0);
const body = (response) => JSON.parse(response.slice(response.indexOf('\r\n\r\n') + 4));

const chat = { model: 'chat', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 };

describe('bodies', () => {
  test('a body over --max-body is 413, declared or chunked, and the server goes on', async () => {
    const declared = await raw(server.port, [`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 50000000\r\n\r\n{`]);
    assert.equal(status(declared), 413);
    assert.equal(body(declared).error.code, 'request_too_large');
    const chunk = 'x'.repeat(65536);
    const chunks = [`POST /translate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n`];
    for (let i = 0; i < 40; i++) chunks.push(`${chunk.length.toString(16)}\r\n${chunk}\r\n`);
    const chunked = await raw(server.port, chunks);
    assert.equal(status(chunked), 413);
    assert.equal(typeof body(chunked).error, 'string');
    assert.equal((await postJson(`${server.url}/v1/chat/completions`, chat)).status, 200);
  });

  test('malformed JSON, JSON nested past the limit, invalid UTF-8: 400 in each API\'s shape', async () => {
    const malformed = await fetch(`${server.url}/v1/chat/completions`, { method: 'POST', body: '{"model": "chat", "messages": [' });
    assert.equal(malformed.status, 400);
    assert.match((await malformed.json()).error.message, /not valid JSON/);
    const deep = '['.repeat(200000) + ']'.repeat(200000);
    for (const path of ['/v1/chat/completions', '/translate']) {
      const r = await fetch(`${server.url}${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: deep });
      assert.equal(r.status, 400);
      const error = (await r.json()).error;
      assert.match(typeof error === 'string' ? error : error.message, /deeper than 64/);
    }
    const bytes = Buffer.concat([Buffer.from('{"model": "chat", "messages": [{"role": "user", "content": "'),
                                 Buffer.from([0xc3, 0x28, 0xff]), Buffer.from('"}]}')]);
    const utf8 = await fetch(`${server.url}/v1/chat/completions`, { method: 'POST', body: bytes });
    assert.equal(utf8.status, 400);
    assert.match((await utf8.json()).error.message, /UTF-8/);
    const form = await fetch(`${server.url}/translate`, {
      method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded' }, body: 'q=%C3%28&source=en&target=de' });
    assert.equal(form.status, 400);
    const lone = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST', body: '{"model": "chat", "messages": [{"role": "user", "content": "\\ud800"}]}' });
    assert.equal(lone.status, 400);
  });

  test('a truncated request (the client stops sending) is 400 and the connection is closed', async () => {
    const r = await raw(server.port, [`POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{"q": "a`],
                        { halfClose: true });
    assert.equal(status(r), 400);
    const cut = await raw(server.port, ['POST /translate HTTP/1.1\r\nHost: x\r\nContent-Le'], { halfClose: true });
    assert.ok(cut === '' || status(cut) === 400, cut);
    assert.equal((await fetch(`${server.url}/health`)).status, 200);
  });

  test('garbage instead of HTTP is 400, and headers past the limit 431', async () => {
    assert.equal(status(await raw(server.port, ['\x16\x03\x01 not http at all\r\n\r\n'])), 400);
    const headers = 'X-Filler: ' + 'a'.repeat(100) + '\r\n';
    assert.equal(status(await raw(server.port, ['GET /health HTTP/1.1\r\nHost: x\r\n' + headers.repeat(1000) + '\r\n'])), 431);
  });
});

describe('slow clients', () => {
  test('slowloris: clients dripping their headers or body are cut at --read-timeout, others are served meanwhile', async () => {
    const drips = [];
    for (let i = 0; i < 8; i++) {
      const drip = Array(80).fill('X');  // a byte every 100 ms: never idle long, never done
      drips.push(raw(server.port, ['POST /translate HTTP/1.1\r\nHost: x\r\nX-Slow: ', ...drip], { gapMs: 100 }));
      drips.push(raw(server.port, ['POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{', ...drip],
                     { gapMs: 100 }));
    }
    await sleep(300);
    const meanwhile = await postJson(`${server.url}/translate`, { q: 'Current password:', source: 'en', target: 'de' });
    assert.equal(meanwhile.status, 200);
    for (const r of await Promise.all(drips)) assert.equal(status(r), 408, r);  // each cut before its 8 s of drip
  });
});

describe('load shedding and cancellation', () => {
  const sentences = testSentences();

  test('a full translation queue answers 429 with Retry-After; the queued work is still done', async () => {
    const small = await startServer(['--model', `en-de=${m['en-de']}`, '--queue', '1']);
    try {
      const request = { q: sentences.slice(0, 300), source: 'en', target: 'de' };
      const first = postJson(`${small.url}/translate`, request);  // running
      await sleep(300);
      const more = await Promise.all([1, 2, 3].map(() => postJson(`${small.url}/translate`, request)));
      const refused = more.filter((r) => r.status === 429);
      assert.ok(refused.length >= 1, more.map((r) => r.status).join(' '));
      for (const r of refused) {
        assert.equal(r.headers.get('retry-after'), '1');
        assert.match(r.json.error, /Slow down/);
      }
      assert.equal((await first).status, 200);
      for (const r of more.filter((x) => x.status !== 429)) assert.equal(r.status, 200);
    } finally {
      assert.equal((await small.stop()).code, 0, small.stderr);
    }
  });

  test('--timeout: a request not done in time is 503 and its work is stopped', async () => {
    const hurried = await startServer(['--model', `en-de=${m['en-de']}`, '--timeout', '1']);
    try {
      const r = await postJson(`${hurried.url}/translate`, { q: sentences.slice(0, 1000), source: 'en', target: 'de' });
      assert.equal(r.status, 503);
      assert.match(r.json.error, /not done within 1 seconds/);
      // The next request runs once the stopped call has ended (one worker).
      assert.equal((await postJson(`${hurried.url}/translate`, { q: 'x', source: 'en', target: 'de' })).status, 200);
      const stats = await (await fetch(`${hurried.url}/stats`)).json();
      assert.ok(stats.models['en-de'].translated < 1000, JSON.stringify(stats));  // the call stopped early
      assert.equal(stats.models['en-de'].cancelled, 1);
    } finally {
      assert.equal((await hurried.stop()).code, 0, hurried.stderr);
    }
  });

  test('a client that disconnects has its translation cancelled', async () => {
    const s = await startServer(['--model', `en-de=${m['en-de']}`]);
    try {
      const controller = new AbortController();
      const request = fetch(`${s.url}/translate`, {
        method: 'POST', headers: { 'Content-Type': 'application/json' }, signal: controller.signal,
        body: JSON.stringify({ q: sentences.slice(0, 1000), source: 'en', target: 'de' }) }).catch((e) => e);
      await sleep(500);
      controller.abort();
      assert.equal((await request).name, 'AbortError');
      // The next request runs once the cancelled call has stopped.
      assert.equal((await postJson(`${s.url}/translate`, { q: 'Current password:', source: 'en', target: 'de' })).status, 200);
      const stats = (await (await fetch(`${s.url}/stats`)).json()).models['en-de'];
      assert.ok(stats.translated < 1000, JSON.stringify(stats));
      assert.equal(stats.cancelled, 1);
    } finally {
      assert.equal((await s.stop()).code, 0, s.stderr);
    }
  });

  test('SIGTERM: work in progress finishes, new requests get 503, exit status 0', async () => {
    const s = await startServer(['--model', `en-de=${m['en-de']}`]);
    const running = postJson(`${s.url}/translate`, { q: sentences.slice(0, 200), source: 'en', target: 'de' });
    await sleep(300);
    s.child.kill('SIGTERM');
    await sleep(200);
    const refused = await postJson(`${s.url}/translate`, { q: 'x', source: 'en', target: 'de' });
    assert.equal(refused.status, 503);
    assert.match(refused.json.error, /shutting down/);
    const done = await running;
    assert.equal(done.status, 200);
    assert.equal(done.json.translatedText.length, 200);
    assert.equal((await s.exited).code, 0);
  });

  test('a model that does not load: the error names it and the server exits 1 (it bound its port first)', async () => {
    const child = spawn(tools.serve, ['--port', '0', '--model', 'x=/nonexistent/model.petrel'],
                        { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (d) => { stderr += d; });
    const code = await new Promise((resolve) => child.on('exit', resolve));
    assert.equal(code, 1);
    assert.match(stderr, /--model x: \/nonexistent\/model\.petrel/);
  });
});
