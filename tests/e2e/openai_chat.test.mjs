// /v1/chat/completions through the official openai package. The model has random
// weights, so the text is gibberish: the tests check structure, determinism, stops,
// n, logprobs and errors, not meaning.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { openai, model, baseURL, user, greedy, post, expectApiError, maxModelLen } from './common.mjs';

test('chat: non-streaming structure and usage', async () => {
  const r = await openai.chat.completions.create({ model, messages: user('Hello there'), max_tokens: 8, ...greedy });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.model, model);
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.choices.length, 1);
  const c = r.choices[0];
  assert.equal(c.index, 0);
  assert.equal(c.message.role, 'assistant');
  assert.equal(typeof c.message.content, 'string');
  assert.equal(c.finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 8);
  assert.ok(r.usage.prompt_tokens > 0);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
});

test('chat: greedy is deterministic, streamed or not', async () => {
  const req = { model, messages: user('Tell me a story'), max_tokens: 16, ...greedy };
  const a = await openai.chat.completions.create(req);
  const b = await openai.chat.completions.create(req);
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  let streamed = '';
  for await (const chunk of await openai.chat.completions.create({ ...req, stream: true })) {
    streamed += chunk.choices[0]?.delta?.content ?? '';
  }
  assert.equal(streamed, a.choices[0].message.content);
});

test('chat: a seed makes sampling reproducible', async () => {
  const req = { model, messages: user('Pick a word'), max_tokens: 12, temperature: 1.0, seed: 1234, ignore_eos: true };
  const a = await openai.chat.completions.create(req);
  const b = await openai.chat.completions.create(req);
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
});

test('chat: streaming with include_usage, through the SDK stream helper', async () => {
  const stream = openai.chat.completions.stream({
    model, messages: user('Stream please'), max_tokens: 10, ...greedy,
    stream_options: { include_usage: true },
  });
  const chunks = [];
  stream.on('chunk', (c) => chunks.push(c));
  const final = await stream.finalChatCompletion();
  assert.equal(final.choices[0].finish_reason, 'length');
  assert.equal(final.choices[0].message.role, 'assistant');
  const last = chunks.at(-1);
  assert.deepEqual(last.choices, []);
  assert.equal(last.usage.completion_tokens, 10);
  assert.equal(last.usage.total_tokens, last.usage.prompt_tokens + 10);
  const text = chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');
  assert.equal(final.choices[0].message.content, text);
  assert.ok(chunks.every((c) => c.object === 'chat.completion.chunk' && c.id === chunks[0].id));
});

test('chat: n choices', async () => {
  const r = await openai.chat.completions.create({
    model, messages: user('Several'), max_tokens: 6, n: 3, temperature: 1.0, seed: 7, ignore_eos: true,
  });
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
  assert.equal(r.usage.completion_tokens, 18);
  // Seeded choices get seed, seed + 1, seed + 2: a second call reproduces all three.
  const again = await openai.chat.completions.create({
    model, messages: user('Several'), max_tokens: 6, n: 3, temperature: 1.0, seed: 7, ignore_eos: true,
  });
  assert.deepEqual(again.choices.map((c) => c.message.content), r.choices.map((c) => c.message.content));
  // Streamed n: every index gets content and exactly one finish_reason.
  const finishes = [0, 0];
  for await (const chunk of await openai.chat.completions.create({
    model, messages: user('Several'), max_tokens: 4, n: 2, stream: true, ...greedy,
  })) {
    for (const c of chunk.choices) if (c.finish_reason) finishes[c.index] += 1;
  }
  assert.deepEqual(finishes, [1, 1]);
});

// The text of a greedy run, and a short ASCII piece of it that first occurs at `at` >= 2.
async function textAndStop(messages, maxTokens) {
  const r = await openai.chat.completions.create({ model, messages, max_tokens: maxTokens, ...greedy });
  const text = r.choices[0].message.content;
  for (let at = 2; at + 2 <= text.length; at++) {
    const piece = text.slice(at, at + 2);
    if (/^[\x21-\x7e]{2}$/.test(piece) && text.indexOf(piece) === at) return { text, stop: piece, at };
  }
  return { text, stop: null };
}

