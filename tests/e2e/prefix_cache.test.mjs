// The prefix cache through the official clients: a request that repeats an earlier one's
// long prompt reports its cached tokens in each API's own usage shape, cache_salt keeps
// requests apart, and /stats and /metrics count the hits. Each test uses its own text, so
// the tests do not share cached blocks with each other.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openai, anthropic, model, user, greedy, get } from './common.mjs';

// About 200 tokens of text unique to `tag`.
const long_text = (tag) => Array.from({ length: 40 }, (_, i) => `${tag}-${i}`).join(' ');

test('prefix cache: chat reports prompt_tokens_details.cached_tokens', async () => {
  const req = { model, messages: user(long_text('chat')), max_tokens: 4, ...greedy };
  const first = await openai.chat.completions.create(req);
  const again = await openai.chat.completions.create(req);
  assert.equal(first.usage.prompt_tokens_details.cached_tokens, 0);
  assert.ok(again.usage.prompt_tokens_details.cached_tokens >= 64, JSON.stringify(again.usage));
  assert.ok(again.usage.prompt_tokens_details.cached_tokens < again.usage.prompt_tokens);
  assert.equal(again.choices[0].message.content, first.choices[0].message.content);
  const stream = await openai.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
  let usage = null;
  for await (const chunk of stream) if (chunk.usage) usage = chunk.usage;
  assert.ok(usage.prompt_tokens_details.cached_tokens >= 64, JSON.stringify(usage));
});

test('prefix cache: completions and responses report their cached tokens', async () => {
  const prompt = long_text('completion');
  const c1 = await openai.completions.create({ model, prompt, max_tokens: 4, ...greedy });
  const c2 = await openai.completions.create({ model, prompt, max_tokens: 4, ...greedy });
  assert.equal(c1.usage.prompt_tokens_details.cached_tokens, 0);
  assert.ok(c2.usage.prompt_tokens_details.cached_tokens >= 64, JSON.stringify(c2.usage));
  const input = long_text('responses');
  const r1 = await openai.responses.create({ model, input, max_output_tokens: 4, temperature: 0 });
  const r2 = await openai.responses.create({ model, input, max_output_tokens: 4, temperature: 0 });
  assert.equal(r1.usage.input_tokens_details.cached_tokens, 0);
  assert.ok(r2.usage.input_tokens_details.cached_tokens >= 64, JSON.stringify(r2.usage));
});

test('prefix cache: Anthropic reports cache_read_input_tokens apart from input_tokens', async () => {
  const req = { model, max_tokens: 4, messages: user(long_text('anthropic')), ...greedy };
  const first = await anthropic.messages.create(req);
  const again = await anthropic.messages.create(req);
  assert.equal(first.usage.cache_read_input_tokens, 0);
  assert.ok(again.usage.cache_read_input_tokens >= 64, JSON.stringify(again.usage));
  assert.equal(again.usage.input_tokens + again.usage.cache_read_input_tokens, first.usage.input_tokens);
  const streamed = await anthropic.messages.stream(req).finalMessage();
  assert.ok(streamed.usage.cache_read_input_tokens >= 64, JSON.stringify(streamed.usage));
});

test('prefix cache: only requests with the same cache_salt share blocks', async () => {
  const req = { model, messages: user(long_text('salted')), max_tokens: 4, ...greedy };
  await openai.chat.completions.create({ ...req, cache_salt: 'tenant-a' });
  const other = await openai.chat.completions.create({ ...req, cache_salt: 'tenant-b' });
  const same = await openai.chat.completions.create({ ...req, cache_salt: 'tenant-a' });
  const unsalted = await openai.chat.completions.create(req);
  assert.equal(other.usage.prompt_tokens_details.cached_tokens, 0);
  assert.equal(unsalted.usage.prompt_tokens_details.cached_tokens, 0);
  assert.ok(same.usage.prompt_tokens_details.cached_tokens >= 64, JSON.stringify(same.usage));
  await assert.rejects(openai.chat.completions.create({ ...req, cache_salt: '' }),
    (e) => e.status === 400 && e.param === 'cache_salt');
});

test('prefix cache: /stats and /metrics count queries and hits', async () => {
  const stats = (await get('/stats')).json;
  assert.equal(stats.prefix_cache.enabled, true);
  assert.ok(stats.prefix_cache.hits_total > 0);
  assert.ok(stats.prefix_cache.queries_total >= stats.prefix_cache.hits_total);
  assert.ok(stats.kv_blocks.cached >= 0);
  const metrics = (await get('/metrics')).text;
  assert.match(metrics, /^tandem:prefix_cache_queries_total\{[^}]*\} \d+/m);
  assert.match(metrics, /^tandem:prefix_cache_hits_total\{[^}]*\} \d+/m);
});
