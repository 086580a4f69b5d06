// Issue 17, the request cases (1, 4, 6, 7): JSON nested inside a tool call's arguments,
// quadratic JSON, stop-string and prompt amplification, 1e400 and unknown model names.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { open, keyed, MiB, raw, request, fetchJson, measured, assertError, assertServing, user } from './common.mjs';

const post = (server, path, body) => fetchJson(server, path, { method: 'POST', body });

test('requests: 100k-deep JSON inside tool_calls arguments is a 400, on chat and /tokenize', async () => {
  const args = `{"a": ${'['.repeat(100000)}${']'.repeat(100000)}}`;
  const body = {
    messages: [user('hi')[0],
      { role: 'assistant', content: '', tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: args } }] },
      { role: 'tool', content: 'ok', tool_call_id: 'c' }],
    max_tokens: 2,
  };
  for (const path of ['/v1/chat/completions', '/tokenize']) {
    const { result, growth } = await measured(open, () => post(open, path, body), `deep tool arguments ${path}`);
    assertError(result, 400, /--max-json-depth/);
    assert.ok(growth < 64 * MiB, `RSS grew ${growth >> 20} MiB`);
  }
  await assertServing(open);
});

test('requests: JSON parsing is linear (600 KB of {} and a 400k-entry messages array)', async () => {
  const empties = `{"messages": [${Array(200000).fill('{}').join(',')}]}`;  // 600 KB
  const a = await measured(open, () => post(open, '/v1/chat/completions', empties), '600 KB of {}');
  assertError(a.result, 400, /role/);
  assert.ok(a.ms < 3000, `${a.ms} ms (was 12.5 s of CPU; bound 3000)`);
  const many = JSON.stringify({ messages: Array(400000).fill({ role: 'user', content: 'x' }), max_tokens: 1 });
  const b = await measured(open, () => post(open, '/v1/chat/completions', many), '400k messages');
  assert.equal(b.result.status, 400, b.result.text.slice(0, 200));
  assert.ok(b.ms < 10000, `${b.ms} ms (was 68 s; bound 10000)`);
  await assertServing(open);
});

test('requests: 1e400 is a 400, not a 500', async () => {
  const r = await raw(open, request('POST', '/v1/completions', {
    headers: { 'Content-Type': 'application/json' }, body: '{"prompt": "a", "max_tokens": 1e400}' }));
  assertError(r, 400, /number overflow/);
});

test('requests: 4 × 1 MB stop strings with n=64 are refused before they are copied', async () => {
  const stop = Array(4).fill('s'.repeat(MiB));
  const { result, growth, ms } = await measured(open, () => post(open, '/v1/chat/completions',
    { messages: user('hi'), stop, n: 64, max_tokens: 2 }), '4 x 1 MB stops, n=64');
  assertError(result, 400, /--max-stop-length/);
  assert.ok(growth < 64 * MiB, `RSS grew ${growth >> 20} MiB (was +780 MB; bound 64)`);
  assert.ok(ms < 3000, `${ms} ms`);
  await assertServing(open);
});

test('requests: a 15 MB prompt is refused before it is tokenized', async () => {
  const { result, growth, ms } = await measured(open, () => post(open, '/v1/completions',
    { prompt: 'a'.repeat(15 * MiB), max_tokens: 1 }), '15 MB prompt');
  assertError(result, 400, /at least \d+ tokens/);
  assert.equal(result.json.error.code, 'context_length_exceeded');
  assert.ok(ms < 3000, `${ms} ms (was 9.8 s; bound 3000)`);
  assert.ok(growth < 128 * MiB, `RSS grew ${growth >> 20} MiB (was +680 MB; bound 128)`);
  await assertServing(open);
});

test('requests: an unknown model name is 404 model_not_found, in each API shape', async () => {
  const chat = await post(open, '/v1/chat/completions', { model: 'gpt-4o', messages: user('hi') });
  assertError(chat, 404, /does not exist/);
  assert.equal(chat.json.error.code, 'model_not_found');
  const msg = await post(keyed, '/v1/messages', { model: 'claude-x', max_tokens: 2, messages: user('hi') });
  assertError(msg, 404, /does not exist/, { anthropic: true });
  assert.equal(msg.json.error.type, 'not_found_error');
  const served = (await fetchJson(open, '/v1/models')).json.data[0].id;
  assert.equal((await post(open, '/v1/chat/completions', { model: served, messages: user('hi'), max_tokens: 2 })).status, 200);
});
