// Shared setup for the e2e tests: clients for the server that run_e2e.sh started.
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import http from 'node:http';

export const baseURL = process.env.TANDEM_URL ?? 'http://127.0.0.1:8080';
export const apiKey = process.env.TANDEM_API_KEY ?? 'e2e-secret-key';
export const model = process.env.TANDEM_MODEL ?? 'tandem-e2e';
export const maxModelLen = Number(process.env.TANDEM_MAX_MODEL_LEN ?? 1024);

export const openai = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey, maxRetries: 0, timeout: 120_000 });
export const anthropic = new Anthropic({ baseURL, apiKey, maxRetries: 0, timeout: 120_000 });

// A user turn.
export const user = (content) => [{ role: 'user', content }];

// Greedy, EOS ignored: the random model then always runs to max_tokens, deterministically.
export const greedy = { temperature: 0, ignore_eos: true };

// Raw HTTP, for what the SDKs will not send (malformed bodies, unknown routes).
export async function post(path, body, headers = {}) {
  const res = await fetch(`${baseURL}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}`, ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, text, json, headers: res.headers };
}

export async function get(path, headers = {}) {
  const res = await fetch(`${baseURL}${path}`, { headers: { authorization: `Bearer ${apiKey}`, ...headers } });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, text, json };
}

// Runs fn, which must reject with an SDK APIError of `status`; returns the error.
export async function expectApiError(fn, status) {
  try {
    await fn();
  } catch (err) {
    if (err?.status !== status) throw new Error(`expected HTTP ${status}, got ${err?.status}: ${err}`);
    return err;
  }
  throw new Error(`expected HTTP ${status}, but the call succeeded`);
}

// Polls until fn() is truthy or the timeout passes; returns the last value.
export async function eventually(fn, timeoutMs = 5000) {
  const deadline = Date.now() + timeoutMs;
  let value = await fn();
  while (!value && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    value = await fn();
  }
  return value;
}

// Starts a streaming request over a raw socket and hangs up once the first bytes of the
// body arrive: a client that goes away mid-stream. (Not fetch + AbortController: Node
// 20's fetch can leave the body read pending forever when the abort lands after the
// whole body has arrived, nodejs/undici#4089, which a fast tiny model makes likely.)
// Resolves with the HTTP status once the socket is closed.
export function hangUpAfterFirstChunk(path, body) {
  const url = new URL(path, baseURL);
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}`,
        'content-length': Buffer.byteLength(payload) },
    }, (res) => {
      res.once('data', () => req.destroy());
      res.once('end', () => resolve(res.statusCode));
      res.once('close', () => resolve(res.statusCode));
    });
    req.once('error', (err) => (req.destroyed ? resolve(0) : reject(err)));
    req.end(payload);
  });
}

// Starts `tandem serve` with `args` on a free port (under the same served name, so `model`
// works against it) and waits until it is ready; resolves with its clients and a stop().
export async function startServer(args, { key = 'e2e-extra-key', timeoutMs = 60_000 } = {}) {
  const { spawn } = await import('node:child_process');
  const net = await import('node:net');
  const port = await new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)); });
  });
  const bin = process.env.TANDEM_BIN ?? 'build/tandem';
  const child = spawn(bin, ['serve', '--port', String(port), '--api-key', key,
    '--served-model-name', model, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  child.stderr.on('data', (d) => { log += d; });
  const origin = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`tandem serve ${args.join(' ')} exited:\n${log}`);
    if ((await fetch(`${origin}/health`).catch(() => null))?.status === 200) break;
    if (Date.now() > deadline) { child.kill('SIGKILL'); throw new Error(`never ready:\n${log}`); }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    origin,
    log: () => log,
    openai: new OpenAI({ baseURL: `${origin}/v1`, apiKey: key, maxRetries: 0, timeout: 300_000 }),
    anthropic: new Anthropic({ baseURL: origin, apiKey: key, maxRetries: 0, timeout: 300_000 }),
    post: async (path, body) => {
      const res = await fetch(`${origin}${path}`, { method: 'POST', body: JSON.stringify(body),
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` } });
      const text = await res.text();
      let json = null;
      try { json = JSON.parse(text); } catch { /* not JSON */ }
      return { status: res.status, text, json };
    },
    stop: async () => {
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    },
  };
}
