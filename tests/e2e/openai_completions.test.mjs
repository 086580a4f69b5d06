// /v1/completions (text and token-id prompts) through the official openai package, and
// greedy parity with `tandem generate`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { openai, model, greedy, post, expectApiError } from './common.mjs';

const ids = [1, 72, 101, 108, 108, 111, 2, 1, 65, 66];

test('completions: token-id prompt with return_token_ids', async () => {
  const r = await openai.completions.create({ model, prompt: ids, max_tokens: 8, ...greedy, return_token_ids: true });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.choices.length, 1);
  const c = r.choices[0];
  assert.equal(c.finish_reason, 'length');
  assert.deepEqual(c.prompt_token_ids, ids);
  assert.equal(c.token_ids.length, 8);
  assert.ok(c.token_ids.every((id) => Number.isInteger(id) && id >= 0 && id < 512));
  assert.equal(r.usage.prompt_tokens, ids.length);
  assert.equal(r.usage.completion_tokens, 8);
});

test('completions: greedy through the server equals tandem generate', async (t) => {
  const bin = process.env.TANDEM_BIN;
  const dir = process.env.TANDEM_MODEL_DIR;
  if (!bin || !dir) return t.skip('TANDEM_BIN / TANDEM_MODEL_DIR not set');
  const out = execFileSync(bin, ['generate', '--model', dir, '--ids', ids.join(','), '--max-tokens', '12',
    '--temperature', '0', '--ignore-eos', '--json'], { encoding: 'utf8' });
  const cli = JSON.parse(out.trim().split('\n').at(-1));
  const r = await openai.completions.create({ model, prompt: ids, max_tokens: 12, ...greedy, return_token_ids: true });
  assert.deepEqual(r.choices[0].token_ids, cli.ids);
  assert.equal(r.choices[0].text, cli.text);
});

test('completions: a text prompt and its token ids give the same greedy text', async () => {
  const text = 'The quick brown fox';
  const tok = await post('/tokenize', { prompt: text });
  assert.equal(tok.status, 200);
  const a = await openai.completions.create({ model, prompt: text, max_tokens: 10, ...greedy });
  const b = await openai.completions.create({ model, prompt: tok.json.tokens, max_tokens: 10, ...greedy });
  assert.equal(a.choices[0].text, b.choices[0].text);
  assert.equal(a.usage.prompt_tokens, tok.json.count);
});

test('completions: several prompts, n each, in order', async () => {
  const r = await openai.completions.create({ model, prompt: [[1, 2, 3], [4, 5, 6, 7]], n: 2, max_tokens: 3, ...greedy });
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2, 3]);
  assert.equal(r.usage.prompt_tokens, 7);
  assert.equal(r.usage.completion_tokens, 12);
  // Greedy: both choices of a prompt agree; the single-prompt call agrees with them.
  assert.equal(r.choices[0].text, r.choices[1].text);
  const single = await openai.completions.create({ model, prompt: [4, 5, 6, 7], max_tokens: 3, ...greedy });
  assert.equal(single.choices[0].text, r.choices[2].text);
  const texts = await openai.completions.create({ model, prompt: ['one', 'two'], max_tokens: 2, ...greedy });
  assert.equal(texts.choices.length, 2);
});

test('completions: echo', async () => {
  const r = await openai.completions.create({ model, prompt: 'Echo me', max_tokens: 4, ...greedy, echo: true });
  assert.ok(r.choices[0].text.startsWith('Echo me'));
});

test('completions: logprobs in the completions shape', async () => {
  const r = await openai.completions.create({ model, prompt: ids, max_tokens: 6, ...greedy, logprobs: 2 });
  const lp = r.choices[0].logprobs;
  assert.equal(lp.tokens.length, 6);
  assert.equal(lp.token_logprobs.length, 6);
  assert.equal(lp.top_logprobs.length, 6);
  assert.equal(lp.text_offset.length, 6);
  for (let i = 0; i < 6; i++) {
    assert.ok(lp.token_logprobs[i] <= 0);
    const alternatives = Object.values(lp.top_logprobs[i]);
    assert.ok(alternatives.length >= 1 && alternatives.length <= 2);
    // Greedy: the chosen token is the most likely one.
    assert.ok(Math.abs(Math.max(...alternatives) - lp.token_logprobs[i]) < 1e-4);
    if (i > 0) assert.ok(lp.text_offset[i] >= lp.text_offset[i - 1]);
  }
});

