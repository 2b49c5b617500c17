// Petrel web example: loads a .petrel model into a Web Worker (Petrel's WebAssembly build)
// and, without blocking the page, translates token by token (a translation model) or
// chats, each reply streamed (a language model: Gemma 3, Llama, Qwen).
//
// Query parameters (for links and automated tests):
//   model=URL           load this model at start-up (relative to the page)
//   demo=URL            the model the "Load the demo model" button fetches (default demo-model.petrel)
//   text=...            the source text (each line is translated on its own)
//   chat=...            language models: the messages to send (one per line)
//   system=...          language models: the conversation's system message
//   auto=1              load (model=, else the demo model) and translate (or chat) without clicks
//   beam=K  maxNewTokens=N  targetLanguage=CODE   decoding options (maxNewTokens: chat too)
//   pkg=URL             the Petrel JS package directory (default ./pkg/; same origin only)
//   threads=N           the engine's threads (1: the single-threaded build; default: the
//                       package's choice, threaded where the page is cross-origin isolated)
// The page reports its progress in document.body.dataset.state: idle, loading, ready,
// translating, chatting, done or error; the final translation is the text of
// #translation, the load time #load-ms, the speed #tokens-per-s; the conversation is
// #chat-log's items (data-role user / assistant), an error #error.

const params = new URLSearchParams(location.search);
const pkgBase = new URL(ensureSlash(params.get("pkg") ?? "./pkg/"), location.href);
const demoUrl = params.get("demo") ?? "demo-model.petrel";
// ?threads=N: the engine's threads (1: the single-threaded build). Without it the package
// chooses: the threaded build on this cross-origin isolated page, one thread per core.
const threadsParam = params.get("threads");
const threads = threadsParam === null ? undefined : Number(threadsParam);
// The package is imported as a script: never from another origin that a link could name.
const pkgOriginError = pkgBase.origin === location.origin ? null
  : new Error(`the pkg parameter must be a URL of this page's origin (${location.origin}), not ${pkgBase.href}`);

const $ = (id) => document.getElementById(id);
const ui = {
  file: $("model-file"),
  demo: $("load-demo"),
  modelStatus: $("model-status"),
  modelInfo: $("model-info"),
  modelJson: $("model-json"),
  form: $("translate-form"),
  source: $("source"),
  beam: $("beam"),
  maxNewTokens: $("max-new-tokens"),
  targetLanguageRow: $("target-language-row"),
  targetLanguage: $("target-language"),
  translate: $("translate"),
  translation: $("translation"),
  loadMs: $("load-ms"),
  translateMs: $("translate-ms"),
  tokenCount: $("token-count"),
  tokensPerS: $("tokens-per-s"),
  error: $("error"),
  translateSection: $("translate-section"),
  chatSection: $("chat-section"),
  system: $("system"),
  chatNew: $("chat-new"),
  chatLog: $("chat-log"),
  chatForm: $("chat-form"),
  chatInput: $("chat-input"),
  chatMaxTokens: $("chat-max-tokens"),
  chatSample: $("chat-sample"),
  chatSampling: $("chat-sampling"),
  chatTemperature: $("chat-temperature"),
  chatSeed: $("chat-seed"),
  chatSend: $("chat-send"),
  chatStop: $("chat-stop"),
  chatLoadMs: $("chat-load-ms"),
  replyMs: $("reply-ms"),
  replyTokens: $("reply-tokens"),
  reusedTokens: $("reused-tokens"),
  replyTokensPerS: $("reply-tokens-per-s"),
};

let pkgPromise = null; // the package module, imported once
let worker = null; // the PetrelWorker holding the current model
let busy = false; // a load, a translation or a reply is running
let conversation = null; // a language model's PetrelWorkerConversation
let stopRequested = false; // the Stop button was pressed during the current reply

function ensureSlash(s) {
  return s.endsWith("/") ? s : s + "/";
}

function setState(state) {
  document.body.dataset.state = state;
}

// A language model is loaded (it chats; a translation model translates).
const isLanguageModel = () => !!worker?.info?.decoder_only;

function setBusy(value) {
  busy = value;
  ui.file.disabled = value;
  ui.demo.disabled = value;
  ui.translate.disabled = value || !worker;
  ui.chatSend.disabled = value || !isLanguageModel();
  ui.chatNew.disabled = value || !isLanguageModel();
}

function clearError() {
  ui.error.hidden = true;
  ui.error.textContent = "";
}

