// Shared by the hardening tests (run_hardening.sh starts the servers): raw sockets for
// what no SDK sends, the server's RSS sampled while a case runs, and the checks every
// case ends with — the server is healthy, leaks no rows or blocks, and serves a normal
// request.
import assert from 'node:assert/strict';
import net from 'node:net';
import fs from 'node:fs';
import zlib from 'node:zlib';

export const open = { url: process.env.OPEN_URL, pid: Number(process.env.OPEN_PID) };
export const keyed = { url: process.env.KEYED_URL, pid: Number(process.env.KEYED_PID) };
export const apiKey = process.env.TANDEM_API_KEY;
export const MiB = 1 << 20;

export const user = (content) => [{ role: 'user', content }];
export { zlib };

// One raw request on a fresh connection; resolves with what came back by the time the
// server closed (or `timeoutMs` passed). `chunks` are written in order, `gapMs` apart.
export function raw(server, chunks, { timeoutMs = 10_000, gapMs = 0 } = {}) {
  const { port } = new URL(server.url);
  return new Promise((resolve) => {
    const sock = net.connect(Number(port), '127.0.0.1');
    const parts = [];
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      resolve(parse(Buffer.concat(parts)));
    };
    const timer = setTimeout(finish, timeoutMs);
    sock.on('data', (d) => parts.push(d));
    sock.on('close', finish);
    sock.on('error', finish);
    sock.on('connect', async () => {
      for (const c of Array.isArray(chunks) ? chunks : [chunks]) {
        if (sock.destroyed) break;
        sock.write(c);
        if (gapMs) await new Promise((r) => setTimeout(r, gapMs));
      }
    });
  });
}

function parse(buf) {
  const text = buf.toString('latin1');
  const end = text.indexOf('\r\n\r\n');
  const status = /^HTTP\/1\.1 (\d{3})/.exec(text);
  const head = end < 0 ? text : text.slice(0, end);
  let body = end < 0 ? '' : buf.subarray(end + 4).toString('utf8');
  const len = /\r\nContent-Length: (\d+)/i.exec(head);
  if (len) body = body.slice(0, Number(len[1]));
  let json = null;
  try { json = JSON.parse(body); } catch { /* not JSON */ }
  return { status: status ? Number(status[1]) : 0, head, body, json };
}

// A request head (+ body) as bytes.
export function request(method, path, { headers = {}, body, version = 'HTTP/1.1' } = {}) {
  const lines = [`${method} ${path} ${version}`, 'Host: 127.0.0.1', 'Connection: close'];
  if (body !== undefined && !Object.keys(headers).some((h) => /^(content-length|transfer-encoding)$/i.test(h)))
    lines.push(`Content-Length: ${Buffer.byteLength(body)}`);
  for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
  const head = Buffer.from(lines.join('\r\n') + '\r\n\r\n', 'latin1');
  return body === undefined ? head : Buffer.concat([head, Buffer.isBuffer(body) ? body : Buffer.from(body)]);
}

export async function fetchJson(server, path, { method = 'GET', body, headers = {} } = {}) {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: { 'content-type': 'application/json', ...(server === keyed ? { authorization: `Bearer ${apiKey}` } : {}), ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, text, json };
}

function rss(pid) {
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : 0;
}

// Runs `fn` while sampling the server's RSS every 10 ms; resolves with fn's result, the
// RSS growth over the baseline (bytes) and the time it took (ms), which it prints.
export async function measured(server, fn, label = '') {
  const base = rss(server.pid);
  let peak = base;
  const sampler = setInterval(() => { peak = Math.max(peak, rss(server.pid)); }, 10);
  const start = Date.now();
  try {
    const result = await fn();
    peak = Math.max(peak, rss(server.pid));
    const out = { result, growth: peak - base, ms: Date.now() - start };
    if (label) console.log(`measured: ${label}: RSS +${(out.growth / MiB).toFixed(1)} MiB, ${out.ms} ms`);
    return out;
  } finally {
    clearInterval(sampler);
  }
}

// The error in the API's shape: OpenAI's {"error": {...}} or Anthropic's {"type": "error", ...}.
export function assertError(reply, status, words, { anthropic = false } = {}) {
  assert.equal(reply.status, status, `${reply.head ?? ''}\n${(reply.body ?? reply.text ?? '').slice(0, 300)}`);
  const j = reply.json;
  assert.ok(j, `not JSON: ${(reply.body ?? reply.text ?? '').slice(0, 200)}`);
  const message = anthropic ? j?.error?.message : j?.error?.message;
  if (anthropic) assert.equal(j.type, 'error');
  assert.equal(typeof message, 'string');
  if (words) assert.match(message, words);
}

// What every case ends with: healthy, no row or block leaked, and a normal request served.
export async function assertServing(server) {
  assert.equal((await fetchJson(server, '/health')).status, 200);
  const deadline = Date.now() + 10_000;
  let stats;
  do {
    stats = (await fetchJson(server, '/stats')).json;
    if (stats.running === 0 && stats.waiting === 0 && stats.kv_blocks.used === 0) break;
    await new Promise((r) => setTimeout(r, 50));
  } while (Date.now() < deadline);
  assert.deepEqual([stats.running, stats.waiting, stats.kv_blocks.used], [0, 0, 0], 'rows or KV blocks leaked');
  const ok = await fetchJson(server, '/v1/chat/completions', {
    method: 'POST', body: { messages: user('still there?'), max_tokens: 2, temperature: 0 },
  });
  assert.equal(ok.status, 200, ok.text);
}
