#!/usr/bin/env node
// Petrel's WebAssembly package against wllama (llama.cpp in WebAssembly), generating with
// the same language model in headless Chromium, one engine after the other in one page.
//
//   node bench/wasm-lm/side_by_side.mjs --petrel-pkg DIR --petrel-model F.petrel --gguf F.gguf \
//     [--rounds 3] [--tokens 128] [--threads 1,2] [--json] [--json-file F] [--native-run PETREL_RUN]
//     [--petrel-kv-cache T] [--petrel-commit C] [--no-memory] [--chromium PATH] [--timeout S] [--verbose]
//
// Per round, per thread count, per engine (their order alternating between rounds): load,
// warm up, then
//   pp    a 128-token prompt (BOS and a fixed English text), one new token: prompt
//         tokens/s from the engine's prompt timer, and the time to the first token as the
//         page sees it (the call's wall clock, worker messages included);
//   tg    the prompt [BOS, "Alice"], --tokens new tokens, greedy, EOS ignored: tokens/s
//         from the engine's generation timer (n tokens over the n - 1 forward passes after
//         the first token: petrel-run's and llama.cpp's tokens_per_s alike);
// then unload. Petrel gets the prompts as ids, wllama as text (its completion takes only
// strings): the text is what the ids decode to; Petrel's tokenizer is checked to give
// those ids, and each engine to have run exactly that many prompt tokens.
// Each generation also gets the renderer process's CPU time across the call (all its
// threads: the page and the engines' workers): tokens per CPU second change least with
// other load on the machine. Peak memory: the renderer's VmHWM, each engine and thread
// count in a fresh browser, after the same load, warm-up, pp and tg.
// Exit status 0 with the table (and JSON); 1 with a FAIL line on any failure or timeout;
// 2 for a usage error. Chromium and the server are always ended.
import { spawn, execFileSync } from "node:child_process";
import fs from "node:fs";
import fsp from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { startServer, HERE, WLLAMA_DIR } from "./serve.mjs";

const REPO = path.resolve(HERE, "..", "..");

// The prompts: the Gemma 3 tokenizer (tests/fixtures/hf_tokenizer/gemma3) encodes TEXT
// as TEXT_IDS (BOS first, 128 ids) and "Alice" as its first two.
const TEXT =
  "Alice was beginning to get very tired of sitting by her sister on the bank, and of having nothing to do: " +
  "once or twice she had peeped into the book her sister was reading, but it had no pictures or conversations " +
  "in it, \u201cand what is the use of a book,\u201d thought Alice \u201cwithout pictures or conversations?\u201d So she " +
  "was considering in her own mind (as well as she could, for the hot day made her feel very sleepy and " +
  "stupid), whether the pleasure of making a daisy-chain would be worth the trouble of getting up and picking " +
  "the daisies, when suddenly a White Rabbit with pink eyes ran close by her";
const TEXT_IDS = [
  2, 85305, 691, 6534, 531, 974, 1401, 20718, 529, 8116, 684, 1116, 12198, 580, 506, 4856, 236764, 532, 529, 2963,
  5017, 531, 776, 236787, 3622, 653, 10911, 1304, 1053, 154312, 524, 1131, 506, 2260, 1116, 12198, 691, 6013, 236764,
  840, 625, 1053, 951, 7829, 653, 23695, 528, 625, 236764, 999, 624, 1144, 563, 506, 1161, 529, 496, 2260, 2130,
  3305, 32858, 999, 31048, 7829, 653, 23695, 9377, 1593, 1304, 691, 11337, 528, 1116, 1852, 3666, 568, 527, 1388,
  618, 1304, 1451, 236764, 573, 506, 3425, 1719, 1603, 1116, 2597, 1401, 105662, 532, 29123, 779, 3363, 506, 17132,
  529, 3043, 496, 99414, 236772, 10864, 1093, 577, 5367, 506, 13007, 529, 3978, 872, 532, 24374, 506, 150497, 236764,
  1056, 15937, 496, 7286, 62524, 607, 9514, 6114, 11536, 3107, 684, 1116,
];
const PP = { ids: TEXT_IDS, text: TEXT };
const TG = { ids: TEXT_IDS.slice(0, 2), text: "Alice" };
const ENGINES = ["petrel", "wllama"];