function describeError(err) {
  if (err == null) return "unknown error";
  if (typeof err !== "object") return String(err);
  const name = err.name && err.name !== "Error" ? `${err.name}: ` : "";
  const code = err.code != null && !String(err.message ?? "").includes(String(err.code)) ? ` (${err.code})` : "";
  return `${name}${err.message ?? String(err)}${code}`;
}

function showError(err, context) {
  const text = (context ? `${context}: ` : "") + describeError(err);
  ui.error.textContent = text;
  ui.error.hidden = false;
  setState("error");
  console.error(text, err);
}

function importPackage() {
  if (pkgOriginError) return Promise.reject(pkgOriginError);
  pkgPromise ??= import(new URL("petrel-worker-client.mjs", pkgBase).href).catch((err) => {
    pkgPromise = null;
    throw new Error(`could not load the Petrel package from ${pkgBase.href} (${describeError(err)})`);
  });
  return pkgPromise;
}

function formatNumber(value, digits) {
  return Number.isFinite(value) ? value.toFixed(digits) : "–";
}

function formatValue(value) {
  if (value == null) return "–";
  if (Array.isArray(value)) {
    const shown = value.slice(0, 8).map((v) => (typeof v === "object" ? JSON.stringify(v) : String(v)));
    return shown.join(", ") + (value.length > 8 ? `, … (${value.length})` : "");
  }
  if (typeof value === "object") {
    const json = JSON.stringify(value);
    return json.length > 100 ? json.slice(0, 97) + "…" : json;
  }
  if (typeof value === "number" && !Number.isInteger(value)) return String(Number(value.toPrecision(6)));
  return String(value);
}

// The fields shown first (the package's info object has more: all of them are under "All fields").
const INFO_FIELDS = [
  ["architecture", "Architecture", (v, info) => (info.model_type ? `${v} (${info.model_type})` : v)],
  ["source", "Converted from"],
  ["parameter_count", "Parameters", (n) => `${(n / 1e6).toFixed(2)} M`],
  ["file_size", "File size", (n) => `${(n / 2 ** 20).toFixed(1)} MiB`],
  ["dtype", "Weights"],
  ["encoder_layers", "Layers", (n, info) => `${info.decoder_only ? "" : `${n} + `}${info.decoder_layers ?? "?"}, d_model ${info.d_model ?? "?"}`],
  ["vocab_size", "Vocabulary"],
  ["tokenizer", "Tokenizer"],
  ["languages", "Languages", (v) => (v.length ? formatValue(v) : null)],
  ["num_beams", "Model's beam", (n, info) => (info.decoder_only ? null : String(n))],
  ["max_positions", "Positions", (n, info) => (info.decoder_only ? String(n) : null)],
  ["lm", "Chat template", (lm) => (lm.has_chat_template ? `yes (${lm.chat_template.length} bytes)` : "none")],
];

function showModelInfo(info) {
  ui.modelInfo.replaceChildren();
  ui.modelInfo.hidden = ui.modelJson.hidden = true;
  if (!info || typeof info !== "object") return;
  const add = (label, text) => {
    const dt = document.createElement("dt");
    dt.textContent = label;
    const dd = document.createElement("dd");
    dd.append(text);
    ui.modelInfo.append(dt, dd);
  };
  for (const [key, label, format] of INFO_FIELDS) {
    const value = info[key];
    if (value == null || value === "") continue;
    const text = format ? format(value, info) : formatValue(value);
    if (text != null) add(label, text);
  }
  if (ui.modelInfo.childElementCount === 0) {
    for (const [key, value] of Object.entries(info).slice(0, 10)) add(key, formatValue(value));
  }
  ui.modelInfo.hidden = false;
  showLanguages(info);
  ui.modelJson.querySelector("pre").textContent = JSON.stringify(info, null, 2);
  ui.modelJson.hidden = false;
}

// Multilingual models: a choice of the target language (the model's default first).
function showLanguages(info) {
  const languages = Array.isArray(info?.languages) ? info.languages : [];
  const wanted = params.get("targetLanguage") ?? ui.targetLanguage.value;
  ui.targetLanguage.replaceChildren(new Option("model default", ""));
  for (const code of languages) ui.targetLanguage.add(new Option(code, code));
  ui.targetLanguage.value = languages.includes(wanted) ? wanted : "";
  ui.targetLanguageRow.hidden = languages.length === 0;
}

