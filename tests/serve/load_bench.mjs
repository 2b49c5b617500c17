// The serving bench: autocannon against petrel-serve's /translate with real sentences
// (tests/fixtures/en-de/test.en, one per request, in turn), batched (the default) and one
// sentence at a time (--max-batch 1), each answer checked against petrel-run's translation.
//   node tests/serve/load_bench.mjs [--connections 32] [--seconds 60] [--threads 1] [-- extra petrel-serve flags]
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

// The server's CPU seconds so far (all its threads; Linux): on a machine shared with other
// work, sentences per CPU second compare the two settings where wall time cannot.
function cpuSeconds(pid) {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;  // utime + stime, in ticks of 1/100 s
}

const m = models();
const sentences = testSentences();
const expected = translateLines(m['en-de'], sentences);
const bodies = sentences.map((q) => ({ q, source: 'en', target: 'de' }));

const runs = {};
for (const [name, serveFlags] of [['batched', []], ['one_at_a_time', ['--max-batch', '1']]]) {
  const server = await startServer(['--model', `en-de=${m['en-de']}`, '--threads', threads, '--queue', '1024',
                                    ...serveFlags, ...extra]);
  const cpuBefore = cpuSeconds(server.child.pid);
  const r = await load({ url: server.url, path: '/translate', bodies, expected, answer: (j) => j.translatedText,
                         connections, seconds });
  const cpu = cpuSeconds(server.child.pid) - cpuBefore;
  const stats = (await (await fetch(`${server.url}/stats`)).json()).models['en-de'];
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
