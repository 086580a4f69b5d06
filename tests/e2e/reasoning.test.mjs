// Reasoning end to end (issue 43), through the official clients, for each parser on its
// real chat template (thinking_models.mjs: random weights under a template that opens the
// thinking block, so every row thinks first; the budget makes the server close it):
// whole and streamed splits equal, the budget closing the block after exactly that many
// tokens, thinking turned off, a JSON schema (ajv) and a forced tool call enforced on the
// answer after the thinking, Anthropic thinking blocks, the Responses reasoning item.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import Ajv2020 from 'ajv/dist/2020.js';
import { model, user, startServer } from './common.mjs';
import { corpus } from './schema_corpus.mjs';
import { fixtures, make_model } from './thinking_models.mjs';

const ajv = new Ajv2020({ strict: false, allErrors: true });
const check = (schema, value) => {
  const validate = ajv.compile(schema);
  return validate(value) ? null : ajv.errorsText(validate.errors);
};
const schema_of = (title) => corpus.find(([t]) => t === title)[1];

const thinkers = ['qwen3', 'deepseek_r1', 'glm45', 'gemma4'];
const servers = {};
const dirs = [];

before(async () => {
  for (const name of Object.keys(fixtures)) {
    const dir = make_model(name);
    dirs.push(dir);
    // --reasoning-parser left at auto: each template must name its parser.
    servers[name] = await startServer(['--model', dir, '--max-model-len', '2048', '--batch', '4',
      '--kv-budget', '32MB']);
  }
});

after(async () => {
  for (const s of Object.values(servers)) await s.stop();
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
});

// The fixture's request extras (Gemma 4 thinks only with enable_thinking).
const extras = (name) => (fixtures[name].needs ? { chat_template_kwargs: fixtures[name].needs } : {});
const greedy = { temperature: 0, ignore_eos: true };

test('reasoning: auto picks each template\'s parser', async () => {
  for (const [name, f] of Object.entries(fixtures)) {
    const stats = await (await fetch(`${servers[name].origin}/stats`)).json();
    assert.equal(stats.reasoning_parser, f.parser, name);
  }
});

