// HTTP/3 file server for the interop runner, run by Bun (see run-server).
// Bun.serve's HTTP/3 listener is lsquic (Bun links it for `http3: true`); `http1: false`
// leaves out the TCP listener, so only UDP IP:PORT is bound.
// Files are answered with Bun.file() responses, which Bun streams from disk (sendfile-like,
// never read whole), so 8 GiB files work.
// Not reachable through Bun's API (so not applied): congestion control, cipher choice,
// socket buffers, GSO/GRO, qlog, keylog; Bun does not report the negotiated ALPN/cipher either,
// so no QIR_NEGOTIATED line is printed.
import { resolve, sep } from "node:path";

const { IP, PORT, WWW, CERTS } = process.env;
if (!IP || !PORT || !WWW || !CERTS) {
  console.error("lsquic server: IP, PORT, WWW and CERTS must be set");
  process.exit(1);
}
const root = resolve(WWW);

const server = Bun.serve({
  hostname: IP,
  port: Number(PORT),
  http3: true,
  http1: false,
  development: false,
  idleTimeout: 0, // never close a connection for idling (long downloads on slow links)
  tls: {
    cert: Bun.file(`${CERTS}/cert.pem`),
    key: Bun.file(`${CERTS}/priv.key`),
  },
  async fetch(req) {
    if (req.method !== "GET" && req.method !== "HEAD") {
      return new Response("method not allowed\n", { status: 405 });
    }
    let path;
    try {
      path = resolve(root, "." + decodeURIComponent(new URL(req.url).pathname));
    } catch {
      return new Response("bad request\n", { status: 400 });
    }
    if (!path.startsWith(root + sep)) {
      return new Response("forbidden\n", { status: 403 });
    }
    const file = Bun.file(path);
    if (!(await file.exists())) {
      console.error(`lsquic server: ${path}: not found`);
      return new Response("not found\n", { status: 404 });
    }
    return new Response(file, {
      headers: { "content-type": "application/octet-stream" },
    });
  },
  error(err) {
    console.error("lsquic server: request failed:", err);
    return new Response("internal error\n", { status: 500 });
  },
});

console.error(`lsquic server: bun ${Bun.version}, HTTP/3 on udp ${IP}:${server.port}, serving ${root}`);

function shutdown(sig) {
  console.error(`lsquic server: ${sig}, stopping`);
  server.stop(true);
  process.exit(0);
}
process.on("SIGTERM", () => shutdown("SIGTERM"));
process.on("SIGINT", () => shutdown("SIGINT"));