/** Loads a model: `source` is an ArrayBuffer or a URL (string); `label` names it. */
async function loadModel(source, label) {
  if (busy) throw new Error("busy: a model load or a translation is running");
  setBusy(true);
  clearError();
  setState("loading");
  ui.modelStatus.textContent = `Loading ${label}…`;
  ui.modelInfo.hidden = ui.modelJson.hidden = true;
  ui.loadMs.textContent = "–";
  try {
    const { PetrelWorker } = await importPackage();
    worker?.terminate();
    worker = null;
    conversation = null;
    const t0 = performance.now();
    const next = new PetrelWorker({ workerUrl: new URL("petrel-worker.mjs", pkgBase),
                                    ...(threads === undefined ? {} : { threads }) });
    let model;
    try {
      // Bytes are moved to the worker, not copied.
      model = await next.loadModel(source, source instanceof ArrayBuffer ? { transfer: true } : undefined);
    } catch (err) {
      next.terminate();
      throw err;
    }
    // The whole load: worker start, WebAssembly compilation, download, the engine's load.
    const ms = performance.now() - t0;
    worker = next;
    ui.loadMs.textContent = ui.chatLoadMs.textContent = formatNumber(ms, 0);
    const engineMs = Number.isFinite(model?.loadMs) ? `; the engine's part ${formatNumber(model.loadMs, 1)} ms` : "";
    const isa = (model?.isa ? `, ${model.isa} kernels` : "") +
      (next.threaded ? `, ${model.threads} threads (petrel-threads.wasm)` : ", 1 thread (petrel.wasm)");
    ui.modelStatus.textContent = `Loaded ${label} in ${formatNumber(ms, 0)} ms (worker start, download and load${engineMs}${isa}).`;
    showModelInfo(worker.info);
    showMode();
    if (isLanguageModel()) await newConversation();
    setState("ready");
  } catch (err) {
    ui.modelStatus.textContent = `Could not load ${label}.`;
    showError(err, `Loading ${label}`);
    throw err;
  } finally {
    setBusy(false);
  }
}

function resultText(result) {
  if (typeof result === "string") return result;
  return result?.text ?? result?.translation ?? result?.hypotheses?.[0]?.text ?? "";
}

function resultTokens(result) {
  const ids = result?.ids ?? result?.hypotheses?.[0]?.ids;
  return Array.isArray(ids) || ArrayBuffer.isView(ids) ? ids.length : NaN;
}

function decodingOptions() {
  const options = {};
  const beam = Number.parseInt(ui.beam.value, 10);
  if (beam > 0) options.beam = beam;
  const maxNewTokens = Number.parseInt(ui.maxNewTokens.value, 10);
  if (maxNewTokens > 0) options.maxNewTokens = maxNewTokens;
  const targetLanguage = ui.targetLanguage.value || params.get("targetLanguage");
  if (targetLanguage) options.targetLanguage = targetLanguage;
  return options;
}

/** Translates `text` line by line, streaming into #translation; resolves to the translation. */
async function translate(text) {
  if (!worker) throw new Error("no model loaded");
  if (busy) throw new Error("busy: a model load or a translation is running");
  setBusy(true);
  clearError();
  setState("translating");
  ui.translation.setAttribute("aria-busy", "true");
  ui.translation.replaceChildren();
  for (const el of [ui.translateMs, ui.tokenCount, ui.tokensPerS]) el.textContent = "–";

  const options = decodingOptions();
  const lines = text.replace(/\r\n?/g, "\n").split("\n");
  const spans = lines.map((_, i) => {
    const span = document.createElement("span");
    ui.translation.append(span);
    if (i + 1 < lines.length) ui.translation.append("\n");
    return span;
  });
  const outputs = [];
  let tokens = 0;
  let ms = 0;
  try {
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i].trim();
      if (!line) {
        outputs.push("");
        continue;
      }
      let streamed = 0;
      const onToken = (ev) => {
        // One event per decoder step: `delta` extends the text, unless the engine restarted
        // it (a detokenization that changed earlier characters): then `text` is the whole.
        streamed++;
        const span = spans[i];
        if (ev?.restarted || typeof ev?.delta !== "string") span.textContent = ev?.text ?? span.textContent;
        else span.textContent += ev.delta;
      };
      const t0 = performance.now();
      // translateDetailed gives the output token ids too (for tokens/s); translate, the text.
      const result = worker.translateDetailed
        ? await worker.translateDetailed(line, { ...options, onToken })
        : await worker.translate(line, { ...options, onToken });
      ms += performance.now() - t0;
      const final = resultText(result);
      spans[i].textContent = final; // the final text is authoritative (the streamed one ends the same)
      outputs.push(final);
      tokens += resultTokens(result) || streamed;
    }
    const translation = outputs.join("\n");
    ui.translation.textContent = translation;
    ui.translateMs.textContent = formatNumber(ms, 0);
    ui.tokenCount.textContent = String(tokens);
    ui.tokensPerS.textContent = ms > 0 ? formatNumber((tokens * 1000) / ms, 1) : "–";
    setState("done");
    return translation;
  } catch (err) {
    showError(err, "Translating");
    throw err;
  } finally {
    ui.translation.setAttribute("aria-busy", "false");
    setBusy(false);
  }
}