for (const name of thinkers) {
  const end = fixtures[name].end;

  test(`reasoning ${name}: chat splits whole and streamed alike, the budget closes the block`, async () => {
    const s = servers[name];
    const body = { model, messages: user('Think, then answer.'), max_tokens: 40, ...greedy,
      thinking_token_budget: 10, logprobs: true, ...extras(name) };
    const r = await s.openai.chat.completions.create(body);
    const m = r.choices[0].message;
    assert.ok(m.reasoning_content?.length > 0, JSON.stringify(m));
    assert.equal(m.reasoning, m.reasoning_content);
    assert.ok(m.content.length > 0, 'the row answered after the budget');
    assert.ok(!m.content.includes(end) && !m.reasoning_content.includes(end), JSON.stringify(m));
    // The model thought exactly 10 tokens; the server wrote the end of the block after them.
    const tokens = r.choices[0].logprobs.content.map((t) => t.token);
    assert.equal(tokens.length, 40);
    assert.ok(!tokens.slice(0, 10).join('').includes(end));
    assert.ok(tokens.slice(10).join('').startsWith(`\n${end}`), JSON.stringify(tokens.slice(8, 16)));

    let reasoning = '', content = '';
    for await (const chunk of await s.openai.chat.completions.create({ ...body, logprobs: false, stream: true })) {
      const delta = chunk.choices[0]?.delta ?? {};
      if (delta.reasoning_content) {
        assert.equal(content, '', 'reasoning deltas come before the content');
        assert.equal(delta.reasoning, delta.reasoning_content);
        reasoning += delta.reasoning_content;
      }
      content += delta.content ?? '';
    }
    assert.equal(reasoning, m.reasoning_content);
    assert.equal(content, m.content);
  });

  test(`reasoning ${name}: a schema is enforced on the answer after the thinking`, async () => {
    const schema = schema_of('invoice');
    const r = await servers[name].openai.chat.completions.create({
      model, messages: user('Make an invoice.'), max_tokens: 700, temperature: 0, thinking_token_budget: 12,
      response_format: { type: 'json_schema', json_schema: { name: 'invoice', strict: true, schema } },
      ...extras(name),
    });
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'stop', JSON.stringify(c));
    assert.ok(c.message.reasoning_content?.length > 0, 'it thought first');
    assert.equal(check(schema, JSON.parse(c.message.content)), null, c.message.content);
  });

  test(`reasoning ${name}: a forced tool call comes after the thinking`, async () => {
    const parameters = schema_of('weather tool args');
    const r = await servers[name].openai.chat.completions.create({
      model, messages: user('Weather?'), max_tokens: 500, temperature: 0, thinking_token_budget: 8,
      tools: [{ type: 'function', function: { name: 'get_weather', parameters } }], tool_choice: 'required',
      ...extras(name),
    });
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c));
    assert.ok(c.message.reasoning_content?.length > 0);
    assert.equal(c.message.tool_calls.length, 1);
    assert.equal(c.message.tool_calls[0].function.name, 'get_weather');
    assert.equal(check(parameters, JSON.parse(c.message.tool_calls[0].function.arguments)), null);
  });

  test(`reasoning ${name}: Anthropic thinking blocks, whole and streamed`, async () => {
    const s = servers[name];
    const body = { model, max_tokens: 30, messages: user('Think, then answer.'), ...greedy,
      thinking: { type: 'enabled', budget_tokens: 10 } };
    const whole = await s.anthropic.messages.create(body);
    assert.equal(whole.content[0].type, 'thinking', JSON.stringify(whole.content));
    assert.ok(whole.content[0].thinking.length > 0);
    assert.equal(typeof whole.content[0].signature, 'string');
    assert.equal(whole.content[1].type, 'text');
    assert.ok(whole.content[1].text.length > 0);
    const stream = s.anthropic.messages.stream(body);
    let thinking = '';
    stream.on('thinking', (delta) => { thinking += delta; });
    const streamed = await stream.finalMessage();
    assert.deepEqual(streamed.content, whole.content);
    assert.equal(thinking, whole.content[0].thinking);
  });

  test(`reasoning ${name}: the Responses API returns a reasoning item`, async () => {
    const s = servers[name];
    const body = { model, input: 'Think, then answer.', max_output_tokens: 30, ...greedy,
      thinking_token_budget: 10, ...extras(name) };
    const r = await s.openai.responses.create(body);
    assert.equal(r.output[0].type, 'reasoning', JSON.stringify(r.output));
    const text = r.output[0].content[0].text;
    assert.ok(text.length > 0);
    assert.equal(r.output[1].type, 'message');
    assert.ok(r.output_text.length > 0);
    let streamed = '', answer = '';
    for await (const event of await s.openai.responses.create({ ...body, stream: true })) {
      if (event.type === 'response.reasoning_text.delta') streamed += event.delta;
      if (event.type === 'response.output_text.delta') answer += event.delta;
    }
    assert.equal(streamed, text);
    assert.equal(answer, r.output_text);
  });

  if (fixtures[name].can_turn_off)
    test(`reasoning ${name}: thinking off leaves everything to the content`, async () => {
      const s = servers[name];
      const r = await s.openai.chat.completions.create({ model, messages: user('Answer.'), max_tokens: 12,
        ...greedy, chat_template_kwargs: { enable_thinking: false } });
      assert.equal(r.choices[0].message.reasoning_content, null);
      assert.ok(r.choices[0].message.content.length > 0);
      const a = await s.anthropic.messages.create({ model, max_tokens: 12, messages: user('Answer.'),
        ...greedy, thinking: { type: 'disabled' } });
      assert.deepEqual(a.content.map((b) => b.type), ['text']);
    });
}

test('reasoning: a template that leaves opening to the model, which does not', async () => {
  const s = servers.qwen3_may_open;
  const r = await s.openai.chat.completions.create({ model, messages: user('Answer.'), max_tokens: 12,
    ...greedy, thinking_token_budget: 4 });
  const m = r.choices[0].message;
  assert.equal(m.reasoning_content, null);
  assert.ok(m.content.length > 0);
});