const USAGE = `usage: node side_by_side.mjs --petrel-pkg DIR --petrel-model F.petrel --gguf F.gguf [options]
  --petrel-pkg DIR      Petrel's JS package (the wasm preset's build/wasm/js)
  --petrel-model F      the .petrel file (petrel-convert)
  --gguf F              the GGUF file for wllama (tools/reference/write_gguf.py)
  --rounds N            rounds of every engine and thread count (default 3)
  --tokens N            generated tokens per tg run (default 128)
  --warmup-tokens N     tokens of the warm-up generation after each load (default 8)
  --threads LIST        thread counts, comma-separated (default 1,2)
  --json                standard output: one JSON document (the table goes to standard error)
  --json-file F         also write the JSON document to F
  --native-run PATH     also time native petrel-run on the .petrel file (same prompts, --greedy)
                        and compare the page's Petrel greedy ids with its own
  --petrel-kv-cache T   Petrel's KV cache type: f32 (its default), f16 (llama.cpp's default), int8
  --petrel-commit C     the commit the package was built from, for the record (default: the
                        commit of a git checkout holding --petrel-pkg, if any)
  --no-memory           skip the peak-memory launches
  --chromium PATH       the browser (default $CHROMIUM or /usr/bin/chromium)
  --timeout S           the whole run's limit in seconds (default 2400)
  --verbose             progress and the page's console on standard error`;

class UsageError extends Error {}

function parseArgs(argv) {
  const o = { rounds: 3, tokens: 128, warmupTokens: 8, threads: [1, 2], json: false, jsonFile: null,
              nativeRun: null, petrelKvCache: null, petrelCommit: null, memory: true, chromium: process.env.CHROMIUM || "/usr/bin/chromium", timeout: 2400,
              verbose: false };
  const int = (a, v, min, max) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < min || n > max) throw new UsageError(`${a} must be an integer in ${min}..${max}`);
    return n;
  };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new UsageError(`${a} needs a value`);
      return argv[++i];
    };
    if (a === "--petrel-pkg") o.petrelPkg = path.resolve(value());
    else if (a === "--petrel-model") o.petrelModel = path.resolve(value());
    else if (a === "--gguf") o.gguf = path.resolve(value());
    else if (a === "--rounds") o.rounds = int(a, value(), 1, 100);
    else if (a === "--tokens") o.tokens = int(a, value(), 2, 2048);
    else if (a === "--warmup-tokens") o.warmupTokens = int(a, value(), 1, 256);
    else if (a === "--threads") {
      o.threads = value().split(",").map((t) => int(a, t.trim(), 1, 64));
      if (new Set(o.threads).size !== o.threads.length) throw new UsageError("--threads: a thread count twice");
    } else if (a === "--json") o.json = true;
    else if (a === "--json-file") o.jsonFile = path.resolve(value());
    else if (a === "--native-run") o.nativeRun = path.resolve(value());
    else if (a === "--petrel-kv-cache") {
      o.petrelKvCache = value();
      if (!["f32", "f16", "int8"].includes(o.petrelKvCache)) throw new UsageError("--petrel-kv-cache: f32, f16 or int8");
    } else if (a === "--petrel-commit") o.petrelCommit = value();
    else if (a === "--no-memory") o.memory = false;
    else if (a === "--chromium") o.chromium = value();
    else if (a === "--timeout") o.timeout = int(a, value(), 10, 86400);
    else if (a === "--verbose") o.verbose = true;
    else if (a === "-h" || a === "--help") {
      console.log(USAGE);
      process.exit(0);
    } else throw new UsageError(`unknown argument: ${a}`);
  }
  for (const k of ["petrelPkg", "petrelModel", "gguf"]) {
    if (!o[k]) throw new UsageError(`--${k.replace(/[A-Z]/g, (c) => "-" + c.toLowerCase())} is required`);
  }
  return o;
}

// --- ending: every path out closes the browser(s) and the server ---------------------------

const cleanups = [];
let cleaning = null;
function cleanup() {
  cleaning ??= (async () => {
    for (const fn of cleanups.splice(0).reverse()) {
      try {
        await fn();
      } catch {
        /* best effort */
      }
    }
  })();
  return cleaning;
}
const consoleTail = [];
let failing = null;
function fail(message) {
  // The first failure is the one reported: closing the browser fails the calls in flight too.
  failing ??= failNow(message);
  return failing;
}
async function failNow(message) {
  console.error(`side_by_side: FAIL: ${message}`);
  if (consoleTail.length) console.error(`the page's last console lines:\n  ${consoleTail.slice(-30).join("\n  ")}`);
  await cleanup();
  process.exit(1);
}
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(sig, () => fail(`interrupted (${sig})`));
process.on("uncaughtException", (err) => fail(err?.stack ?? String(err)));
process.on("unhandledRejection", (err) => fail(err?.stack ?? String(err)));

