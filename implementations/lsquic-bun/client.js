// HTTP/3 download client for the interop runner, run by Bun with --experimental-http3-fetch
// (see run-client). fetch(url, {protocol: "http3"}) goes through Bun's lsquic client.
// Each URL in REQUESTS is written to $DOWNLOADS/<last path segment>; Bun.write(path, response)
// streams the body to the file. Exit 1 on an error, a status other than 200, or a body shorter
// or longer than its content-length.
// TLS: the server certificate is verified against $CERTS/ca.pem, which run-client hands to
// Bun as NODE_EXTRA_CA_CERTS (added to the default trust store). fetch's own `tls: {ca}` option
// cannot be used: with it, Bun 1.4.5 refuses HTTP/3 (HTTP3Unsupported).
// Bun reports neither the negotiated ALPN nor the cipher, so no QIR_NEGOTIATED line.
import { basename } from "node:path";

const { REQUESTS, DOWNLOADS } = process.env;
if (!REQUESTS || !DOWNLOADS) {
  console.error("lsquic client: REQUESTS and DOWNLOADS must be set");
  process.exit(1);
}

async function download(url) {
  const name = basename(decodeURIComponent(new URL(url).pathname));
  if (!name || name === "." || name === "..") throw new Error(`${url}: no file name in the path`);
  const out = `${DOWNLOADS}/${name}`;
  const res = await fetch(url, {
    protocol: "http3",
    decompress: false,
    redirect: "error",
    timeout: false,
  });
  if (res.status !== 200) {
    await res.body?.cancel();
    throw new Error(`${url}: HTTP status ${res.status}`);
  }
  const want = res.headers.get("content-length");
  const got = await Bun.write(out, res);
  if (want !== null && got !== Number(want)) {
    throw new Error(`${url}: got ${got} bytes, content-length is ${want}`);
  }
  return got;
}

let failed = false;
for (const url of REQUESTS.split(/\s+/).filter(Boolean)) {
  const t0 = performance.now();
  try {
    const n = await download(url);
    const s = (performance.now() - t0) / 1000;
    console.error(`lsquic client: ${url}: ${n} bytes in ${s.toFixed(3)} s (${((n * 8) / s / 1e6).toFixed(1)} Mbit/s)`);
  } catch (err) {
    const code = err?.code && !String(err?.message).includes(err.code) ? `${err.code}: ` : "";
    console.error(`lsquic client: ${url}: ${code}${err?.message ?? err}`);
    failed = true;
    break;
  }
}
process.exit(failed ? 1 : 0);
