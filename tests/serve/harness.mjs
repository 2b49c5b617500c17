// What the petrel-serve tests and the load bench share: the tools (PETREL_TOOLS_DIR, or
// build/release), the test models converted once per process (PETREL_SERVE_MODELS: a
// directory that already holds them), servers started on a free port, petrel-run as the
// oracle a response must equal.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const sourceDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const toolsDir = process.env.PETREL_TOOLS_DIR ?? path.join(sourceDir, 'build/release/tools');
export const tools = {
  serve: path.join(toolsDir, 'serve/petrel-serve'),
  convert: path.join(toolsDir, 'petrel-convert'),
  run: path.join(toolsDir, 'petrel-run'),
};

// The real en->de model, its Firefox-shaped Marian C++ student (HTML needs its tokenizer),
// the tiny Gemma-shaped language model with a chat template, and a tiny M2M100 (100 languages).
const checkpoints = {
  'en-de': 'tools/en-de-model',
  firefox: 'tools/firefox-student',
  chat: 'tests/fixtures/decoder_only/gemma3_chat',
  m2m100: 'tests/fixtures/oracle/m2m100_tiny',
};

let modelDir;
export function models() {
  if (!modelDir) {
    modelDir = process.env.PETREL_SERVE_MODELS ?? fs.mkdtempSync(path.join(os.tmpdir(), 'petrel-serve-models-'));
    for (const [name, checkpoint] of Object.entries(checkpoints)) {
      const file = path.join(modelDir, `${name}.petrel`);
      if (fs.existsSync(file)) continue;
      const r = spawnSync(tools.convert, [path.join(sourceDir, checkpoint), '-o', file], { encoding: 'utf8' });
      if (r.status !== 0) throw new Error(`petrel-convert ${checkpoint}: ${r.stderr}`);
    }
  }
  return Object.fromEntries(Object.keys(checkpoints).map((name) => [name, path.join(modelDir, `${name}.petrel`)]));
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Starts petrel-serve on a free port with `args` and waits until /health answers 200.
export async function startServer(args) {
  const child = spawn(tools.serve, ['--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  const server = { child, stderr: '', exited: null };
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (d) => { server.stderr += d; });
  server.exited = new Promise((resolve) => {
    child.on('exit', (code, signal) => resolve({ code, signal }));
    child.on('error', (e) => { server.stderr += String(e); resolve({ code: null, signal: null }); });
  });
  const port = await new Promise((resolve, reject) => {
    let out = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (d) => {
      out += d;
      const line = out.indexOf('\n');
      if (line >= 0) resolve(Number(out.slice(0, line)));
    });
    server.exited.then(({ code }) => reject(new Error(`petrel-serve exited (${code}) before printing its port:\n${server.stderr}`)));
  });
  server.port = port;
  server.url = `http://127.0.0.1:${port}`;
  for (;;) {
    const health = await fetch(`${server.url}/health`).catch(() => null);
    if (health?.status === 200) break;
    await sleep(20);
  }
  // SIGTERM, then its exit status.
  server.stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    return server.exited;
  };
  return server;
}

// petrel-run's standard output for `args` with `input` on standard input.
export function petrelRun(args, input = '') {
  const r = spawnSync(tools.run, args, { input, encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.status !== 0) throw new Error(`petrel-run ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

// petrel-run's translation of each line (text, split into sentences as petrel-serve does).
export function translateLines(model, lines, extra = []) {
  const out = petrelRun([model, '--json-lines', ...extra], lines.map((l) => `${l}\n`).join(''));
  return out.trim().split('\n').map((l) => JSON.parse(l)).filter((r) => 'index' in r).map((r) => r.hypotheses[0]?.text ?? '');
}

export const testSentences = () =>
  fs.readFileSync(path.join(sourceDir, 'tests/fixtures/en-de/test.en'), 'utf8').split('\n').filter((l) => l.trim());

export async function postJson(url, body, headers = {}) {
  const res = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(body) });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON: the test says so */ }
  return { status: res.status, headers: res.headers, text, json };
}
