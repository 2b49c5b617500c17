#!/usr/bin/env node
// The benchmark page's static server (Node 20, no dependencies), on 127.0.0.1 only:
//   /                   this directory (page.html, page.mjs)
//   /petrel/...         Petrel's JS package (--petrel-pkg DIR)
//   /wllama/...         node_modules/@wllama/wllama/esm (npm install in this directory)
//   /models/model.petrel, /models/model.gguf   the two model files
// Every response carries COOP same-origin + COEP require-corp (+ CORP same-origin), so the
// page is cross-origin isolated: SharedArrayBuffer exists and both engines can run their
// threaded builds. By hand, to look at the page in a browser:
//   node bench/wasm-lm/serve.mjs --petrel-pkg DIR --petrel-model F.petrel --gguf F.gguf
import http from "node:http";
import fs from "node:fs";
import fsp from "node:fs/promises";
import path from "node:path";
import { pipeline } from "node:stream";
import { fileURLToPath, pathToFileURL } from "node:url";
// The example page's server's checks: a URL path as a regular file inside its root, and its type.
import { mimeType, resolveInside } from "../../examples/web/serve.mjs";

export const HERE = path.dirname(fileURLToPath(import.meta.url));
export const WLLAMA_DIR = path.join(HERE, "node_modules", "@wllama", "wllama");

/**
 * Resolves to { url, close() }. options: { petrelPkg, petrelModel, gguf, port = 0, log = false }.
 * `requests` counts the bytes sent per path (the driver checks that the models were fetched).
 */
export async function startServer({ petrelPkg, petrelModel, gguf, port = 0, log = false }) {
  const mounts = [
    ["/petrel/", path.resolve(petrelPkg)],
    ["/wllama/", path.join(WLLAMA_DIR, "esm")],
  ];
  const files = { "/models/model.petrel": path.resolve(petrelModel), "/models/model.gguf": path.resolve(gguf) };
  const headers = {
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Embedder-Policy": "require-corp",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Cache-Control": "no-store",
  };
  const server = http.createServer(async (req, res) => {
    const send = (status, body) => {
      res.writeHead(status, { "Content-Type": "text/plain; charset=utf-8", ...headers });
      res.end(req.method === "HEAD" ? undefined : body);
      if (log) console.error(`${status} ${req.method} ${req.url}`);
    };
    try {
      if (req.method !== "GET" && req.method !== "HEAD") return send(405, "method not allowed\n");
      const { pathname } = new URL(req.url, "http://localhost");
      let found = null;
      if (Object.hasOwn(files, pathname)) {
        const stat = await fsp.stat(files[pathname]).catch(() => null);
        if (stat?.isFile()) found = { file: files[pathname], size: stat.size };
      } else {
        const mount = mounts.find(([prefix]) => pathname.startsWith(prefix));
        if (mount) found = await resolveInside(mount[1], pathname.slice(mount[0].length));
        else if (pathname === "/" || pathname === "/page.html") found = await resolveInside(HERE, "page.html");
        else if (pathname === "/page.mjs") found = await resolveInside(HERE, "page.mjs");
      }
      if (!found) return send(404, "not found\n");
      res.writeHead(200, {
        "Content-Type": mimeType(found.file),
        "Content-Length": found.size,
        ...headers,
      });
      if (log) console.error(`200 ${req.method} ${req.url}`);
      if (req.method === "HEAD") return res.end();
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
    server.listen(port, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const url = `http://127.0.0.1:${server.address().port}/`;
  return {
    url,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const o = { port: 0, log: false };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === "--petrel-pkg") o.petrelPkg = value();
    else if (a === "--petrel-model") o.petrelModel = value();
    else if (a === "--gguf") o.gguf = value();
    else if (a === "--port") o.port = Number(value());
    else if (a === "--log") o.log = true;
    else {
      console.error("usage: node serve.mjs --petrel-pkg DIR --petrel-model F.petrel --gguf F.gguf [--port N] [--log]");
      process.exit(2);
    }
  }
  if (!o.petrelPkg || !o.petrelModel || !o.gguf) {
    console.error("serve.mjs: --petrel-pkg, --petrel-model and --gguf are required");
    process.exit(2);
  }
  const { url } = await startServer(o);
  console.log(url);
}
