// Issue 17, the transport cases (2, 3, 7): compressed and chunked bodies past the limit,
// the API key before the body, slow headers, and the smaller ones (a repeated
// Content-Length, HTTP/1.0 streams, Host, content type, "bearer"). Bounds stated per test.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { open, keyed, apiKey, MiB, zlib, raw, request, fetchJson, measured, assertError, assertServing, user } from './common.mjs';

const chat = JSON.stringify({ messages: user('hi'), max_tokens: 2, temperature: 0 });

async function compressed(make, bytes) {
  const stream = make();
  const out = [];
  stream.on('data', (d) => out.push(d));
  const chunk = Buffer.alloc(64 * MiB, 'a');
  stream.write('{"prompt": "');
  for (let done = 0; done < bytes; done += chunk.length) stream.write(chunk);
  stream.end('"}');
  await new Promise((r) => stream.on('end', r));
  return Buffer.concat(out);
}

test('transport: a gzip bomb (256 MiB from 250 KB) stops at the decoded limit, memory flat', async () => {
  const bomb = await compressed(() => zlib.createGzip({ level: 9 }), 256 * MiB);
  assert.ok(bomb.length < MiB);
  const { result, growth, ms } = await measured(open, () => raw(open, request('POST', '/v1/completions', {
    headers: { 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' }, body: bomb })), 'gzip bomb');
  assertError(result, 413, /--max-body-bytes/);
  assert.ok(growth < 64 * MiB, `RSS grew ${growth >> 20} MiB (bound 64)`);
  assert.ok(ms < 5000, `${ms} ms (bound 5000)`);
  await assertServing(open);
});

test('transport: a brotli bomb (1 GiB from 2 KB) stops at the decoded limit, memory flat', async () => {
  const bomb = await compressed(() => zlib.createBrotliCompress(
    { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 5 } }), 1024 * MiB);
  const { result, growth } = await measured(open, () => raw(open, request('POST', '/v1/chat/completions', {
    headers: { 'Content-Type': 'application/json', 'Content-Encoding': 'br' }, body: bomb })), 'brotli bomb');
  assertError(result, 413, /--max-body-bytes/);
  assert.ok(growth < 64 * MiB, `RSS grew ${growth >> 20} MiB (bound 64)`);
  await assertServing(open);
});

test('transport: the API key is checked before a byte of the body is read', async () => {
  const bomb = await compressed(() => zlib.createGzip({ level: 9 }), 256 * MiB);
  const { result, growth } = await measured(keyed, () => raw(keyed, request('POST', '/v1/completions', {
    headers: { 'Content-Type': 'application/json', 'Content-Encoding': 'gzip', Authorization: 'Bearer wrong' },
    body: bomb })), 'gzip bomb, wrong key');
  assertError(result, 401, /API key/);
  assert.ok(growth < 16 * MiB, `RSS grew ${growth >> 20} MiB (bound 16)`);
  // A head announcing 1 GiB and no body at all: the 401 comes at once.
  const { result: r, ms } = await measured(keyed, () => raw(keyed, request('POST', '/v1/messages', {
    headers: { 'Content-Type': 'application/json', 'Content-Length': String(1 << 30) } }), { timeoutMs: 5000 }));
  assertError(r, 401, null, { anthropic: true });
  assert.equal(r.json.error.type, 'authentication_error');
  assert.ok(ms < 2000, `${ms} ms`);
  await assertServing(keyed);
});

test('transport: a 300 MB chunked body is refused at the limit, not buffered', async () => {
  const { port } = new URL(open.url);
  const { result, growth } = await measured(open, () => new Promise((resolve) => {
    const sock = net.connect(Number(port), '127.0.0.1');
    let sent = 0;
    const got = [];
    sock.on('data', (d) => got.push(d));
    sock.on('error', () => {});
    sock.on('close', () => resolve({ sent, reply: Buffer.concat(got).toString() }));
    sock.on('connect', async () => {
      sock.write('POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n'
        + 'Transfer-Encoding: chunked\r\n\r\n');
      const chunk = `${(MiB).toString(16)}\r\n${'x'.repeat(MiB)}\r\n`;
      // The server reads on past its refusal for a moment (a lingering close, so that the
      // 413 is not lost to a reset) and loopback takes a MiB at once, so a write may never
      // block: yield every chunk, or the reply that is already here goes unseen.
      while (sent < 300 * MiB && !sock.destroyed && got.length === 0) {
        if (!sock.write(chunk)) await new Promise((r) => { sock.once('drain', r); setTimeout(r, 200); });
        else await new Promise((r) => setImmediate(r));
        sent += MiB;
      }
      setTimeout(() => sock.destroy(), 2000);
    });
  }), 'chunked 300 MB');
  assert.match(result.reply, /^HTTP\/1\.1 413/);
  assert.match(result.reply, /--max-body-bytes/);
  assert.ok(result.sent < 100 * MiB, `the client could push ${result.sent >> 20} MiB`);
  assert.ok(growth < 64 * MiB, `RSS grew ${growth >> 20} MiB (bound 64)`);
  await assertServing(open);
});

test('transport: 300 connections dripping headers never starve /health, and are cut at the deadline', async () => {
  const { port } = new URL(open.url);
  const socks = [];
  const closed = new Set();
  for (let i = 0; i < 300; i++) {
    const s = net.connect(Number(port), '127.0.0.1');
    s.on('error', () => {});
    s.on('close', () => closed.add(s));
    s.resume();  // read what comes (the 408), so that the end and the close are seen
    s.write('GET /health HTTP/1.1\r\nHo');
    socks.push(s);
  }
  const drip = setInterval(() => socks.forEach((s) => !s.destroyed && s.write('s')), 1000);
  try {
    await new Promise((r) => setTimeout(r, 500));
    const { result, ms } = await measured(open, () => fetchJson(open, '/health'), '/health under 300 slow connections');
    assert.equal(result.status, 200);
    assert.ok(ms < 1000, `/health took ${ms} ms (bound 1000)`);
    await assertServing(open);
    await new Promise((r) => setTimeout(r, 4000));  // past --header-timeout 3
    assert.equal(closed.size, 300, `${300 - closed.size} dripping connections still open past the header deadline`);
  } finally {
    clearInterval(drip);
    socks.forEach((s) => s.destroy());
  }
});

test('transport: a repeated Content-Length is refused', async () => {
  const r = await raw(open, request('POST', '/v1/chat/completions', {
    headers: { 'Content-Type': 'application/json', 'Content-Length': String(chat.length), 'content-length': String(chat.length) },
    body: chat }));
  assertError(r, 400, /more than one Content-Length/);
  await assertServing(open);
});

test('transport: an HTTP/1.0 client gets its stream without chunked encoding', async () => {
  const body = JSON.stringify({ messages: user('hi'), max_tokens: 4, stream: true });
  const r = await raw(open, request('POST', '/v1/chat/completions', {
    version: 'HTTP/1.0', headers: { 'Content-Type': 'application/json' }, body }));
  assert.equal(r.status, 200);
  assert.doesNotMatch(r.head, /Transfer-Encoding/i);
  assert.match(r.head, /Connection: close/);
  assert.ok(r.body.startsWith('data: '), r.body.slice(0, 80));
  assert.match(r.body, /data: \[DONE\]\n\n$/);
});

test('transport: Host is checked without an API key (DNS rebinding); IPs and localhost pass', async () => {
  const evil = await raw(open, request('GET', '/v1/models').toString().replace('Host: 127.0.0.1', 'Host: attacker.example:8080'));
  assertError(evil, 403, /--allowed-hosts/);
  assert.equal(evil.json.error.code, 'host_not_allowed');
  for (const host of ['localhost:1', '127.0.0.1', '[::1]:80'])
    assert.equal((await raw(open, request('GET', '/v1/models').toString().replace('Host: 127.0.0.1', `Host: ${host}`))).status, 200, host);
});

test('transport: without an API key a text/plain POST (a cross-site form) is refused', async () => {
  const r = await raw(open, request('POST', '/v1/chat/completions', { headers: { 'Content-Type': 'text/plain' }, body: chat }));
  assertError(r, 415, /application\/json/);
  await assertServing(open);
});

test('transport: "bearer" is accepted in any case', async () => {
  for (const scheme of ['bearer', 'BEARER'])
    assert.equal((await fetchJson(keyed, '/v1/models', { headers: { authorization: `${scheme} ${apiKey}` } })).status, 200, scheme);
});