// --- the DevTools protocol over a pipe (as examples/web/test-in-chromium.mjs) --------------

class Cdp {
  constructor(input, output) {
    this.input = input;
    this.nextId = 1;
    this.pending = new Map();
    this.listeners = [];
    this.closed = null;
    let buffer = Buffer.alloc(0);
    output.on("data", (chunk) => {
      buffer = Buffer.concat([buffer, chunk]);
      let end;
      while ((end = buffer.indexOf(0)) >= 0) {
        const text = buffer.subarray(0, end).toString("utf8");
        buffer = buffer.subarray(end + 1);
        let msg;
        try {
          msg = JSON.parse(text);
        } catch {
          continue;
        }
        if (msg.id != null) {
          const p = this.pending.get(msg.id);
          if (!p) continue;
          this.pending.delete(msg.id);
          if (msg.error) p.reject(new Error(`${p.method}: ${msg.error.message}${msg.error.data ? ` (${msg.error.data})` : ""}`));
          else p.resolve(msg.result ?? {});
        } else if (msg.method) {
          for (const fn of this.listeners) fn(msg.method, msg.params ?? {}, msg.sessionId);
        }
      }
    });
    const onClose = () => this.fail(new Error("the DevTools pipe closed (Chromium exited?)"));
    output.on("close", onClose);
    output.on("error", onClose);
    input.on("error", onClose);
  }
  fail(err) {
    if (this.closed) return;
    this.closed = err;
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
  }
  send(method, params = {}, sessionId, timeoutMs = 30000) {
    if (this.closed) return Promise.reject(this.closed);
    const id = this.nextId++;
    const msg = { id, method, params };
    if (sessionId) msg.sessionId = sessionId;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${method}: no answer in ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, {
        method,
        resolve: (v) => (clearTimeout(timer), resolve(v)),
        reject: (e) => (clearTimeout(timer), reject(e)),
      });
      this.input.write(JSON.stringify(msg) + "\0");
    });
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// --- processes: a Chromium's tree, its renderers' memory ---------------------------------

function processTree(rootPid) {
  const children = new Map();
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    let stat;
    try {
      stat = fs.readFileSync(`/proc/${name}/stat`, "utf8");
    } catch {
      continue;
    }
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    if (!children.has(ppid)) children.set(ppid, []);
    children.get(ppid).push(Number(name));
  }
  const out = [];
  const todo = [rootPid];
  while (todo.length) {
    const pid = todo.pop();
    let cmdline = "", status = "";
    try {
      // Chromium rewrites its children's command lines: arguments joined by spaces or NULs.
      cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ");
      status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
    } catch {
      continue;
    }
    const kb = (key) => Number(status.match(new RegExp(`^${key}:\\s+(\\d+) kB`, "m"))?.[1] ?? 0);
    const type = cmdline.match(/ --type=(\S+)/)?.[1] ?? (/chrom/.test(path.basename(cmdline.split(" ")[0])) ? "browser" : "other");
    const notPage = / --(extension-process|top-chrome-webui)\b/.test(cmdline);
    out.push({ pid, type, notPage, hwmKb: kb("VmHWM"), rssKb: kb("VmRSS") });
    todo.push(...(children.get(pid) ?? []));
  }
  return out;
}

// The page's renderer: the renderer with the highest peak (a spare renderer stays small).
function memorySnapshot(rootPid) {
  const procs = processTree(rootPid);
  const renderers = procs.filter((p) => p.type === "renderer" && !p.notPage).sort((a, b) => b.hwmKb - a.hwmKb);
  const browser = procs.filter((p) => p.type === "browser").sort((a, b) => b.hwmKb - a.hwmKb)[0] ?? null;
  return { renderer: renderers[0] ?? null, renderers: renderers.length, browser,
           allHwmKb: procs.reduce((s, p) => s + p.hwmKb, 0) };
}

const CLK_TCK = (() => {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
  } catch {
    return 100;
  }
})();

// A process's CPU time (user + system, all its threads, exited ones included) in ms.
function cpuMs(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(f[11]) + Number(f[12])) * 1000) / CLK_TCK;
}

