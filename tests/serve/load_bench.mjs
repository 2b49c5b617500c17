// The serving bench: autocannon against petrel-serve's /translate with real sentences
// (tests/fixtures/en-de/test.en, one per request, in turn), batched (the default) and one
// sentence at a time (--max-batch 1), each answer checked against petrel-run's translation.
// With --lm FILE, against /v1/chat/completions on that language model instead: greedy
// replies of --max-tokens tokens to the same sentences as user messages, each checked
// against the reply the server gave that request alone before the load.
//   node tests/serve/load_bench.mjs [--connections 32] [--seconds 60] [--threads 1] [--lm FILE [--max-tokens 32]]
//        [-- extra petrel-serve flags]
// Tools from PETREL_TOOLS_DIR (default build/release/tools). Prints one JSON object.
import fs from 'node:fs';
import os from 'node:os';

import { load } from './load.mjs';
import { models, startServer, testSentences, translateLines } from './harness.mjs';

const args = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
};
const connections = Number(flag('connections', 32));
const seconds = Number(flag('seconds', 60));
const threads = flag('threads', '1');
const extra = args.includes('--') ? args.slice(args.indexOf('--') + 1) : [];
const lm = flag('lm', null);
const maxTokens = Number(flag('max-tokens', 32));

// The server's CPU seconds so far (all its threads; Linux): on a machine shared with other
// work, sentences per CPU second compare the two settings where wall time cannot.
function cpuSeconds(pid) {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;  // utime + stime, in ticks of 1/100 s
}

const m = lm ? { lm } : models();
const sentences = lm ? testSentences().slice(0, 64) : testSentences();
const modelName = lm ? 'lm' : 'en-de';
const path = lm ? '/v1/chat/completions' : '/translate';
const bodies = lm ? sentences.map((s) => ({ model: 'lm', messages: [{ role: 'user', content: s }], max_tokens: maxTokens,
                                            temperature: 0 }))
                  : sentences.map((q) => ({ q, source: 'en', target: 'de' }));
const answer = lm ? (j) => j.choices[0].message.content : (j) => j.translatedText;
let expected = lm ? null : translateLines(m['en-de'], sentences);

const runs = {};
for (const [name, serveFlags] of [['batched', []], ['one_at_a_time', ['--max-batch', '1']]]) {
  const server = await startServer(['--model', `${modelName}=${m[modelName]}`, '--threads', threads, '--queue', '1024',
                                    ...serveFlags, ...extra]);
  if (!expected) {  // each request alone, one after another
    expected = [];
    for (const body of bodies) {
      const reply = await fetch(`${server.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' },
                                                           body: JSON.stringify(body) });
      expected.push(answer(await reply.json()));
    }
  }
  const cpuBefore = cpuSeconds(server.child.pid);
  const r = await load({ url: server.url, path, bodies, expected, answer, connections, seconds });
  const cpu = cpuSeconds(server.child.pid) - cpuBefore;
  const stats = (await (await fetch(`${server.url}/stats`)).json()).models[modelName];
  await server.stop();
  runs[name] = { flags: serveFlags, ...r, sentences_per_second: r.ok / seconds, server_cpu_seconds: cpu,
                 sentences_per_cpu_second: r.ok / cpu, texts_per_engine_call: stats.texts_per_call };
  delete runs[name].firstMismatch;
  if (r.firstMismatch) runs[name].first_mismatch = r.firstMismatch;
}
console.log(JSON.stringify({
  host: { cpu: os.cpus()[0]?.model, cores: os.cpus().length },
  connections, seconds, threads, sentences: sentences.length,
  ...runs,
  load_average: os.loadavg(),
  batching_speedup: runs.batched.sentences_per_second / runs.one_at_a_time.sentences_per_second,
  batching_speedup_per_cpu_second: runs.batched.sentences_per_cpu_second / runs.one_at_a_time.sentences_per_cpu_second,
}, null, 2));
