// Issue 17, case 5: a model folder's chat template that loops, grows, recurses or builds
// values too deep to print (hostile_template.jinja, its mode picked per request). Each is
// a 400 naming its limit, within a few seconds and bounded memory; the server goes on.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { keyed, MiB, fetchJson, measured, assertError, assertServing, user } from './common.mjs';

const render = (mode) => fetchJson(keyed, '/v1/chat/completions', {
  method: 'POST', body: { messages: user('hi'), max_tokens: 2, chat_template_kwargs: { mode } } });

for (const [mode, words, bound] of [
  ['loop', /--max-template-iterations/, 64],     // nested range(100000): was 8.5 GB in 27 s
  ['output', /--max-template-output/, 96],       // 100 MB of output: was 11.5 s and 640 MB for 16 MB
  ['recurse', /--max-template-depth/, 64],       // a recursive loop without end: was a crash
  ['memory', /--max-template-memory/, 320],      // 10^5 copies of a 1 MB string joined
]) {
  test(`templates: "${mode}" is stopped at its limit`, async () => {
    const { result, growth, ms } = await measured(keyed, () => render(mode), `template ${mode}`);
    assertError(result, 400, words);
    assert.equal(result.json.error.code, 'template_limit_exceeded');
    assert.ok(ms < 10000, `${ms} ms (bound 10000)`);
    assert.ok(growth < bound * MiB, `RSS grew ${growth >> 20} MiB (bound ${bound})`);
    await assertServing(keyed);
  });
}

test('templates: a value nested 100k deep is a RecursionError, not a crash', async () => {
  const r = await render('deep');
  assertError(r, 400, /RecursionError/);
  await assertServing(keyed);
});
