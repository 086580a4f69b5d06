// /v1/messages through the official @anthropic-ai/sdk package.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { anthropic, openai, model, baseURL, user, greedy, post, expectApiError } from './common.mjs';

test('messages: non-streaming structure and usage', async () => {
  const m = await anthropic.messages.create({ model, max_tokens: 8, messages: user('Hello'), ...greedy });
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.match(m.id, /^msg_/);
  assert.equal(m.content[0].type, 'text');
  assert.equal(typeof m.content[0].text, 'string');
  assert.equal(m.stop_reason, 'max_tokens');
  assert.equal(m.usage.output_tokens, 8);
  assert.ok(m.usage.input_tokens > 0);
});

test('messages: the same conversation gives the same greedy text as chat completions', async () => {
  const a = await anthropic.messages.create({ model, max_tokens: 12, system: 'Be brief.', messages: user('Hi'), ...greedy });
  const b = await openai.chat.completions.create({
    model, max_tokens: 12, messages: [{ role: 'system', content: 'Be brief.' }, ...user('Hi')], ...greedy,
  });
  assert.equal(a.content[0].text, b.choices[0].message.content);
  // Anthropic counts prompt tokens read from the prefix cache apart from input_tokens.
  assert.equal(a.usage.input_tokens + a.usage.cache_read_input_tokens, b.usage.prompt_tokens);
});

test('messages: streaming event sequence and the SDK accumulator', async () => {
  const names = [];
  let text = '';
  for await (const event of await anthropic.messages.create({
    model, max_tokens: 10, messages: user('Stream'), stream: true, ...greedy,
  })) {
    names.push(event.type);
    if (event.type === 'content_block_delta') text += event.delta.text;
  }
  assert.equal(names[0], 'message_start');
  assert.equal(names.at(-1), 'message_stop');
  assert.equal(names.at(-2), 'message_delta');
  const firstDelta = names.indexOf('content_block_delta');
  assert.ok(names.indexOf('content_block_start') < firstDelta);
  assert.ok(names.lastIndexOf('content_block_stop') > names.lastIndexOf('content_block_delta'));
  const final = await anthropic.messages.stream({ model, max_tokens: 10, messages: user('Stream'), ...greedy }).finalMessage();
  assert.equal(final.content[0].text, text);
  assert.equal(final.stop_reason, 'max_tokens');
  assert.equal(final.usage.output_tokens, 10);
});

test('messages: stop_sequences', async (t) => {
  const whole = await anthropic.messages.create({ model, max_tokens: 40, messages: user('Go on'), ...greedy });
  const text = whole.content[0].text;
  let at = -1;
  for (let i = 2; i + 2 <= text.length; i++) {
    const piece = text.slice(i, i + 2);
    if (/^[\x21-\x7e]{2}$/.test(piece) && text.indexOf(piece) === i) { at = i; break; }
  }
  if (at < 0) return t.skip('no usable stop string');
  const stop = text.slice(at, at + 2);
  const m = await anthropic.messages.create({ model, max_tokens: 40, messages: user('Go on'), stop_sequences: [stop], ...greedy });
  assert.equal(m.stop_reason, 'stop_sequence');
  assert.equal(m.stop_sequence, stop);
  assert.equal(m.content[0].text, text.slice(0, at));
});

test('messages: content blocks, tools and tool results are accepted', async () => {
  const m = await anthropic.messages.create({
    model, max_tokens: 6, ...greedy,
    tools: [{ name: 'get_weather', description: 'Weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } } }],
    messages: [
      { role: 'user', content: [{ type: 'text', text: 'Weather in Oslo?' }] },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_01', name: 'get_weather', input: { city: 'Oslo' } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_01', content: 'cold' }] },
    ],
  });
  assert.ok(['max_tokens', 'end_turn', 'tool_use'].includes(m.stop_reason));
});

test('messages: errors in Anthropic shape', async () => {
  const cases = [
    { messages: user('hi') },                                  // max_tokens missing
    { max_tokens: 0, messages: user('hi') },
    { max_tokens: 5, messages: [] },
    { max_tokens: 5, messages: [{ role: 'system', content: 'x' }] },
    { max_tokens: 5, messages: user('hi'), temperature: 1.5 },
    { max_tokens: 5, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AA==' } }] }] },
  ];
  for (const body of cases) {
    const err = await expectApiError(() => anthropic.messages.create({ model, ...body }), 400);
    assert.ok(err instanceof Anthropic.BadRequestError);
    assert.equal(err.error.type, 'error');
    assert.equal(err.error.error.type, 'invalid_request_error');
  }
  const malformed = await post('/v1/messages', '{"max_tokens": ', { 'x-api-key': 'irrelevant' });
  assert.ok([400, 401].includes(malformed.status));
  assert.equal(malformed.json.type, 'error');
  const wrong = new Anthropic({ baseURL, apiKey: 'wrong', maxRetries: 0 });
  const err = await expectApiError(() => wrong.messages.create({ model, max_tokens: 2, messages: user('hi') }), 401);
  assert.ok(err instanceof Anthropic.AuthenticationError);
  assert.equal(err.error.error.type, 'authentication_error');
});
