#!/usr/bin/env node
// End-to-end test of the Petrel web example in headless Chromium (Node 20, no dependencies).
//
//   node examples/web/test-in-chromium.mjs --model M.petrel [--native-run petrel-run]
//        [--text S]... [--expect S]... [--expect-file F] [--screenshot out.png]
//        [--chat-model LM.petrel [--chat S]... [--system S] [--chat-screenshot out.png]]
//
// Serves the page (serve.mjs), starts Chromium with the DevTools protocol on a pipe
// (fds 3 and 4, NUL-terminated JSON), opens
//   /?model=/demo-model.petrel&text=<the sentences, one per line>&auto=1&beam=1
// waits until the page reports done, compares each line of #translation with the expected
// text (--expect/--expect-file, and/or `petrel-run MODEL --beam 1 --json --text S` run here
// per sentence with --native-run), loads the model again through the file input and
// translates again with the Translate button (same page, same result), saves a screenshot;
// the page, cross-origin isolated, runs the package's threaded build: it then opens the
// same URL with &threads=1 (the single-threaded build), whose translation must be the same.
// With --chat-model (a language model; --model may then be left out) it opens
//   /?model=/chat-model.petrel&chat=<the messages, one per line>&auto=1&maxNewTokens=N
// waits until the conversation is done, compares each streamed reply with
// `petrel-run LM --chat --json-lines` on the same messages (--native-run), sends one more
// message with the Send button (its reply must be native's next), and saves a screenshot.
// Prints one summary line and exits 0 when everything matches, 1 otherwise (2: bad
// arguments). Chromium and the server are stopped on every exit path; --timeout bounds
// the whole run.
import { spawn, execFile } from "node:child_process";
import fs from "node:fs";
import fsp from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { startServer, DEFAULT_PKG_DIR } from "./serve.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const DEFAULT_TEXTS = [
  "File not found.",
  "Could not open the file.",
  "The operation was cancelled.",
  "Print the version number and exit.",
  "`%s' killed by signal %d. Continuing.",
];

// Messages of the chat test: the last one is sent with the Send button.
const DEFAULT_CHAT = ["Hello!", "What is the capital of France?", "And of Italy, in one word.", "Thanks, bye."];

const USAGE = `usage: node test-in-chromium.mjs (--model FILE.petrel | --chat-model FILE.petrel) [options]
  --model FILE          the .petrel translation model (served as /demo-model.petrel)
  --chat-model FILE     a language model (served as /chat-model.petrel): the chat test
  --chat S              a chat message (repeatable, at least 2; default: ${DEFAULT_CHAT.length} built-in messages;
                        the last one is sent with the Send button)
  --system S            the conversation's system message
  --chat-max-new-tokens N  tokens per reply (default 24)
  --chat-screenshot F.png  save a screenshot of the chat
  --pkg DIR             the built JS package (default $PETREL_JS_DIR or ${path.relative(process.cwd(), DEFAULT_PKG_DIR) || "."})
  --text S              a sentence to translate (repeatable; default: ${DEFAULT_TEXTS.length} built-in sentences)
  --expect S            the expected translation of each --text, in order (repeatable)
  --expect-file F       the expected translations, one per line
  --native-run PATH     petrel-run: the expected translations are its output (--beam K --json)
  --beam K              beam size on the page and for --native-run (default 1)
  --screenshot F.png    save a screenshot of the page
  --chromium PATH       the browser (default $CHROMIUM or /usr/bin/chromium)
  --chromium-arg ARG    one more browser flag (repeatable)
  --page-timeout S      seconds to wait for the page to finish (default 60)
  --timeout S           seconds for the whole run (default 150)
  --verbose             print the page's console as it comes`;

// --- arguments -------------------------------------------------------------------------

class UsageError extends Error {}

