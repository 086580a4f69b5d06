// Images through the official clients. Against run_e2e.sh's server (the llama oracle, a
// text-only model): image parts on every API are a clear 400, return_token_ids works on
// chat, and /v1/models says text only. Against a server of its own on the Gemma 3 vision
// oracle (tests/data/oracle/vision/gemma3_vision): greedy through the chat API with data:
// URLs equals the oracle's greedy (transformers, golden.safetensors greedy.i),
// prompt_tokens equals the processor's length and prompt_token_ids its input_ids, also
// with every case sent at once; the Anthropic client gets the same answer.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import zlib from 'node:zlib';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { openai, anthropic, model, user, greedy, get, expectApiError } from './common.mjs';

const bin = process.env.TANDEM_BIN ?? 'build/tandem';
const vision_dir = 'tests/data/oracle/vision/gemma3_vision';

// A w x h RGB gradient as a PNG.
function png(w, h) {
  const chunk = (type, data) => {
    const body = Buffer.concat([Buffer.from(type), data]);
    const out = Buffer.alloc(12 + data.length);
    out.writeUInt32BE(data.length, 0);
    body.copy(out, 4);
    out.writeUInt32BE(zlib.crc32(body), 8 + data.length);
    return out;
  };
  const raw = Buffer.alloc(h * (1 + 3 * w));
  for (let y = 0; y < h; y++)
    for (let x = 0; x < w; x++) raw.set([x * 9 & 255, y * 3 & 255, 128], y * (1 + 3 * w) + 1 + 3 * x);
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr.set([8, 2, 0, 0, 0], 8);
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr), chunk('IDAT', zlib.deflateSync(raw)), chunk('IEND', Buffer.alloc(0))]);
}

const data_url = (bytes) => `data:image/png;base64,${bytes.toString('base64')}`;

test('images: a text-only model refuses image parts with a 400 on every client', async () => {
  const url = data_url(png(16, 16));
  const chat = await expectApiError(() => openai.chat.completions.create({ model, max_tokens: 4, messages: [
    { role: 'user', content: [{ type: 'text', text: 'What is this?' }, { type: 'image_url', image_url: { url } }] }] }), 400);
  assert.match(chat.message, /messages\[0\]\.content\[1\]: this model does not take images/);
  const responses = await expectApiError(() => openai.responses.create({ model, input: [
    { role: 'user', content: [{ type: 'input_image', image_url: url }, { type: 'input_text', text: 'and?' }] }] }), 400);
  assert.match(responses.message, /input\[0\]\.content\[0\]: this model does not take images/);
  const messages = await expectApiError(() => anthropic.messages.create({ model, max_tokens: 4, messages: [
    { role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: png(16, 16).toString('base64') } }] }] }), 400);
  assert.match(messages.message, /does not take images/);
  const models = await get('/v1/models');
  assert.deepEqual(models.json.data[0].input_modalities, ['text']);
});

test('images: return_token_ids on chat completions, whole and streamed', async () => {
  const req = { model, messages: user('Count with me'), max_tokens: 6, ...greedy, return_token_ids: true };
  const whole = await openai.chat.completions.create(req);
  assert.ok(Array.isArray(whole.prompt_token_ids) && whole.prompt_token_ids.length === whole.usage.prompt_tokens);
  assert.equal(whole.choices[0].token_ids.length, 6);
  let first = null;
  const ids = [];
  for await (const chunk of await openai.chat.completions.create({ ...req, stream: true })) {
    first ??= chunk;
    ids.push(...(chunk.choices[0]?.token_ids ?? []));
  }
  assert.deepEqual(first.prompt_token_ids, whole.prompt_token_ids);
  assert.deepEqual(ids, whole.choices[0].token_ids);
});

// --- The vision oracle, served by a tandem of this test's own ---

// A safetensors file's int32 tensors by name.
function read_i32_tensors(file) {
  const buf = fs.readFileSync(file);
  const n = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + n).toString('utf8'));
  const out = {};
  for (const [name, t] of Object.entries(header)) {
    if (name === '__metadata__' || t.dtype !== 'I32') continue;
    const [a, b] = t.data_offsets;
    const bytes = buf.subarray(8 + n + a, 8 + n + b);
    out[name] = Array.from({ length: (b - a) / 4 }, (_, i) => bytes.readInt32LE(4 * i));
  }
  return out;
}