// --- one Chromium with the page open ---------------------------------------------------------

async function launch(o, url, deadline) {
  const userDataDir = await fsp.mkdtemp(path.join(os.tmpdir(), "wasm-lm-chromium-"));
  const args = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
    "--no-default-browser-check", "--no-proxy-server", "--disable-extensions", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--mute-audio",
    // A headless page counts as hidden: keep its timers and its process at full priority.
    "--disable-background-timer-throttling", "--disable-renderer-backgrounding", "--disable-backgrounding-occluded-windows",
    "--remote-debugging-pipe", `--user-data-dir=${userDataDir}`, "about:blank",
  ];
  const env = { ...process.env, XDG_CONFIG_HOME: path.join(userDataDir, "config"), XDG_CACHE_HOME: path.join(userDataDir, "cache") };
  const child = spawn(o.chromium, args, { env, stdio: ["ignore", "pipe", "pipe", "pipe", "pipe"], detached: true });
  let log = "";
  const keep = (chunk) => (log = (log + chunk.toString()).slice(-6000));
  child.stdout.on("data", keep);
  child.stderr.on("data", keep);
  let exited = false;
  const exitedP = new Promise((resolve) => child.on("exit", () => ((exited = true), resolve())));
  const spawnError = new Promise((_, reject) => child.on("error", (err) => reject(new Error(`cannot start ${o.chromium}: ${err.message}`))));
  spawnError.catch(() => {});
  const killGroup = () => {
    try {
      process.kill(-child.pid, "SIGKILL");
    } catch {
      /* gone */
    }
  };
  process.on("exit", killGroup);
  const cdp = new Cdp(child.stdio[3], child.stdio[4]);
  const close = async () => {
    if (!exited) {
      await cdp.send("Browser.close", {}, undefined, 3000).catch(() => {});
      await Promise.race([exitedP, sleep(3000)]);
    }
    killGroup();
    process.off("exit", killGroup);
    await fsp.rm(userDataDir, { recursive: true, force: true, maxRetries: 3 }).catch(() => {});
  };
  cleanups.push(close);

  const left = () => Math.max(1000, deadline - Date.now());
  const version = await Promise.race([cdp.send("Browser.getVersion", {}, undefined, 60000), spawnError]).catch((err) => {
    throw new Error(`${err.message}\n${log}`);
  });
  const { targetId } = await cdp.send("Target.createTarget", { url: "about:blank" });
  const { sessionId } = await cdp.send("Target.attachToTarget", { targetId, flatten: true });
  const page = (method, params, timeoutMs) => cdp.send(method, params, sessionId, timeoutMs);
  cdp.listeners.push((method, p, sid) => {
    if (sid !== sessionId) return;
    let line = null;
    if (method === "Runtime.consoleAPICalled") {
      line = `console.${p.type}: ${p.args.map((a) => ("value" in a ? String(a.value) : a.description ?? a.type)).join(" ")}`;
    } else if (method === "Runtime.exceptionThrown") {
      line = `exception: ${p.exceptionDetails.exception?.description ?? p.exceptionDetails.text}`;
    } else if (method === "Inspector.targetCrashed") line = "the page crashed";
    if (line === null) return;
    consoleTail.push(line);
    if (consoleTail.length > 200) consoleTail.shift();
    if (o.verbose) console.error(`  | ${line}`);
  });
  await Promise.all([page("Runtime.enable"), page("Page.enable"), page("Inspector.enable").catch(() => {})]);
  await page("Page.navigate", { url: o.verbose ? `${url}?verbose=1` : url });
  const evaluate = async (expression, timeoutMs = left()) => {
    const r = await page("Runtime.evaluate", { expression, returnByValue: true, awaitPromise: true }, timeoutMs);
    if (r.exceptionDetails) {
      const d = r.exceptionDetails;
      throw new Error(d.exception?.description ?? d.exception?.value ?? d.text);
    }
    return r.result.value;
  };
  const until = Date.now() + 60000;
  while (!(await evaluate("document.body?.dataset.ready === '1' && typeof window.bench === 'object'", 5000).catch(() => false))) {
    if (cdp.closed) throw new Error(`${cdp.closed.message}\n${log}`);
    if (Date.now() > until) throw new Error(`the page ${url} did not become ready in 60 s`);
    await sleep(100);
  }
  // The page's renderer: known once an engine holds the model (the largest renderer), the
  // same for the browser's life.
  let renderer = null;
  const pageRenderer = () => {
    const found = memorySnapshot(child.pid).renderer?.pid;
    if (!found) throw new Error("no renderer process found below the browser's");
    if (renderer !== null && found !== renderer) throw new Error(`the page's renderer changed (pid ${renderer}, now ${found})`);
    return (renderer = found);
  };
  return { version, evaluate, close, pid: child.pid, pageRenderer };
}