function parseArgs(argv) {
  const o = {
    texts: [],
    expects: [],
    beam: 1,
    chromium: process.env.CHROMIUM || "/usr/bin/chromium",
    chromiumArgs: [],
    pageTimeout: 60,
    timeout: 150,
    verbose: false,
    pkg: process.env.PETREL_JS_DIR || DEFAULT_PKG_DIR,
    chat: [],
    chatMaxNewTokens: 24,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new UsageError(`${a} needs a value`);
      return argv[++i];
    };
    const number = () => {
      const n = Number(value());
      if (!(n > 0)) throw new UsageError(`${a} needs a positive number`);
      return n;
    };
    switch (a) {
      case "--model": o.model = value(); break;
      case "--chat-model": o.chatModel = value(); break;
      case "--chat": o.chat.push(value()); break;
      case "--system": o.system = value(); break;
      case "--chat-max-new-tokens": o.chatMaxNewTokens = Math.trunc(number()); break;
      case "--chat-screenshot": o.chatScreenshot = value(); break;
      case "--pkg": o.pkg = value(); break;
      case "--text": o.texts.push(value()); break;
      case "--expect": o.expects.push(value()); break;
      case "--expect-file": o.expectFile = value(); break;
      case "--native-run": o.nativeRun = value(); break;
      case "--beam": o.beam = Math.trunc(number()); break;
      case "--screenshot": o.screenshot = value(); break;
      case "--chromium": o.chromium = value(); break;
      case "--chromium-arg": o.chromiumArgs.push(value()); break;
      case "--page-timeout": o.pageTimeout = number(); break;
      case "--timeout": o.timeout = number(); break;
      case "--verbose": o.verbose = true; break;
      case "-h": case "--help": console.log(USAGE); process.exit(0);
      default: throw new UsageError(`unknown argument: ${a}`);
    }
  }
  if (!o.model && !o.chatModel) throw new UsageError("--model or --chat-model is required");
  if (o.texts.length === 0) o.texts = [...DEFAULT_TEXTS];
  for (const t of o.texts) {
    if (!t.trim() || /[\r\n]/.test(t)) throw new UsageError("each --text must be one non-blank line");
  }
  if (o.chat.length === 0) o.chat = [...DEFAULT_CHAT];
  if (o.chat.length < 2) throw new UsageError("give at least 2 --chat messages (the last is sent with the Send button)");
  for (const m of [...o.chat, ...(o.system !== undefined ? [o.system] : [])]) {
    if (!m.trim() || /[\r\n]/.test(m)) throw new UsageError("each --chat message and --system must be one non-blank line");
  }
  return o;
}

// --- cleanup ---------------------------------------------------------------------------

const cleanups = [];
let cleaning = null;
function cleanup() {
  cleaning ??= (async () => {
    for (const fn of cleanups.reverse()) {
      try {
        await fn();
      } catch {
        /* best effort */
      }
    }
  })();
  return cleaning;
}
async function finish(code, message) {
  if (message) (code === 0 ? console.log : console.error)(message);
  await cleanup();
  process.exit(code);
}
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(sig, () => finish(1, `test-in-chromium: interrupted (${sig})`));
}
process.on("uncaughtException", (err) => finish(1, `test-in-chromium: ${err?.stack ?? err}`));
process.on("unhandledRejection", (err) => finish(1, `test-in-chromium: ${err?.stack ?? err}`));

// --- the DevTools protocol over a pipe ---------------------------------------------------

class Cdp {
  constructor(input, output) {
    this.input = input; // Chromium reads commands from its fd 3
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
        this.dispatch(msg);
      }
    });
    const onClose = () => this.fail(new Error("the DevTools pipe closed (Chromium exited?)"));
    output.on("close", onClose);
    output.on("error", onClose);
    input.on("error", onClose);
  }
  dispatch(msg) {
    if (msg.id != null) {
      const p = this.pending.get(msg.id);
      if (!p) return;
      this.pending.delete(msg.id);
      if (msg.error) p.reject(new Error(`${p.method}: ${msg.error.message}${msg.error.data ? ` (${msg.error.data})` : ""}`));
      else p.resolve(msg.result ?? {});
    } else if (msg.method) {
      for (const fn of this.listeners) fn(msg.method, msg.params ?? {}, msg.sessionId);
    }
  }
  fail(err) {
    if (this.closed) return;
    this.closed = err;
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
  }
  on(fn) {
    this.listeners.push(fn);
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
      const done = (fn) => (v) => {
        clearTimeout(timer);
        fn(v);
      };
      this.pending.set(id, { method, resolve: done(resolve), reject: done(reject) });
      this.input.write(JSON.stringify(msg) + "\0");
    });
  }
}

// --- helpers -----------------------------------------------------------------------------

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function remoteToString(obj) {
  if (!obj) return "";
  if ("value" in obj) return typeof obj.value === "string" ? obj.value : JSON.stringify(obj.value);
  return obj.description ?? obj.unserializableValue ?? obj.type ?? "";
}