test('chat: stop sequences end the text before the stop string', async (t) => {
  const messages = user('Count to ten');
  const { text, stop, at } = await textAndStop(messages, 40);
  if (!stop) return t.skip(`no usable stop string in ${JSON.stringify(text)}`);
  const r = await openai.chat.completions.create({ model, messages, max_tokens: 40, ...greedy, stop: [stop, 'never-matches-zz'] });
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.equal(r.choices[0].message.content, text.slice(0, at));
  // Streamed: no part of the stop string leaks out either.
  let streamed = '';
  for await (const chunk of await openai.chat.completions.create({
    model, messages, max_tokens: 40, ...greedy, stop, stream: true,
  })) {
    streamed += chunk.choices[0]?.delta?.content ?? '';
  }
  assert.equal(streamed, text.slice(0, at));
});

test('chat: logprobs in the chat shape', async () => {
  const r = await openai.chat.completions.create({
    model, messages: user('Logprobs'), max_tokens: 5, ...greedy, logprobs: true, top_logprobs: 3,
  });
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, 5);
  for (const entry of content) {
    assert.equal(typeof entry.token, 'string');
    assert.ok(entry.logprob <= 0);
    assert.ok(Array.isArray(entry.bytes));
    assert.equal(entry.top_logprobs.length, 3);
    for (let i = 1; i < 3; i++) assert.ok(entry.top_logprobs[i - 1].logprob >= entry.top_logprobs[i].logprob);
    // Greedy picks the most likely token.
    assert.ok(Math.abs(entry.logprob - entry.top_logprobs[0].logprob) < 1e-4);
  }
});

test('chat: response_format json_object and json_schema are accepted (structured_output.test.mjs checks them)', async () => {
  for (const response_format of [{ type: 'json_object' },
    { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object' } } }]) {
    const r = await openai.chat.completions.create({
      model, messages: user('JSON'), max_tokens: 4, ...greedy, response_format,
    });
    assert.equal(r.choices.length, 1);
    assert.ok(r.choices[0].message.content.startsWith('{'), r.choices[0].message.content);
  }
});

test('chat: tools are accepted and the answer still parses', async () => {
  const r = await openai.chat.completions.create({
    model, messages: user('Weather in Paris?'), max_tokens: 8, ...greedy,
    tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }],
  });
  assert.ok(['length', 'stop', 'tool_calls'].includes(r.choices[0].finish_reason));
});

test('chat: every bad input is a 400 in OpenAI shape, and the server keeps serving', async () => {
  const bad = [
    { messages: [] },
    { messages: [{ role: 'wizard', content: 'hi' }] },
    { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'http://x/y.png' } }] }] },
    { messages: 'hello' },
    { messages: user('hi'), temperature: 5 },
    { messages: user('hi'), temperature: 'warm' },
    { messages: user('hi'), top_p: 0 },
    { messages: user('hi'), max_tokens: 0 },
    { messages: user('hi'), max_tokens: maxModelLen + 10 },
    { messages: user('word '.repeat(maxModelLen * 2)) },
    { messages: user('hi'), n: 0 },
    { messages: user('hi'), n: 1000 },
    { messages: user('hi'), logprobs: true, top_logprobs: 99 },
    { messages: user('hi'), stop: 42 },
  ];
  for (const body of bad) {
    const err = await expectApiError(() => openai.chat.completions.create({ model, ...body }), 400);
    assert.ok(err instanceof OpenAI.BadRequestError, String(err));
    assert.equal(typeof err.error?.message, 'string');
    assert.ok('param' in err.error && 'code' in err.error && 'type' in err.error);
  }
  const missing = await post('/v1/chat/completions', { model });
  assert.equal(missing.status, 400);
  assert.equal(missing.json.error.param, 'messages');
  const malformed = await post('/v1/chat/completions', '{"messages": [');
  assert.equal(malformed.status, 400);
  assert.equal(typeof malformed.json.error.message, 'string');
  const ok = await openai.chat.completions.create({ model, messages: user('still there?'), max_tokens: 2, ...greedy });
  assert.equal(ok.choices[0].finish_reason, 'length');
});

test('chat: a wrong API key is a 401', async () => {
  const wrong = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: 'not-the-key', maxRetries: 0 });
  const err = await expectApiError(() => wrong.chat.completions.create({ model, messages: user('hi'), max_tokens: 2 }), 401);
  assert.ok(err instanceof OpenAI.AuthenticationError);
});
