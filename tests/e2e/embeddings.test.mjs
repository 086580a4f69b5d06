// /v1/embeddings through the official openai package (client.embeddings.create): the
// default base64 transfer the client decodes, float, dimensions, batches, token-id
// inputs, errors; and generation served beside it (the default --task auto).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openai, model, post, expectApiError, maxModelLen } from './common.mjs';

const HIDDEN = 64;  // the llama oracle model's hidden size

const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
const close = (a, b, tol = 1e-6) =>
  a.length === b.length && a.every((x, i) => Math.abs(x - b[i]) <= tol * Math.max(1, Math.abs(b[i])));

test('embeddings: a string gives one unit vector of the hidden size', async () => {
  const r = await openai.embeddings.create({ model, input: 'The quick brown fox' });
  assert.equal(r.object, 'list');
  assert.equal(r.model, model);
  assert.equal(r.data.length, 1);
  assert.equal(r.data[0].object, 'embedding');
  assert.equal(r.data[0].index, 0);
  assert.equal(r.data[0].embedding.length, HIDDEN);
  assert.ok(Math.abs(norm(r.data[0].embedding) - 1) < 1e-5);
  assert.ok(r.usage.prompt_tokens > 0);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens);
});

test('embeddings: base64 (the client default) decodes to the float answer', async () => {
  const input = ['one sentence', 'and another one'];
  const decoded = await openai.embeddings.create({ model, input });
  const floats = await openai.embeddings.create({ model, input, encoding_format: 'float' });
  const raw = await post('/v1/embeddings', { model, input, encoding_format: 'base64' });
  assert.equal(raw.status, 200);
  assert.equal(typeof raw.json.data[0].embedding, 'string');
  for (let i = 0; i < input.length; i++) {
    // The float answer prints each f32 in its shortest form: equal once read back as f32.
    const want = floats.data[i].embedding.map(Math.fround);
    assert.deepEqual(Array.from(decoded.data[i].embedding), want);
    const bytes = Buffer.from(raw.json.data[i].embedding, 'base64');
    const view = Array.from({ length: bytes.length / 4 }, (_, k) => bytes.readFloatLE(4 * k));
    assert.deepEqual(view, want);
  }
});

test('embeddings: a batch equals each input alone, and text equals its token ids', async () => {
  const texts = ['alpha', 'a somewhat longer input about beta', 'gamma gamma gamma'];
  const batch = await openai.embeddings.create({ model, input: texts, encoding_format: 'float' });
  assert.deepEqual(batch.data.map((d) => d.index), [0, 1, 2]);
  let tokens = 0;
  for (let i = 0; i < texts.length; i++) {
    const alone = await openai.embeddings.create({ model, input: texts[i], encoding_format: 'float' });
    assert.ok(close(batch.data[i].embedding, alone.data[0].embedding), `input ${i}`);
    const tok = await post('/tokenize', { prompt: texts[i] });
    const ids = await openai.embeddings.create({ model, input: tok.json.tokens, encoding_format: 'float' });
    assert.ok(close(ids.data[0].embedding, alone.data[0].embedding), `input ${i} as ids`);
    tokens += tok.json.count;
  }
  assert.equal(batch.usage.prompt_tokens, tokens);
  // Sent again: the prefix cache serves all but the last block; same vectors.
  const again = await openai.embeddings.create({ model, input: texts, encoding_format: 'float' });
  for (let i = 0; i < texts.length; i++) assert.ok(close(again.data[i].embedding, batch.data[i].embedding));
});

test('embeddings: dimensions truncate then renormalize; normalize false is the raw vector', async () => {
  const input = [[5, 6, 7, 8, 9, 10]];
  const raw = (await post('/v1/embeddings', { model, input, normalize: false })).json.data[0].embedding;
  const full = (await openai.embeddings.create({ model, input, encoding_format: 'float' })).data[0].embedding;
  const n = norm(raw);
  assert.ok(close(full, raw.map((x) => x / n), 1e-5));
  const short = await openai.embeddings.create({ model, input, dimensions: 16, encoding_format: 'float' });
  const head = raw.slice(0, 16);
  const hn = norm(head);
  assert.equal(short.data[0].embedding.length, 16);
  assert.ok(close(short.data[0].embedding, head.map((x) => x / hn), 1e-5));
  await expectApiError(() => openai.embeddings.create({ model, input, dimensions: HIDDEN + 1 }), 400);
});

test('embeddings: bad inputs are 400s in OpenAI shape', async () => {
  for (const input of ['', [], [[]], [1, 100000]]) {
    const err = await expectApiError(() => openai.embeddings.create({ model, input }), 400);
    assert.equal(err.error?.param ?? err.param, 'input', JSON.stringify(input));
  }
  const long = await post('/v1/embeddings', { model, input: Array(maxModelLen + 1).fill(7) });
  assert.equal(long.status, 400);
  assert.equal(long.json.error.code, 'context_length_exceeded');
  const fmt = await post('/v1/embeddings', { model, input: 'x', encoding_format: 'int8' });
  assert.equal(fmt.status, 400);
  assert.equal(fmt.json.error.param, 'encoding_format');
});

test('embeddings: generation is served beside them (--task auto)', async () => {
  const [e, c] = await Promise.all([
    openai.embeddings.create({ model, input: Array(8).fill('batched with generation') }),
    openai.completions.create({ model, prompt: [1, 2, 3], max_tokens: 6, temperature: 0, ignore_eos: true }),
  ]);
  assert.equal(e.data.length, 8);
  assert.equal(c.usage.completion_tokens, 6);
});