async function nativeTranslations(petrelRun, model, texts, beam) {
  const run = promisify(execFile);
  const out = [];
  for (const text of texts) {
    // One process per sentence: each one is translated alone, as on the page.
    const { stdout } = await run(petrelRun, [model, "--beam", String(beam), "--quiet", "--json", "--text", text], {
      maxBuffer: 16 << 20,
      timeout: 60000,
    });
    const json = JSON.parse(stdout);
    const result = json.results?.[0];
    if (!result || result.error) throw new Error(`petrel-run failed on ${JSON.stringify(text)}: ${result?.error ?? stdout}`);
    out.push(result.hypotheses[0].text);
  }
  return out;
}

// petrel-run --chat --json-lines: the reply to each message, in one conversation.
async function nativeChat(petrelRun, model, messages, maxNewTokens, system) {
  const args = [model, "--chat", "--json-lines", "--quiet", "--max-new-tokens", String(maxNewTokens)];
  if (system !== undefined) args.push("--system", system);
  const stdout = await new Promise((resolve, reject) => {
    const child = execFile(petrelRun, args, { maxBuffer: 16 << 20, timeout: 60000 }, (err, out) => (err ? reject(err) : resolve(out)));
    child.stdin.end(messages.join("\n") + "\n");
  });
  const replies = stdout.split("\n").filter(Boolean).map((line) => JSON.parse(line));
  const failed = replies.find((r) => r.error);
  if (failed || replies.length !== messages.length) throw new Error(`petrel-run --chat: ${failed?.error ?? stdout}`);
  return replies.map((r) => r.text);
}

function quote(s) {
  return JSON.stringify(s);
}

// --- main --------------------------------------------------------------------------------

let browserLog = ""; // the end of Chromium's standard output and error
let browserStatus = ""; // how it exited, if it did
const browserLogTail = () =>
  (browserStatus ? `  ${browserStatus}\n` : "") +
  (browserLog.trim()
    ? `  chromium output (last lines):\n${browserLog.trim().split("\n").filter((l) => !/dbus|UPower/i.test(l)).slice(-15).map((l) => `    ${l}`).join("\n")}`
    : "");

