// bergamot-translator 0.4.9's WebAssembly build (npm @browsermt/bergamot-translator, installed
// here by `npm ci`) loaded in Node: what translate.mjs, markup.mjs and bench/wasm-markup share.
import fs from "node:fs";
import path from "node:path";
import vm from "node:vm";
import { fileURLToPath } from "node:url";

// The directory whose node_modules holds the package (this one by default).
export const BERGAMOT_DIR = path.dirname(fileURLToPath(import.meta.url));

// The glue script and the module of the package under `dir`, or null when it is not installed.
export function bergamotFiles(dir = BERGAMOT_DIR) {
  const worker = path.join(dir, "node_modules", "@browsermt", "bergamot-translator", "worker");
  const glue = path.join(worker, "bergamot-translator-worker.js"), wasm = path.join(worker, "bergamot-translator-worker.wasm");
  return fs.existsSync(glue) && fs.existsSync(wasm) ? { glue, wasm } : null;
}

// The int8 GEMM imports bergamot's WASM asks for, served by its own fallback exports, as its
// translator-worker.js does where Firefox's WebAssembly.mozIntGemm() is missing.
const GEMM = {
  int8_prepare_a: "int8PrepareAFallback",
  int8_prepare_b: "int8PrepareBFallback",
  int8_prepare_b_from_transposed: "int8PrepareBFromTransposedFallback",
  int8_prepare_b_from_quantized_transposed: "int8PrepareBFromQuantizedTransposedFallback",
  int8_prepare_bias: "int8PrepareBiasFallback",
  int8_multiply_and_add_bias: "int8MultiplyAndAddBiasFallback",
  int8_select_columns_of_b: "int8SelectColumnsOfBFallback",
};

// Instantiates the module: the glue (built for web/worker only) is evaluated in this context
// with a global Module. Called again after an abort, it gives a fresh instance (new memory,
// new runtime state). printErr receives the engine's log lines; onAbort its aborts.
export function loadBergamot({ glue, wasmBytes, glueSource }, { printErr = () => {}, onAbort = () => {} } = {}) {
  return new Promise((resolve, reject) => {
    const Module = {
      print: (text) => process.stderr.write(text + "\n"),
      printErr,
      instantiateWasm(info, accept) {
        const wasmGemm = Object.fromEntries(Object.entries(GEMM).map(
          ([name, fallback]) => [name, (...args) => Module.asm[fallback](...args)]));
        WebAssembly.instantiate(wasmBytes, { ...info, wasm_gemm: wasmGemm })
          .then(({ instance }) => accept(instance), reject);
        return {};
      },
      onRuntimeInitialized: () => resolve(Module),
      onAbort: (what) => {
        onAbort(what);
        reject(new Error(`bergamot aborted: ${what}`));
      },
    };
    globalThis.Module = Module;
    // The glue declares `var calledRun;` without a value, so evaluating it again keeps the
    // previous runtime's `true` and never runs the new one: clear it first.
    globalThis.calledRun = undefined;
    vm.runInThisContext(glueSource, { filename: glue });
  });
}

// `bytes` copied into the module's aligned memory (models, shortlists, vocabularies).
export function alignedMemory(Module, bytes, alignment) {
  const memory = new Module.AlignedMemory(bytes.byteLength, alignment);
  memory.getByteArrayView().set(new Int8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  return memory;
}
