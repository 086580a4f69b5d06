// Server-level behaviour: models, health, stats, metrics, unknown routes, body limits,
// and cancellation (a client that hangs up frees its KV blocks).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openai, anthropic, model, user, greedy, get, post, eventually, hangUpAfterFirstChunk } from './common.mjs';

test('server: models list and retrieve', async () => {
  const page = await openai.models.list();
  const ids = page.data.map((m) => m.id);
  assert.deepEqual(ids, [model]);
  const m = await openai.models.retrieve(model);
  assert.equal(m.id, model);
});

test('server: health, stats and metrics', async () => {
  const health = await get('/health', { authorization: '' });
  assert.equal(health.status, 200);
  await openai.chat.completions.create({ model, messages: user('count me'), max_tokens: 3, ...greedy });
  const stats = await get('/stats');
  assert.equal(stats.status, 200);
  for (const key of ['model', 'running', 'waiting', 'kv_blocks', 'generation_tokens_total', 'tokens_per_second_1m', 'uptime_s'])
    assert.ok(key in stats.json, key);
  assert.ok(stats.json.generation_tokens_total >= 3);
  const metrics = await get('/metrics');
  assert.equal(metrics.status, 200);
  for (const name of ['num_requests_running', 'num_requests_waiting', 'kv_cache_usage_perc', 'prompt_tokens_total',
    'generation_tokens_total', 'time_to_first_token_seconds_bucket', 'inter_token_latency_seconds_count',
    'e2e_request_latency_seconds_sum', 'request_queue_time_seconds_count'])
    assert.match(metrics.text, new RegExp(`^tandem:${name}\\{`, 'm'), name);
});

test('server: unknown routes are 404 JSON, oversized bodies 413', async () => {
  const r = await post('/v1/does-not-exist', {});
  assert.equal(r.status, 404);
  assert.equal(typeof r.json.error.message, 'string');
  const big = await post('/v1/chat/completions', JSON.stringify({ model, messages: user('x'.repeat(40 << 20)) }));
  assert.equal(big.status, 413);
  assert.equal((await get('/health')).status, 200);
});

// Requests the server has finished because their client went away.
async function abortedRequests() {
  const m = (await get('/metrics')).text.match(/^tandem:request_success_total\{[^}]*finished_reason="abort"\} (\d+)/m);
  return m ? Number(m[1]) : 0;
}

test('server: a client that hangs up mid-stream is cancelled and its KV blocks freed', async () => {
  const abortedBefore = await abortedRequests();
  const controller = new AbortController();
  const stream = await openai.chat.completions.create(
    { model, messages: user('A very long answer'), max_tokens: 900, ...greedy, stream: true },
    { signal: controller.signal },
  );
  let chunks = 0;
  try {
    for await (const _ of stream) {
      if (++chunks === 3) controller.abort();
    }
  } catch (err) {
    assert.ok(err.name === 'AbortError' || /abort/i.test(String(err)), String(err));
  }
  const idle = await eventually(async () => {
    const s = (await get('/stats')).json;
    return s.running === 0 && s.waiting === 0 && s.kv_blocks.used === 0 ? s : null;
  }, 10_000);
  assert.ok(idle, 'the engine did not become idle with all KV blocks free');
  assert.ok(idle.generation_tokens_total > 0);
  assert.equal(await abortedRequests(), abortedBefore + 1, 'the hang-up did not cancel the request');
});

// The soak: 500 mixed requests (valid, invalid, cancelled mid-stream), 16 at a time.
test('server: a soak of 500 mixed requests leaves it healthy with every block free', async () => {
  const kinds = [
    () => openai.chat.completions.create({ model, messages: user('soak'), max_tokens: 4, ...greedy }),
    () => post('/v1/chat/completions', { model, messages: [] }),
    () => post('/v1/completions', '{"prompt": [1, 2'),
    () => openai.completions.create({ model, prompt: [1, 2, 3], max_tokens: 3, ...greedy }),
    async () => {
      const status = await hangUpAfterFirstChunk('/v1/completions',
        { model, prompt: [1, 2, 3], max_tokens: 300, stream: true, ...greedy });
      assert.equal(status, 200);
    },
    () => anthropic.messages.create({ model, max_tokens: 3, messages: user('soak'), stream: false, ...greedy }),
  ];
  const abortedBefore = await abortedRequests();
  let next = 0;
  const failures = [];
  async function worker() {
    while (next < 500) {
      const i = next++;
      try { await kinds[i % kinds.length](); } catch (err) { failures.push(`${i}: ${err}`); }
    }
  }
  await Promise.all(Array.from({ length: 16 }, worker));
  assert.deepEqual(failures, []);
  assert.equal((await get('/health')).status, 200);
  const idle = await eventually(async () => {
    const s = (await get('/stats')).json;
    return s.running === 0 && s.waiting === 0 && s.kv_blocks.used === 0 ? s : null;
  }, 15_000);
  assert.ok(idle, 'blocks still in use after the soak');
  // 83 clients hang up after their first chunk of 300 tokens; a fast tiny model may finish
  // a few before the server notices, but not most of them.
  assert.ok(await abortedRequests() - abortedBefore > 40, 'hang-ups were not cancelled');
});
