#!/usr/bin/env node
// A tiny static server for the Petrel web example (Node 20, no dependencies).
//
//   node examples/web/serve.mjs [--port N] [--pkg DIR] [--model FILE] [--chat-model FILE]
//
// Serves, on 127.0.0.1 only:
//   /                    this directory (index.html, app.mjs, style.css)
//   /pkg/...             the JS package (default: build/wasm/js; --pkg DIR or $PETREL_JS_DIR)
//   /demo-model.petrel   a model file (--model FILE or $PETREL_DEMO_MODEL), if given
//   /chat-model.petrel   a language model file (--chat-model FILE or $PETREL_CHAT_MODEL), if given
// Port 0 (the default) takes any free port; the URL is printed on standard output.
// Anything else is a 404; paths never leave their roots (symbolic links included).
// Every response makes the page cross-origin isolated (COOP same-origin, COEP
// require-corp: everything here is same-origin), so it has shared memory: the worker
// client stops a running generation through it (the page's Stop button).
import http from "node:http";
import fs from "node:fs";
import fsp from "node:fs/promises";
import path from "node:path";
import { pipeline } from "node:stream";
import { fileURLToPath, pathToFileURL } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, "..", "..");

export const DEFAULT_PKG_DIR = path.join(REPO, "build", "wasm", "js");

const MIME = {
  ".html": "text/html; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json; charset=utf-8",
  ".map": "application/json; charset=utf-8",
  ".wasm": "application/wasm",
  ".ts": "text/plain; charset=utf-8",
  ".md": "text/markdown; charset=utf-8",
  ".txt": "text/plain; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".petrel": "application/octet-stream",
};

export function mimeType(file) {
  return MIME[path.extname(file).toLowerCase()] ?? "application/octet-stream";
}

// Resolves a URL path below `root` to a regular file inside it, or null.
export async function resolveInside(root, relUrlPath) {
  let rel;
  try {
    rel = decodeURIComponent(relUrlPath);
  } catch {
    return null;
  }
  if (rel.includes("\0") || rel.includes("\\")) return null;
  const realRoot = await fsp.realpath(root).catch(() => null);
  if (!realRoot) return null;
  let file = path.resolve(realRoot, "." + path.posix.normalize("/" + rel));
  const inside = (p) => p === realRoot || p.startsWith(realRoot + path.sep);
  if (!inside(file)) return null;
  let real = await fsp.realpath(file).catch(() => null);
  if (!real || !inside(real)) return null;
  let stat = await fsp.stat(real).catch(() => null);
  if (stat?.isDirectory()) {
    real = await fsp.realpath(path.join(real, "index.html")).catch(() => null);
    if (!real || !inside(real)) return null;
    stat = await fsp.stat(real).catch(() => null);
  }
  return stat?.isFile() ? { file: real, size: stat.size } : null;
}

/**
 * Starts the server. Resolves to { server, url, close() }.
 * options: { port = 0, host = "127.0.0.1", pageDir = this directory,
 *            pkgDir = $PETREL_JS_DIR or build/wasm/js, model = $PETREL_DEMO_MODEL or none,
 *            log = false }
 */