test('completions: streaming', async () => {
  const whole = await openai.completions.create({ model, prompt: ids, max_tokens: 9, ...greedy });
  let text = '';
  let finish = null;
  let usage = null;
  for await (const chunk of await openai.completions.create({
    model, prompt: ids, max_tokens: 9, ...greedy, stream: true, stream_options: { include_usage: true },
  })) {
    for (const c of chunk.choices) {
      text += c.text;
      if (c.finish_reason) finish = c.finish_reason;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal(text, whole.choices[0].text);
  assert.equal(finish, 'length');
  assert.equal(usage.completion_tokens, 9);
});

test('completions: bad prompts are 400s', async () => {
  for (const prompt of [[1, 2, 512], [1, -3], [], [[1, 2], 'mixed'], ['a', [1]], 17, '']) {
    const err = await expectApiError(() => openai.completions.create({ model, prompt, max_tokens: 2 }), 400);
    assert.equal(err.error?.param, 'prompt', JSON.stringify(prompt));
  }
  const tooLong = await expectApiError(() => openai.completions.create({ model, prompt: [1, 2], max_tokens: 100000 }), 400);
  assert.equal(tooLong.error?.param, 'max_tokens');
});

test('completions: echo + logprobs + max_tokens 0 scores the prompt (the legacy shape)', async () => {
  const text = 'In the beginning God created the heaven and the earth.';
  const r = await openai.completions.create({ model, prompt: text, max_tokens: 0, echo: true, logprobs: 2, ...greedy });
  const c = r.choices[0];
  assert.equal(c.text, text);
  assert.equal(c.finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 0);
  const lp = c.logprobs;
  const n = r.usage.prompt_tokens;
  assert.ok(n >= 5);
  for (const key of ['tokens', 'token_logprobs', 'top_logprobs', 'text_offset']) assert.equal(lp[key].length, n, key);
  assert.equal(lp.token_logprobs[0], null);
  assert.equal(lp.top_logprobs[0], null);
  assert.equal(lp.text_offset[0], 0);
  for (let i = 1; i < n; i++) {
    assert.ok(lp.token_logprobs[i] <= 0);
    const alternatives = Object.values(lp.top_logprobs[i]);
    assert.ok(alternatives.length >= 1 && alternatives.length <= 2);
    // The best alternative is at least as likely as the prompt's own token.
    assert.ok(Math.max(...alternatives) >= lp.token_logprobs[i] - 1e-5);
    assert.equal(lp.text_offset[i], lp.text_offset[i - 1] + lp.tokens[i - 1].length);
  }
  // The same prompt with a generated token: the prompt's part is unchanged, one entry follows.
  const more = await openai.completions.create({ model, prompt: text, max_tokens: 1, echo: true, logprobs: 2, ...greedy });
  const mlp = more.choices[0].logprobs;
  assert.equal(mlp.tokens.length, n + 1);
  for (let i = 1; i < n; i++) assert.ok(Math.abs(mlp.token_logprobs[i] - lp.token_logprobs[i]) < 1e-5);
  // Bad combinations are 400s in the OpenAI shape.
  const streamed = await expectApiError(() => openai.completions.create({ model, prompt: text, max_tokens: 0, echo: true, logprobs: 1, stream: true }), 400);
  assert.equal(streamed.error?.param, 'stream');
  const nothing = await expectApiError(() => openai.completions.create({ model, prompt: text, max_tokens: 0 }), 400);
  assert.equal(nothing.error?.param, 'max_tokens');
});