async function main() {
  let o;
  try {
    o = parseArgs(process.argv.slice(2));
  } catch (err) {
    if (err instanceof UsageError) {
      console.error(`test-in-chromium: ${err.message}\n${USAGE}`);
      process.exit(2);
    }
    throw err;
  }

  const globalTimer = setTimeout(() => finish(1, `test-in-chromium: FAIL: global timeout (${o.timeout} s)`), o.timeout * 1000);
  cleanups.push(() => clearTimeout(globalTimer));

  // Preconditions, with plain messages.
  const files = [["browser", o.chromium], ["package", path.join(o.pkg, "petrel-worker-client.mjs")]];
  if (o.model) files.unshift(["model", o.model]);
  if (o.chatModel) files.unshift(["chat model", o.chatModel]);
  for (const [what, file] of files) {
    if (!fs.existsSync(file)) return finish(1, `test-in-chromium: FAIL: ${what} not found: ${file}` + (what === "package" ? " (build it: cmake --preset wasm && cmake --build build/wasm)" : ""));
  }

  // Expected translations.
  const expectations = []; // [label, translations[]]
  let expected = o.expects.length ? o.expects : null;
  if (o.expectFile) {
    const lines = (await fsp.readFile(o.expectFile, "utf8")).replace(/\r\n?/g, "\n").replace(/\n$/, "").split("\n");
    expected = [...(expected ?? []), ...lines];
  }
  if (expected) {
    if (expected.length !== o.texts.length) {
      return finish(2, `test-in-chromium: ${expected.length} expected translations for ${o.texts.length} sentences`);
    }
    expectations.push(["expected", expected]);
  }
  let nativeReplies = null;
  if (o.nativeRun) {
    try {
      if (o.model) expectations.push(["native", await nativeTranslations(o.nativeRun, o.model, o.texts, o.beam)]);
      if (o.chatModel) nativeReplies = await nativeChat(o.nativeRun, o.chatModel, o.chat, o.chatMaxNewTokens, o.system);
    } catch (err) {
      return finish(1, `test-in-chromium: FAIL: native run: ${err.message}`);
    }
  }

  // The server.
  const server = await startServer({ pkgDir: o.pkg, model: o.model, chatModel: o.chatModel });
  cleanups.push(() => server.close());

  // The browser.
  const userDataDir = await fsp.mkdtemp(path.join(os.tmpdir(), "petrel-chromium-"));
  cleanups.push(() => fsp.rm(userDataDir, { recursive: true, force: true, maxRetries: 3 }));
  const args = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--no-default-browser-check",
    "--no-proxy-server",
    "--disable-extensions",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--mute-audio",
    "--window-size=1000,1300",
    "--remote-debugging-pipe",
    `--user-data-dir=${userDataDir}`,
    ...o.chromiumArgs,
    "about:blank",
  ];
  // The profile, caches and configuration all in the temporary directory (HOME untouched).
  const env = { ...process.env, XDG_CONFIG_HOME: path.join(userDataDir, "config"), XDG_CACHE_HOME: path.join(userDataDir, "cache") };
  const browser = spawn(o.chromium, args, {
    env,
    stdio: ["ignore", "pipe", "pipe", "pipe", "pipe"],
    detached: true, // its own process group: the whole browser is stopped at the end
  });
  const keepLog = (chunk) => {
    browserLog = (browserLog + chunk.toString()).slice(-8000);
  };
  browser.stdout.on("data", keepLog);
  browser.stderr.on("data", keepLog);
  let browserExited = false;
  const exited = new Promise((resolve) => browser.on("exit", (code, signal) => {
    browserExited = true;
    browserStatus = `chromium exited (${signal ?? `status ${code}`})`;
    resolve({ code, signal });
  }));
  browser.on("error", (err) => finish(1, `test-in-chromium: FAIL: cannot start ${o.chromium}: ${err.message}`));
  const killGroup = () => {
    try {
      process.kill(-browser.pid, "SIGKILL");
    } catch {
      /* gone */
    }
  };
  process.on("exit", killGroup); // last resort, synchronous
  const cdp = new Cdp(browser.stdio[3], browser.stdio[4]);
  cleanups.push(async () => {
    if (!browserExited) {
      await cdp.send("Browser.close", {}, undefined, 3000).catch(() => {});
      await Promise.race([exited, sleep(3000)]);
    }
    killGroup();
  });

  // Console messages and exceptions of the page and its workers.
  const consoleLines = [];
  const note = (line) => {
    consoleLines.push(line);
    if (o.verbose) console.error(`  | ${line}`);
  };
  const sessionNames = new Map();
  cdp.on((method, p, sessionId) => {
    const where = sessionNames.get(sessionId) ?? "browser";
    if (method === "Runtime.consoleAPICalled") {
      note(`[${where} console.${p.type}] ${p.args.map(remoteToString).join(" ")}`);
    } else if (method === "Runtime.exceptionThrown") {
      const d = p.exceptionDetails;
      note(`[${where} exception] ${d.exception?.description ?? d.text} ${d.url ? `(${d.url}:${d.lineNumber + 1})` : ""}`);
    } else if (method === "Log.entryAdded") {
      const e = p.entry;
      note(`[${where} ${e.source} ${e.level}] ${e.text}${e.url ? ` (${e.url})` : ""}`);
    } else if (method === "Target.attachedToTarget") {
      // The page's workers (auto-attached): listen to their consoles too.
      const { sessionId: child, targetInfo } = p;
      sessionNames.set(child, `${targetInfo.type}`);
      for (const m of ["Runtime.enable", "Log.enable"]) cdp.send(m, {}, child).catch(() => {});
      cdp.send("Runtime.runIfWaitingForDebugger", {}, child).catch(() => {});
    } else if (method === "Inspector.targetCrashed") {
      note(`[${where}] the page crashed`);
    }
  });

  const version = await cdp.send("Browser.getVersion");
  const { targetId } = await cdp.send("Target.createTarget", { url: "about:blank" });
  const { sessionId } = await cdp.send("Target.attachToTarget", { targetId, flatten: true });
  sessionNames.set(sessionId, "page");
  const page = (method, params, timeoutMs) => cdp.send(method, params, sessionId, timeoutMs);
  await Promise.all([page("Runtime.enable"), page("Log.enable"), page("Page.enable"), page("Inspector.enable").catch(() => {})]);
  await page("Target.setAutoAttach", { autoAttach: true, waitForDebuggerOnStart: false, flatten: true });
  await page("Emulation.setDeviceMetricsOverride", { width: 1000, height: 1300, deviceScaleFactor: 1, mobile: false });

  // Counts the changes of #translation while the page translates: token-by-token streaming
  // makes several per sentence (the final text alone would make one).
  // The chat log likewise while a reply streams.
  await page("Page.addScriptToEvaluateOnNewDocument", {
    source: `window.__petrelTestUpdates = 0;
      window.__petrelTestChatUpdates = 0;
      document.addEventListener("DOMContentLoaded", () => {
        const out = document.getElementById("translation");
        if (out) new MutationObserver((records) => {
          if (document.body.dataset.state === "translating") window.__petrelTestUpdates += records.length;
        }).observe(out, { subtree: true, childList: true, characterData: true });
        const log = document.getElementById("chat-log");
        if (log) new MutationObserver((records) => {
          if (document.body.dataset.state === "chatting") window.__petrelTestChatUpdates += records.length;
        }).observe(log, { subtree: true, childList: true, characterData: true });
      });`,
  });

  const evaluate = async (expression, awaitPromise = false, timeoutMs) => {
    const r = await page("Runtime.evaluate", { expression, returnByValue: true, awaitPromise }, timeoutMs);
    if (r.exceptionDetails) throw new Error(r.exceptionDetails.exception?.description ?? r.exceptionDetails.text);
    return r.result.value;
  };
  const snapshot = () =>
    evaluate(`(() => {
      const t = (id) => document.getElementById(id)?.textContent ?? null;
      const chat = [...document.querySelectorAll("#chat-log li")].map((li) => ({ role: li.dataset.role, text: li.textContent }));
      return { state: document.body?.dataset.state ?? null, translation: t("translation"), loadMs: t("load-ms"),
               tokensPerS: t("tokens-per-s"), tokens: t("token-count"), error: document.getElementById("error")?.hidden === false ? t("error") : null,
               modelStatus: t("model-status"), updates: window.__petrelTestUpdates ?? null,
               chat, chatUpdates: window.__petrelTestChatUpdates ?? null, replyTokensPerS: t("reply-tokens-per-s"),
               chatLoadMs: t("chat-load-ms"), isolated: window.crossOriginIsolated === true,
               threaded: window.petrelDemo?.worker?.threaded ?? null, threads: window.petrelDemo?.worker?.threads ?? null };
    })()`);
  const waitFor = async (states, seconds, what) => {
    const deadline = Date.now() + seconds * 1000;
    let snap = null;
    while (Date.now() < deadline) {
      if (cdp.closed) throw Object.assign(new Error(`${what}: ${cdp.closed.message}`), { snap });
      snap = await snapshot().catch(() => null);
      if (snap && states.includes(snap.state)) return snap;
      await sleep(100);
    }
    throw Object.assign(new Error(`${what}: the page did not finish in ${seconds} s (state ${snap?.state ?? "unknown"})`), { snap });
  };

  const failures = [];
  let shot = false;
  const screenshot = async (file) => {
    try {
      const { data } = await page("Page.captureScreenshot", { format: "png" });
      await fsp.mkdir(path.dirname(path.resolve(file)), { recursive: true });
      await fsp.writeFile(file, Buffer.from(data, "base64"));
    } catch (err) {
      failures.push(`screenshot: ${err.message}`);
    }
  };
  let snap = null;
  let second = null;
  const query = new URLSearchParams({ model: "/demo-model.petrel", text: o.texts.join("\n"), auto: "1", beam: String(o.beam) });
  const pageUrl = `${server.url}?${query}`;
  if (o.model) try {
    const nav = await page("Page.navigate", { url: pageUrl });
    if (nav.errorText) throw new Error(`navigation failed: ${nav.errorText}`);
    snap = await waitFor(["done", "error"], o.pageTimeout, "load and translate");
    if (o.screenshot) {
      shot = true;
      await screenshot(o.screenshot); // every sentence on the page
    }
    if (snap.state === "error") throw new Error(`the page reported an error: ${snap.error}`);

    const lines = snap.translation.split("\n");
    if (!(snap.updates > o.texts.length)) failures.push(`no streaming: #translation changed ${snap.updates} times while translating`);
    if (lines.length !== o.texts.length) failures.push(`${lines.length} translated lines for ${o.texts.length} sentences`);
    for (const [label, want] of expectations) {
      want.forEach((w, i) => {
        if (lines[i] !== w) failures.push(`sentence ${i + 1} ${quote(o.texts[i])}: page ${quote(lines[i] ?? null)} != ${label} ${quote(w)}`);
      });
    }

    // The clicks path, in the same page: the model again through the file input (a new
    // worker), then the Translate button on the same sentences (the engine warm now).
    await evaluate(`document.body.dataset.state = "test"`);
    const { root } = await page("DOM.getDocument", { depth: 0 });
    const { nodeId } = await page("DOM.querySelector", { nodeId: root.nodeId, selector: "#model-file" });
    await page("DOM.setFileInputFiles", { nodeId, files: [path.resolve(o.model)] });
    const loaded = await waitFor(["ready", "error"], o.pageTimeout, "load from the file input");
    if (loaded.state === "error") throw new Error(`loading from the file input: ${loaded.error}`);
    if (!loaded.modelStatus?.includes(path.basename(o.model))) failures.push(`file input: the page says ${quote(loaded.modelStatus)}`);
    await evaluate(`(() => { document.body.dataset.state = "test"; document.getElementById("translate").click(); })()`);
    second = await waitFor(["done", "error"], o.pageTimeout, "second translation");
    if (second.state === "error") failures.push(`second translation: the page reported an error: ${second.error}`);
    else if (second.translation !== snap.translation) failures.push(`second translation ${quote(second.translation)} != first ${quote(snap.translation)}`);
  } catch (err) {
    failures.push(err.message);
    snap ??= err.snap ?? (await snapshot().catch(() => null));
  }

  if (o.model && o.screenshot && !shot) await screenshot(o.screenshot);

  // Both builds: the page above (cross-origin isolated) ran the threaded one; ?threads=1
  // runs the single-threaded one on the same sentences, to the same translations.
  let single = null;
  if (o.model && snap?.state === "done") {
    if (snap.threaded !== true) failures.push(`the isolated page ran the single-threaded build (threads ${snap.threads})`);
    try {
      const nav = await page("Page.navigate", { url: `${pageUrl}&threads=1` });
      if (nav.errorText) throw new Error(`single-threaded build: navigation failed: ${nav.errorText}`);
      single = await waitFor(["done", "error"], o.pageTimeout, "load and translate, the single-threaded build");
      if (single.state === "error") throw new Error(`single-threaded build: the page reported an error: ${single.error}`);
      if (single.threaded !== false) failures.push(`?threads=1 ran the threaded build`);
      if (single.translation !== snap.translation)
        failures.push(`single-threaded build ${quote(single.translation)} != threaded build ${quote(snap.translation)}`);
    } catch (err) {
      failures.push(err.message);
    }
  }

  // The chat: the messages but the last by the query, the last with the Send button.
  let chatSnap = null;
  const chatQuery = new URLSearchParams({ model: "/chat-model.petrel", chat: o.chat.slice(0, -1).join("\n"), auto: "1",
                                          maxNewTokens: String(o.chatMaxNewTokens) });
  if (o.system !== undefined) chatQuery.set("system", o.system);
  const chatUrl = `${server.url}?${chatQuery}`;
  if (o.chatModel) {
    try {
      const nav = await page("Page.navigate", { url: chatUrl });
      if (nav.errorText) throw new Error(`chat: navigation failed: ${nav.errorText}`);
      chatSnap = await waitFor(["done", "error"], o.pageTimeout, "load and chat");
      if (chatSnap.state === "error") throw new Error(`chat: the page reported an error: ${chatSnap.error}`);
      const typed = quote(o.chat.at(-1));
      await evaluate(`(() => { document.body.dataset.state = "test"; document.getElementById("chat-input").value = ${typed};
                         document.getElementById("chat-send").click(); })()`);
      chatSnap = await waitFor(["done", "error"], o.pageTimeout, "the message sent with the button");
      if (chatSnap.state === "error") throw new Error(`chat: the page reported an error: ${chatSnap.error}`);
      const replies = chatSnap.chat.filter((m) => m.role === "assistant").map((m) => m.text);
      const users = chatSnap.chat.filter((m) => m.role === "user").map((m) => m.text);
      if (JSON.stringify(users) !== JSON.stringify(o.chat)) failures.push(`chat: the log's messages ${quote(users)} != ${quote(o.chat)}`);
      if (replies.length !== o.chat.length) failures.push(`chat: ${replies.length} replies for ${o.chat.length} messages`);
      if (nativeReplies) {
        nativeReplies.forEach((want, i) => {
          if (replies[i] !== want) failures.push(`chat reply ${i + 1} to ${quote(o.chat[i])}: page ${quote(replies[i] ?? null)} != native ${quote(want)}`);
        });
      }
      if (!(chatSnap.chatUpdates > 2 * o.chat.length)) failures.push(`chat: no streaming: the log changed ${chatSnap.chatUpdates} times while replying`);
      if (!chatSnap.isolated) failures.push("chat: the page is not cross-origin isolated (serve.mjs sends COOP/COEP)");
      // The page's worker reaches a running generation through shared memory: a stop slot
      // set for the next call before it runs ends that generation after its first token.
      const stopped = await evaluate(`(async () => {
        const w = window.petrelDemo.worker;
        if (!(w._stops instanceof Int32Array)) return "the worker client has no shared memory";
        w._stop(w._next);
        const r = await w.model.generateDetailed("hello", { maxNewTokens: 20, ignoreEos: true, onToken() {} });
        return r.ids.length === 1 ? "" : "a generation with its stop slot set generated " + r.ids.length + " tokens";
      })()`, true, 60000);
      if (stopped) failures.push(`chat: stopping a running generation: ${stopped}`);
    } catch (err) {
      failures.push(err.message);
      chatSnap ??= err.snap ?? (await snapshot().catch(() => null));
    }
    if (o.chatScreenshot) await screenshot(o.chatScreenshot);
  }

  const parts = [];
  if (o.model) {
    const translations = (snap?.translation ?? "").split("\n");
    const pairs = o.texts.map((t, i) => `${quote(t)} -> ${quote(translations[i] ?? "")}`).join("; ");
    const n = `${o.texts.length} sentence${o.texts.length === 1 ? "" : "s"}`;
    const checked = expectations.length ? `${n} ${o.texts.length === 1 ? "matches" : "match"} ${expectations.map(([l]) => l).join(" and ")}` : `${n} (nothing to compare with)`;
    const warm = second?.state === "done" ? `, ${second.tokensPerS} on the 2nd run` : "";
    const builds = single?.state === "done"
      ? `; threaded build (${snap?.threads ?? "?"} threads) and single-threaded build (load ${single.loadMs} ms, ${single.tokensPerS} tokens/s) ` +
        `${single.translation === snap?.translation ? "equal" : "DIFFER"}`
      : "";
    parts.push(`load ${snap?.loadMs ?? "?"} ms, ${snap?.tokensPerS ?? "?"} tokens/s${warm} (${snap?.tokens ?? "?"} tokens streamed in ${snap?.updates ?? "?"} updates, beam ${o.beam})${builds}; ${checked}: ${pairs}`);
  }
  if (o.chatModel) {
    const replies = (chatSnap?.chat ?? []).filter((m) => m.role === "assistant").map((m) => quote(m.text));
    const checked = nativeReplies ? `${o.chat.length} replies ${failures.some((f) => f.startsWith("chat reply")) ? "checked against" : "match"} native --chat` : `${o.chat.length} replies (nothing to compare with)`;
    parts.push(`chat: load ${chatSnap?.chatLoadMs ?? "?"} ms, ${chatSnap?.replyTokensPerS ?? "?"} tokens/s on the last reply (${chatSnap?.chatUpdates ?? "?"} updates streamed, ` +
               `${chatSnap?.isolated ? "" : "not "}cross-origin isolated); ${checked}: ${replies.join(", ")}`);
  }
  const summary = `${parts.join("; ")} (${version.product})`;
  if (failures.length === 0) {
    return finish(0, `PASS petrel web: ${summary}`);
  }
  const report = [
    `FAIL petrel web: ${summary}`,
    ...failures.map((f) => `  - ${f}`),
    o.model ? `  page: ${pageUrl}` : "",
    o.chatModel ? `  chat page: ${chatUrl}` : "",
    o.model ? `  state: ${snap?.state ?? "unknown"}${snap?.error ? `; error: ${snap.error}` : ""}` : "",
    o.chatModel ? `  chat state: ${chatSnap?.state ?? "unknown"}${chatSnap?.error ? `; error: ${chatSnap.error}` : ""}` : "",
    consoleLines.length ? "  console and exceptions:" : "  (no console messages)",
    ...consoleLines.map((l) => `    ${l}`),
    browserLogTail(),
  ].filter(Boolean);
  return finish(1, report.join("\n"));
}

main().catch(async (err) => {
  await sleep(300); // Chromium's last words, if it is exiting
  finish(1, [`test-in-chromium: FAIL: ${err?.stack ?? err}`, browserLogTail()].filter(Boolean).join("\n"));
});