export async function startServer(options = {}) {
  const host = options.host ?? "127.0.0.1";
  const pageDir = path.resolve(options.pageDir ?? HERE);
  const pkgDir = path.resolve(options.pkgDir ?? process.env.PETREL_JS_DIR ?? DEFAULT_PKG_DIR);
  const modelOpt = options.model ?? process.env.PETREL_DEMO_MODEL;
  const model = modelOpt ? path.resolve(modelOpt) : null;
  const chatModelOpt = options.chatModel ?? process.env.PETREL_CHAT_MODEL;
  const chatModel = chatModelOpt ? path.resolve(chatModelOpt) : null;
  const isolation = { "Cross-Origin-Opener-Policy": "same-origin", "Cross-Origin-Embedder-Policy": "require-corp" };
  const log = options.log ?? false;

  const server = http.createServer(async (req, res) => {
    const send = (status, body, headers = {}) => {
      res.writeHead(status, { "Content-Type": "text/plain; charset=utf-8", ...isolation, ...headers });
      res.end(req.method === "HEAD" ? undefined : body);
      if (log) console.error(`${status} ${req.method} ${req.url}`);
    };
    try {
      if (req.method !== "GET" && req.method !== "HEAD") {
        return send(405, "method not allowed\n", { Allow: "GET, HEAD" });
      }
      const { pathname } = new URL(req.url, "http://localhost");
      let found = null;
      const named = pathname === "/demo-model.petrel" ? model : pathname === "/chat-model.petrel" ? chatModel : undefined;
      if (named !== undefined) {
        if (named) {
          const stat = await fsp.stat(named).catch(() => null);
          if (stat?.isFile()) found = { file: named, size: stat.size };
        }
      } else if (pathname === "/pkg" || pathname.startsWith("/pkg/")) {
        found = await resolveInside(pkgDir, pathname.slice("/pkg".length) || "/");
      } else {
        found = await resolveInside(pageDir, pathname);
      }
      if (!found) return send(404, "not found\n");
      res.writeHead(200, {
        "Content-Type": mimeType(found.file),
        "Content-Length": found.size,
        "Cache-Control": "no-store",
        "X-Content-Type-Options": "nosniff",
        ...isolation,
      });
      if (log) console.error(`200 ${req.method} ${req.url}`);
      if (req.method === "HEAD") return res.end();
      // pipeline() closes the file when the client goes away mid-download (pipe() would not).
      pipeline(fs.createReadStream(found.file), res, (err) => {
        if (err && log) console.error(`${req.method} ${req.url}: ${err.message}`);
      });
    } catch (err) {
      if (!res.headersSent) send(500, "internal error\n");
      else res.destroy();
      if (log) console.error(err);
    }
  });

  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port } = server.address();
  const url = `http://${host}:${port}/`;
  return {
    server,
    url,
    pkgDir,
    model,
    chatModel,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}

function parseArgs(argv) {
  const opts = { port: 0, log: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === "--port") opts.port = Number(value());
    else if (a === "--pkg") opts.pkgDir = value();
    else if (a === "--model") opts.model = value();
    else if (a === "--chat-model") opts.chatModel = value();
    else if (a === "--log") opts.log = true;
    else if (a === "-h" || a === "--help") {
      console.log(
        "usage: node serve.mjs [--port N] [--pkg DIR] [--model FILE.petrel] [--chat-model FILE.petrel] [--log]\n" +
          "  --port N            port on 127.0.0.1 (default 0: any free port)\n" +
          "  --pkg DIR           the JS package directory, served as /pkg/ (default $PETREL_JS_DIR or build/wasm/js)\n" +
          "  --model FILE        a .petrel model served as /demo-model.petrel (default $PETREL_DEMO_MODEL)\n" +
          "  --chat-model FILE   a language model served as /chat-model.petrel (default $PETREL_CHAT_MODEL)\n" +
          "  --log               log each request on standard error",
      );
      process.exit(0);
    } else throw new Error(`unknown argument: ${a}`);
  }
  if (!Number.isInteger(opts.port) || opts.port < 0 || opts.port > 65535) {
    throw new Error("--port must be an integer in 0..65535");
  }
  return opts;
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  let opts;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (err) {
    console.error(`serve.mjs: ${err.message}`);
    process.exit(2);
  }
  const { url, pkgDir, model, chatModel } = await startServer(opts);
  if (!fs.existsSync(pkgDir)) console.error(`serve.mjs: warning: package directory ${pkgDir} does not exist (build the wasm preset)`);
  for (const file of [model, chatModel])
    if (file && !fs.existsSync(file)) console.error(`serve.mjs: warning: model ${file} does not exist`);
  console.log(url);
  if (model) console.log(`${url}?model=/demo-model.petrel`);
  if (chatModel) console.log(`${url}?model=/chat-model.petrel`);
}