// Loads `engine` with `threads` in the page, warms it up, times pp and tg, unloads it.
// Each generation's figures come with the renderer's CPU time across the call.
async function measure(b, o, engine, threads, checkTokenizer) {
  const nCtx = Math.ceil((Math.max(PP.ids.length + o.warmupTokens, TG.ids.length + o.tokens) + 16) / 256) * 256;
  const info = await b.evaluate(`window.bench.open(${JSON.stringify({ engine, threads, nCtx, petrelKvCache: o.petrelKvCache })})`);
  try {
    const renderer = b.pageRenderer();
    let tokenized = null;
    if (checkTokenizer) {
      tokenized = { pp: await b.evaluate(`window.bench.tokenize(${JSON.stringify(PP.text)})`),
                    tg: await b.evaluate(`window.bench.tokenize(${JSON.stringify(TG.text)})`) };
    }
    const generate = async (prompt, n) => {
      const before = cpuMs(renderer);
      const r = await b.evaluate(`window.bench.run(${JSON.stringify({ prompt, n })})`);
      r.cpuMs = cpuMs(renderer) - before;
      return r;
    };
    const warmup = await generate(PP, o.warmupTokens);
    const pp = await generate(PP, 1);
    const tg = await generate(TG, o.tokens);
    await b.evaluate("window.bench.close()");
    return { engine, threads, info, tokenized, warmup, pp, tg };
  } catch (err) {
    await b.evaluate("window.bench.close()", 10000).catch(() => {});
    throw err;
  }
}

// --- figures ----------------------------------------------------------------------------------

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const stats = (xs) => ({ median: median(xs), min: Math.min(...xs), max: Math.max(...xs), n: xs.length });
const perS = (tokens, ms) => (ms > 0 ? (tokens * 1000) / ms : NaN);

function figures(run) {
  return {
    tgTokensPerS: perS(run.tg.generatedTokens, run.tg.generateMs),
    ppTokensPerS: perS(run.pp.promptTokens, run.pp.promptMs),
    ttftMs: run.pp.wallMs,
    tgWallTokensPerS: perS(run.tg.generatedTokens, run.tg.wallMs),
    // Per second of the renderer's CPU time (all its threads): what other load on the
    // machine changes least; with threads it includes their waiting.
    tgCpuTokensPerS: perS(run.tg.generatedTokens, run.tg.cpuMs),
    ppCpuTokensPerS: perS(run.pp.promptTokens, run.pp.cpuMs),
    loadMs: run.info.loadMs,
  };
}

function fmt(s, digits) {
  if (!s) return "-";
  const f = (x) => x.toFixed(digits);
  return s.n > 1 ? `${f(s.median)} (${f(s.min)}-${f(s.max)})` : f(s.median);
}

function table(result) {
  const t = result.config.tokens, p = result.config.promptTokens;
  const rows = [["engine", "build", "thr", `tg${t} tok/s`, `tg${t} tok/CPU-s`, `pp${p} tok/s`, `pp${p} tok/CPU-s`,
                 "TTFT ms", "load ms", "peak RSS MiB", "over page MiB"]];
  for (const s of result.summary) {
    const mem = result.memory.find((m) => m.engine === s.engine && m.threads === s.threads);
    rows.push([s.engine, s.build, String(s.threads), fmt(s.tgTokensPerS, 1), fmt(s.tgCpuTokensPerS, 1),
               fmt(s.ppTokensPerS, 1), fmt(s.ppCpuTokensPerS, 1), fmt(s.ttftMs, 0), fmt(s.loadMs, 0),
               mem ? (mem.rendererHwmKb / 1024).toFixed(0) : "-",
               mem ? ((mem.rendererHwmKb - mem.pageHwmKb) / 1024).toFixed(0) : "-"]);
  }
  for (const n of result.native) {
    rows.push(["petrel-run", `native ${n.isa}`, String(n.threads), n.tgTokensPerS.toFixed(1), "-", n.ppTokensPerS.toFixed(1),
               "-", `(${n.prefillMs.toFixed(0)})`, "-", n.maxRssKb ? (n.maxRssKb / 1024).toFixed(0) : "-", "-"]);
  }
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => r[c].length)));
  const line = (r) => r.map((cell, c) => (c < 2 ? cell.padEnd(widths[c]) : cell.padStart(widths[c]))).join("  ");
  return [line(rows[0]), widths.map((w) => "-".repeat(w)).join("  "), ...rows.slice(1).map(line)].join("\n");
}

