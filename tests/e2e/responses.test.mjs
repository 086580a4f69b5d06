// /v1/responses (the basic Responses API) through the official openai package.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openai, model, greedy, expectApiError } from './common.mjs';

test('responses: non-streaming', async () => {
  const r = await openai.responses.create({ model, input: 'Hello', instructions: 'Be brief.', max_output_tokens: 8, ...greedy });
  assert.equal(r.object, 'response');
  assert.match(r.id, /^resp_/);
  assert.equal(r.output[0].type, 'message');
  assert.equal(r.output[0].content[0].type, 'output_text');
  assert.equal(typeof r.output_text, 'string');
  assert.equal(r.output_text, r.output[0].content[0].text);
  assert.equal(r.usage.output_tokens, 8);
  assert.equal(r.status, 'incomplete');
  assert.equal(r.incomplete_details.reason, 'max_output_tokens');
});

test('responses: streaming events', async () => {
  const names = [];
  let text = '';
  let completed = null;
  for await (const event of await openai.responses.create({
    model, input: [{ role: 'user', content: [{ type: 'input_text', text: 'Stream' }] }],
    max_output_tokens: 6, stream: true, ...greedy,
  })) {
    names.push(event.type);
    if (event.type === 'response.output_text.delta') text += event.delta;
    if (event.type === 'response.completed') completed = event.response;
  }
  assert.equal(names[0], 'response.created');
  assert.equal(names.at(-1), 'response.completed');
  assert.ok(names.includes('response.output_text.delta'));
  assert.equal(completed.output[0].content[0].text, text);
  const whole = await openai.responses.create({
    model, input: [{ role: 'user', content: [{ type: 'input_text', text: 'Stream' }] }], max_output_tokens: 6, ...greedy,
  });
  assert.equal(whole.output_text, text);
});

test('responses: unsupported features are 400s', async () => {
  await expectApiError(() => openai.responses.create({ model, input: 'x', previous_response_id: 'resp_123' }), 400);
  await expectApiError(() => openai.responses.create({ model, input: [] }), 400);
  await expectApiError(() => openai.responses.create({ model, input: 'x', max_output_tokens: 0 }), 400);
});