// --- chat (language models) -----------------------------------------------------

// The translate form for a translation model, the chat for a language model.
function showMode() {
  const chat = isLanguageModel();
  ui.chatSection.hidden = !chat;
  ui.translateSection.hidden = chat;
}

function addMessage(role, text) {
  const li = document.createElement("li");
  li.dataset.role = role;
  li.textContent = text;
  ui.chatLog.append(li);
  li.scrollIntoView({ block: "nearest" });
  return li;
}

// The log as the conversation holds it (after make_room dropped its oldest exchanges).
function showMessages(messages) {
  ui.chatLog.replaceChildren();
  for (const m of messages) addMessage(m.role, m.content);
}

/** Starts a new conversation with the system message in #system (the old one is freed). */
async function newConversation() {
  if (!isLanguageModel()) throw new Error("no language model loaded");
  const old = conversation;
  conversation = null;
  ui.chatLog.replaceChildren();
  await old?.free();
  const system = ui.system.value.trim();
  conversation = await worker.model.chat(system ? { system } : {});
  if (system) addMessage("system", system);
  for (const el of [ui.replyMs, ui.replyTokens, ui.reusedTokens, ui.replyTokensPerS]) el.textContent = "–";
}

function chatOptions() {
  const options = {};
  const maxNewTokens = Number.parseInt(ui.chatMaxTokens.value, 10);
  if (maxNewTokens > 0) options.maxNewTokens = maxNewTokens;
  if (ui.chatSample.checked) {
    options.doSample = true;
    const temperature = Number.parseFloat(ui.chatTemperature.value);
    if (temperature > 0) options.temperature = temperature;
    const seed = Number.parseInt(ui.chatSeed.value, 10);
    if (seed >= 0) options.seed = seed;
  }
  return options;
}

// The reply's token limit, as the engine resolves it (what make_room must leave room for).
function replyTokens(options) {
  const info = worker.info;
  return options.maxNewTokens ?? (info.lm?.max_new_tokens || Math.min(256, info.max_positions));
}

/** Sends `message` and streams the reply into the log; resolves to the reply's text. */
async function sendMessage(message) {
  if (!isLanguageModel()) throw new Error("no language model loaded");
  if (busy) throw new Error("busy: a model load or a reply is running");
  setBusy(true);
  clearError();
  setState("chatting");
  ui.chatLog.setAttribute("aria-busy", "true");
  for (const el of [ui.replyMs, ui.replyTokens, ui.reusedTokens, ui.replyTokensPerS]) el.textContent = "–";
  stopRequested = false;
  ui.chatStop.disabled = false;
  try {
    if (!conversation) await newConversation();
    const options = chatOptions();
    // As petrel-run --chat: a conversation grown to the model's positions drops its oldest exchanges.
    const dropped = await conversation.makeRoom(message, replyTokens(options));
    if (dropped > 0) showMessages(await conversation.messages());
    addMessage("user", message);
    const reply = addMessage("assistant", "");
    const t0 = performance.now();
    const result = await conversation.replyDetailed(message, {
      ...options,
      // Each token's text; returning false stops the reply (in a cross-origin isolated page
      // the worker sees it at its next token; elsewhere it finishes the reply).
      onToken: (event) => {
        if (stopRequested) return false;
        reply.textContent += event.delta;
        return true;
      },
    });
    const ms = performance.now() - t0;
    reply.textContent = result.text; // the final text is authoritative (the streamed one ends the same)
    if (stopRequested) reply.dataset.stopped = "";
    const t = result.timings;
    ui.replyMs.textContent = formatNumber(ms, 0);
    ui.replyTokens.textContent = String(result.ids.length);
    ui.reusedTokens.textContent = String(result.reusedTokens);
    ui.replyTokensPerS.textContent = t.generateMs > 0 ? formatNumber((t.generatedTokens * 1000) / t.generateMs, 1) : "–";
    setState("done");
    return result.text;
  } catch (err) {
    showError(err, "Chatting");
    throw err;
  } finally {
    ui.chatLog.setAttribute("aria-busy", "false");
    ui.chatStop.disabled = true;
    setBusy(false);
  }
}