// --- native reference -------------------------------------------------------------------------

function native(o, ppIds, tgIds) {
  // GNU time gives the child's peak RSS (%M, KiB) where it is installed.
  const timeBin = fs.existsSync("/usr/bin/time") ? "/usr/bin/time" : null;
  const rssFile = path.join(os.tmpdir(), `wasm-lm-native-${process.pid}.txt`);
  const out = [];
  for (const threads of o.threads) {
    const run = (ids, n) => {
      const args = [o.petrelModel, "--ids", ids.join(" "), "--max-new-tokens", String(n), "--ignore-eos", "--greedy",
                    "--json", "--quiet", "--threads", String(threads), ...(o.petrelKvCache ? ["--kv-cache", o.petrelKvCache] : [])];
      const [file, argv] = timeBin ? [timeBin, ["-f", "%M", "-o", rssFile, o.nativeRun, ...args]] : [o.nativeRun, args];
      const stdout = execFileSync(file, argv, { encoding: "utf8", maxBuffer: 1 << 26 });
      const maxRssKb = timeBin ? Number(fs.readFileSync(rssFile, "utf8").trim().split("\n").at(-1)) : null;
      return { j: JSON.parse(stdout.trim().split("\n").at(-1)), maxRssKb };
    };
    run(ppIds, o.warmupTokens);
    const pp = run(ppIds, 1);
    const tg = run(tgIds, o.tokens);
    const t = tg.j.timing;
    if (t.generated_tokens !== o.tokens) throw new Error(`petrel-run generated ${t.generated_tokens} tokens, not ${o.tokens}`);
    if (pp.j.timing.prompt_tokens !== ppIds.length) throw new Error(`petrel-run ran ${pp.j.timing.prompt_tokens} prompt tokens, not ${ppIds.length}`);
    out.push({ threads, isa: tg.j.isa, tgTokensPerS: t.tokens_per_s, ppTokensPerS: pp.j.timing.prompt_tokens_per_s,
               prefillMs: pp.j.timing.prefill_ms, maxRssKb: Math.max(pp.maxRssKb ?? 0, tg.maxRssKb ?? 0) || null,
               kvCache: tg.j.kv_cache, ids: tg.j.results[0].hypotheses[0].ids,
               command: `${o.nativeRun} ${o.petrelModel} --ids "<ids>" --max-new-tokens N --ignore-eos --greedy --json --quiet --threads ${threads}` +
                        (o.petrelKvCache ? ` --kv-cache ${o.petrelKvCache}` : "") });
  }
  fs.rmSync(rssFile, { force: true });
  return out;
}

// --- main -------------------------------------------------------------------------------------

