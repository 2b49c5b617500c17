// Petrel web example: loads a .petrel model into a Web Worker (Petrel's WebAssembly build)
// and translates token by token without blocking the page.
//
// Query parameters (for links and automated tests):
//   model=URL           load this model at start-up (relative to the page)
//   demo=URL            the model the "Load the demo model" button fetches (default demo-model.petrel)
//   text=...            the source text (each line is translated on its own)
//   auto=1              load (model=, else the demo model) and translate without clicks
//   beam=K  maxNewTokens=N  targetLanguage=CODE   decoding options
//   pkg=URL             the Petrel JS package directory (default ./pkg/; same origin only)
// The page reports its progress in document.body.dataset.state: idle, loading, ready,
// translating, done or error; the final translation is the text of #translation, the
// load time #load-ms, the speed #tokens-per-s, an error #error.

const params = new URLSearchParams(location.search);
const pkgBase = new URL(ensureSlash(params.get("pkg") ?? "./pkg/"), location.href);
const demoUrl = params.get("demo") ?? "demo-model.petrel";
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
};

let pkgPromise = null; // the package module, imported once
let worker = null; // the PetrelWorker holding the current model
let busy = false; // a load or a translation is running

function ensureSlash(s) {
  return s.endsWith("/") ? s : s + "/";
}

function setState(state) {
  document.body.dataset.state = state;
}

function setBusy(value) {
  busy = value;
  ui.file.disabled = value;
  ui.demo.disabled = value;
  ui.translate.disabled = value || !worker;
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
  ["architecture", "Architecture"],
  ["source", "Converted from"],
  ["parameter_count", "Parameters", (n) => `${(n / 1e6).toFixed(2)} M`],
  ["file_size", "File size", (n) => `${(n / 2 ** 20).toFixed(1)} MiB`],
  ["dtype", "Weights"],
  ["encoder_layers", "Layers", (n, info) => `${n} + ${info.decoder_layers ?? "?"}, d_model ${info.d_model ?? "?"}`],
  ["vocab_size", "Vocabulary"],
  ["tokenizer", "Tokenizer"],
  ["languages", "Languages", (v) => (v.length ? formatValue(v) : null)],
  ["num_beams", "Model's beam"],
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
    const t0 = performance.now();
    const next = new PetrelWorker({ workerUrl: new URL("petrel-worker.mjs", pkgBase) });
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
    ui.loadMs.textContent = formatNumber(ms, 0);
    const engineMs = Number.isFinite(model?.loadMs) ? `; the engine's part ${formatNumber(model.loadMs, 1)} ms` : "";
    const isa = model?.isa ? `, ${model.isa} kernels` : "";
    ui.modelStatus.textContent = `Loaded ${label} in ${formatNumber(ms, 0)} ms (worker start, download and load${engineMs}${isa}).`;
    showModelInfo(worker.info);
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

ui.source.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
    event.preventDefault();
    ui.form.requestSubmit();
  }
});

window.addEventListener("error", (event) => showError(event.error ?? event.message, "Unexpected error"));
window.addEventListener("unhandledrejection", (event) => showError(event.reason, "Unexpected error"));

// For tests and the console: petrelDemo.translate("text") resolves to the translation.
window.petrelDemo = { loadModel, translate, get worker() { return worker; } };

// --- automation by query parameters ----------------------------------------------

if (pkgOriginError) showError(pkgOriginError);
if (params.has("text")) ui.source.value = params.get("text");
if (params.has("beam")) {
  const beam = params.get("beam");
  if (![...ui.beam.options].some((o) => o.value === beam)) ui.beam.add(new Option(beam, beam));
  ui.beam.value = beam;
}
if (params.has("maxNewTokens")) ui.maxNewTokens.value = params.get("maxNewTokens");

const auto = params.get("auto") === "1";
const startModel = params.get("model") ?? (auto ? demoUrl : null);
if (startModel) {
  const url = new URL(startModel, location.href).href;
  const label = url.split("/").pop() || url;
  loadModel(url, label)
    .then(() => (auto ? translate(ui.source.value) : undefined))
    .catch(() => {
      /* shown in the page */
    });
}