/** Sends each message in turn (automation); resolves to the replies. */
async function chatAll(messages) {
  const replies = [];
  for (const m of messages) replies.push(await sendMessage(m));
  return replies;
}

// --- wiring ---------------------------------------------------------------------

ui.file.addEventListener("change", async () => {
  const file = ui.file.files?.[0];
  if (!file) return;
  try {
    await loadModel(await file.arrayBuffer(), file.name);
  } catch {
    /* shown in the page */
  } finally {
    ui.file.value = ""; // choosing the same file again loads it again
  }
});

ui.demo.addEventListener("click", async () => {
  try {
    await loadModel(new URL(demoUrl, location.href).href, "the demo model");
  } catch {
    /* shown in the page */
  }
});

ui.form.addEventListener("submit", async (event) => {
  event.preventDefault();
  if (busy || !worker) return;
  try {
    await translate(ui.source.value);
  } catch {
    /* shown in the page */
  }
});

ui.chatForm.addEventListener("submit", async (event) => {
  event.preventDefault();
  const message = ui.chatInput.value.trim();
  if (busy || !isLanguageModel() || !message) return;
  ui.chatInput.value = "";
  try {
    await sendMessage(message);
  } catch {
    /* shown in the page */
  }
});

ui.chatInput.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) {
    event.preventDefault();
    ui.chatForm.requestSubmit();
  }
});

ui.chatStop.addEventListener("click", () => {
  stopRequested = true;
  ui.chatStop.disabled = true;
});

ui.chatNew.addEventListener("click", async () => {
  if (busy) return;
  setBusy(true);
  try {
    await newConversation();
  } catch (err) {
    showError(err, "New conversation");
  } finally {
    setBusy(false);
  }
});

ui.chatSample.addEventListener("change", () => {
  ui.chatSampling.hidden = !ui.chatSample.checked;
});

ui.source.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
    event.preventDefault();
    ui.form.requestSubmit();
  }
});

window.addEventListener("error", (event) => showError(event.error ?? event.message, "Unexpected error"));
window.addEventListener("unhandledrejection", (event) => showError(event.reason, "Unexpected error"));

// For tests and the console: petrelDemo.translate("text") resolves to the translation,
// petrelDemo.chat("message") to the reply.
window.petrelDemo = {
  loadModel, translate, chat: sendMessage, newConversation,
  get worker() { return worker; }, get conversation() { return conversation; },
};

// --- automation by query parameters ----------------------------------------------

if (pkgOriginError) showError(pkgOriginError);
if (params.has("text")) ui.source.value = params.get("text");
if (params.has("beam")) {
  const beam = params.get("beam");
  if (![...ui.beam.options].some((o) => o.value === beam)) ui.beam.add(new Option(beam, beam));
  ui.beam.value = beam;
}
if (params.has("maxNewTokens")) ui.maxNewTokens.value = ui.chatMaxTokens.value = params.get("maxNewTokens");
if (params.has("system")) ui.system.value = params.get("system");
// The messages `chat` sends (one per line; a language model's auto run sends the message box's otherwise).
const chatMessages = params.has("chat") ? params.get("chat").replace(/\r\n?/g, "\n").split("\n").filter((m) => m.trim()) : null;
if (chatMessages?.length) ui.chatInput.value = chatMessages[0];

const auto = params.get("auto") === "1";
const startModel = params.get("model") ?? (auto ? demoUrl : null);
if (startModel) {
  const url = new URL(startModel, location.href).href;
  const label = url.split("/").pop() || url;
  loadModel(url, label)
    .then(() => {
      if (!auto) return undefined;
      if (!isLanguageModel()) return translate(ui.source.value);
      const messages = chatMessages?.length ? chatMessages : [ui.chatInput.value.trim()];
      ui.chatInput.value = "";
      return chatAll(messages);
    })
    .catch(() => {
      /* shown in the page */
    });
}