function git(args, cwd) {
  try {
    return execFileSync("git", ["-C", cwd, ...args], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
  } catch {
    return null;
  }
}

async function main() {
  let o;
  try {
    o = parseArgs(process.argv.slice(2));
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    console.error(`side_by_side: ${err.message}\n${USAGE}`);
    process.exit(2);
  }
  const started = Date.now();
  const deadline = started + o.timeout * 1000;
  const timer = setTimeout(() => fail(`timeout: the run took more than ${o.timeout} s (--timeout)`), o.timeout * 1000);
  cleanups.push(() => clearTimeout(timer));
  const progress = (msg) => {
    if (o.verbose) console.error(`[${((Date.now() - started) / 1000).toFixed(0)} s] ${msg}`);
  };

  const need = [
    ["--petrel-model", o.petrelModel], ["--gguf", o.gguf], ["--chromium", o.chromium],
    ["the Petrel package (--petrel-pkg)", path.join(o.petrelPkg, "petrel-worker-client.mjs")],
    ["the Petrel package's petrel.wasm", path.join(o.petrelPkg, "petrel.wasm")],
    ["wllama (npm ci in bench/wasm-lm)", path.join(WLLAMA_DIR, "esm", "index.js")],
  ];
  if (o.threads.some((t) => t > 1)) need.push(["the Petrel package's petrel-threads.wasm", path.join(o.petrelPkg, "petrel-threads.wasm")]);
  if (o.nativeRun) need.push(["--native-run", o.nativeRun]);
  for (const [what, file] of need) if (!fs.existsSync(file)) return fail(`${what}: ${file} does not exist`);
  const pinned = JSON.parse(fs.readFileSync(path.join(HERE, "package.json"), "utf8")).dependencies["@wllama/wllama"];
  const wllamaVersion = JSON.parse(fs.readFileSync(path.join(WLLAMA_DIR, "package.json"), "utf8")).version;
  if (wllamaVersion !== pinned) return fail(`node_modules has @wllama/wllama ${wllamaVersion}, package.json pins ${pinned}: run npm ci in ${HERE}`);

  const result = {
    tool: "bench/wasm-lm/side_by_side.mjs",
    date: new Date().toISOString(),
    command: ["node", path.relative(process.cwd(), process.argv[1]) || process.argv[1], ...process.argv.slice(2)].join(" "),
    host: {
      cpu: (() => { try { return execFileSync("lscpu", { encoding: "utf8" }).match(/^Model name:\s*(.+)$/m)?.[1] ?? os.cpus()[0]?.model; } catch { return os.cpus()[0]?.model; } })(),
      cores: os.cpus().length,
      loadavgStart: os.loadavg().map((x) => Number(x.toFixed(2))),
      loadavgEnd: null,
      node: process.version,
    },
    commit: git(["rev-parse", "--short", "HEAD"], REPO),
    commitDirty: (git(["status", "--porcelain", "--untracked-files=no"], REPO) ?? "") !== "",
    petrelPkg: { dir: o.petrelPkg, commit: o.petrelCommit ?? git(["rev-parse", "--short", "HEAD"], o.petrelPkg) },
    wllama: { npm: `@wllama/wllama@${wllamaVersion}` },
    models: {
      petrel: { file: o.petrelModel, bytes: fs.statSync(o.petrelModel).size },
      gguf: { file: o.gguf, bytes: fs.statSync(o.gguf).size },
    },
    config: { rounds: o.rounds, tokens: o.tokens, promptTokens: PP.ids.length, warmupTokens: o.warmupTokens, threads: o.threads,
              pp: PP, tg: TG },
    chromium: null,
    page: null,
    runs: [],
    summary: [],
    memory: [],
    native: [],
  };

  const server = await startServer({ petrelPkg: o.petrelPkg, petrelModel: o.petrelModel, gguf: o.gguf });
  cleanups.push(() => server.close());
  progress(`serving ${server.url}`);

  // Timing: one page, every engine and thread count per round.
  {
    const b = await launch(o, server.url, deadline);
    result.chromium = b.version.product;
    result.page = await b.evaluate("window.bench.env()");
    progress(`${result.chromium}; page ${JSON.stringify(result.page)}`);
    if (o.threads.some((t) => t > 1) && !result.page.crossOriginIsolated) throw new Error("the page is not cross-origin isolated: no threads");
    for (let round = 0; round < o.rounds; ++round) {
      const order = round % 2 === 0 ? ENGINES : [...ENGINES].reverse();
      for (const threads of o.threads) {
        for (const engine of order) {
          progress(`round ${round + 1}/${o.rounds}: ${engine}, ${threads} thread(s)`);
          let r;
          try {
            r = await measure(b, o, engine, threads, round === 0 && engine === "petrel");
          } catch (err) {
            throw new Error(`${engine}, ${threads} thread(s), round ${round + 1}: ${err.message}`);
          }
          if (r.tokenized) {
            for (const [name, prompt] of [["pp", PP], ["tg", TG]]) {
              const got = r.tokenized[name];
              if (got === null) throw new Error("the .petrel file has no tokenizer: convert it from a directory with tokenizer.json");
              if (got.join(" ") !== prompt.ids.join(" ")) {
                throw new Error(`Petrel's tokenizer encodes the ${name} text as [${got.join(" ")}], not as [${prompt.ids.join(" ")}]: not the Gemma 3 tokenizer?`);
              }
            }
          }
          delete r.tokenized;
          r.round = round + 1;
          r.figures = figures(r);
          progress(`  ${JSON.stringify(r.figures)}`);
          result.runs.push(r);
        }
      }
    }
    await b.close();
  }
  for (const threads of o.threads) {
    for (const engine of ENGINES) {
      const runs = result.runs.filter((r) => r.engine === engine && r.threads === threads);
      const pick = (k) => stats(runs.map((r) => r.figures[k]));
      const { log, ...info } = runs[0].info;
      result.summary.push({ engine, threads, build: info.build, info, wllamaLog: log ?? undefined,
                            tgTokensPerS: pick("tgTokensPerS"), ppTokensPerS: pick("ppTokensPerS"), ttftMs: pick("ttftMs"),
                            tgWallTokensPerS: pick("tgWallTokensPerS"), tgCpuTokensPerS: pick("tgCpuTokensPerS"),
                            ppCpuTokensPerS: pick("ppCpuTokensPerS"), loadMs: pick("loadMs") });
    }
  }

  // Peak memory: a fresh browser per engine and thread count.
  if (o.memory) {
    for (const threads of o.threads) {
      for (const engine of ENGINES) {
        progress(`memory: ${engine}, ${threads} thread(s)`);
        const b = await launch(o, server.url, deadline);
        await sleep(500);
        const before = memorySnapshot(b.pid);
        if (!before.renderer) throw new Error("no renderer process found below the browser's");
        try {
          await measure(b, o, engine, threads, false);
        } catch (err) {
          throw new Error(`memory run: ${engine}, ${threads} thread(s): ${err.message}`);
        }
        const after = memorySnapshot(b.pid);
        result.memory.push({ engine, threads, pageHwmKb: before.renderer.hwmKb, rendererHwmKb: after.renderer.hwmKb,
                             rendererPid: after.renderer.pid, renderers: after.renderers,
                             browserHwmKb: after.browser?.hwmKb ?? null, allProcessesHwmKb: after.allHwmKb });
        await b.close();
      }
    }
  }

  if (o.nativeRun) {
    progress("native petrel-run");
    result.native = native(o, PP.ids, TG.ids);
    // The package's greedy tokens against native ones: how many lead tokens agree (kernel
    // paths that compute the same bits give all of them).
    for (const r of result.runs.filter((r) => r.engine === "petrel")) {
      const want = result.native.find((n) => n.threads === r.threads)?.ids ?? [];
      let k = 0;
      while (k < r.tg.ids.length && r.tg.ids[k] === want[k]) ++k;
      r.tg.nativeCommonPrefix = k;
    }
  }

  result.host.loadavgEnd = os.loadavg().map((x) => Number(x.toFixed(2)));
  result.seconds = Math.round((Date.now() - started) / 1000);
  let text = [
    `${result.date}  ${result.host.cpu} (${result.host.cores} cores)  commit ${result.commit}${result.commitDirty ? " (modified)" : ""}  ` +
      `${result.chromium}  ${result.wllama.npm}`,
    `Petrel package ${o.petrelPkg}${result.petrelPkg.commit ? ` (commit ${result.petrelPkg.commit})` : ""}, ` +
      `${path.basename(o.petrelModel)} (${(result.models.petrel.bytes / 2 ** 20).toFixed(1)} MiB); ` +
      `wllama ${path.basename(o.gguf)} (${(result.models.gguf.bytes / 2 ** 20).toFixed(1)} MiB)`,
    `load average ${result.host.loadavgStart.join(" ")} at the start, ${result.host.loadavgEnd.join(" ")} at the end; ` +
      `${o.rounds} round(s), medians (min-max); pp: ${PP.ids.length}-token prompt, 1 new token; tg: ${o.tokens} tokens after [2, 85305] ("Alice")`,
    "",
    table(result),
  ].join("\n");
  const agreement = result.runs.filter((r) => r.tg.nativeCommonPrefix !== undefined).map((r) => r.tg.nativeCommonPrefix);
  if (agreement.length) {
    text += `\nPetrel in the page against native petrel-run, greedy tg ids: ` +
      (agreement.every((k) => k === o.tokens) ? `all ${o.tokens} equal in every run` : `first ${agreement.join(", ")} of ${o.tokens} equal (per run)`);
  }
  if (o.json) console.error(text);
  else console.log(text);
  if (o.json) console.log(JSON.stringify(result, null, 2));
  if (o.jsonFile) await fsp.writeFile(o.jsonFile, JSON.stringify(result, null, 2) + "\n");
  await cleanup();
  process.exit(0);
}

main().catch((err) => fail(err?.message ?? String(err)));