let server = null;  // { child, url } once the vision oracle serves
let golden = null;
let tensors = null;

function free_port() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

before(async () => {
  const golden_file = path.join(vision_dir, 'golden.safetensors');
  golden = JSON.parse(fs.readFileSync(path.join(vision_dir, 'golden.json'), 'utf8'));
  tensors = read_i32_tensors(golden_file);
  const port = await free_port();
  const child = spawn(bin, ['serve', '--model', vision_dir, '--host', '127.0.0.1', '--port', String(port),
    '--batch', '8', '--served-model-name', 'vision'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  child.stderr.on('data', (d) => { log += d; });
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the vision server exited during startup:\n${log}`);
    const ok = (await fetch(`http://127.0.0.1:${port}/health`).catch(() => null))?.status === 200;
    if (ok) break;
    if (Date.now() > deadline) throw new Error(`the vision server never became healthy:\n${log}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  server = { child, url: `http://127.0.0.1:${port}` };
  const models = await (await fetch(`${server.url}/v1/models`)).json();
  assert.deepEqual(models.data[0].input_modalities, ['text', 'image']);
});

after(async () => {
  if (server && server.child.exitCode === null) {
    server.child.kill('SIGTERM');
    await new Promise((r) => server.child.once('exit', r));
  }
});

// The oracle's case i as OpenAI messages: each image item a data: URL of its file. Case 3's
// earlier turn has the role "model" (the oracle's template writes roles as given), which
// no client API can send: it is left out.
const api_cases = [0, 1, 2, 4];
function openai_messages(c) {
  let next = 0;
  return c.messages.map((m) => ({
    role: m.role,
    content: m.content.map((item) => item.type === 'image'
      ? { type: 'image_url', image_url: { url: data_url(fs.readFileSync(path.join(vision_dir, c.images[next++]))) } }
      : item),
  }));
}

function vision_chat(i) {
  const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'none', maxRetries: 0, timeout: 300_000 });
  return client.chat.completions.create({ model: 'vision', messages: openai_messages(golden.cases[i]),
    max_tokens: golden.n_new, temperature: 0, ignore_eos: true, return_token_ids: true });
}

function check_case(i, r) {
  const c = golden.cases[i];
  assert.equal(r.usage.prompt_tokens, c.prompt_len, `case ${i}: prompt_tokens`);
  assert.deepEqual(r.prompt_token_ids, tensors[`input_ids.${i}`], `case ${i}: the processor's input_ids`);
  assert.deepEqual(r.choices[0].token_ids, tensors[`greedy.${i}`], `case ${i}: the oracle's greedy`);
}

test('images: greedy through the chat API with data: URLs equals the oracle, one case at a time', async () => {
  for (const i of api_cases) check_case(i, await vision_chat(i));
});

test('images: every case sent at once returns its solo answer', async () => {
  const all = await Promise.all(api_cases.map((i) => vision_chat(i)));
  api_cases.forEach((i, k) => check_case(i, all[k]));
});

test('images: the Anthropic client gets the same greedy answer', async () => {
  const c = golden.cases[0];
  const bytes = fs.readFileSync(path.join(vision_dir, c.images[0]));
  const client = new Anthropic({ baseURL: server.url, apiKey: 'none', maxRetries: 0, timeout: 300_000 });
  const r = await client.messages.create({ model: 'vision', max_tokens: golden.n_new, temperature: 0,
    ignore_eos: true, messages: [{ role: 'user', content: [
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: bytes.toString('base64') } },
      { type: 'text', text: c.messages[0].content[1].text }] }] });
  // Case 0 ran before: Anthropic's input_tokens leaves out the prefix-cache hit.
  assert.equal(r.usage.input_tokens + (r.usage.cache_read_input_tokens ?? 0), c.prompt_len);
  const openai_answer = await vision_chat(0);
  assert.equal(r.content[0].text, openai_answer.choices[0].message.content);
});
