// Model folders that think, for the reasoning tests: the oracle llama model's random
// weights and 512-token byte-level tokenizer under a real thinking chat template. The
// weights think nothing, of course: what makes a row think is the template, which opens the
// thinking block in the prompt (Qwen3.5, DeepSeek-R1, GLM-4.7 do), so everything the model
// writes until the block closes is reasoning; a thinking budget then makes the server close
// it, deterministically, and the row answers. What these fixtures prove is the plumbing
// (parsers on the real templates, budgets, grammars after the thinking, the API shapes),
// not that a model thinks well.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const oracle = 'tests/data/oracle/llama';
const templates = 'tests/data/chat_templates';

// Gemma 4's template leaves opening the thought channel to the model; this variant opens
// it when thinking is on, as the others' templates open <think>, so a random model thinks.
function gemma_opening_template() {
  const text = fs.readFileSync(path.join(templates, 'google-gemma-4-31B-it.jinja'), 'utf8');
  const off = "{%- if not enable_thinking | default(false) -%}\n            {{- '<|channel>thought\\n<channel|>' -}}\n        {%- endif -%}";
  if (!text.includes(off)) throw new Error('the Gemma 4 template changed: update thinking_models.mjs');
  return text.replace(off, off.replace('{%- endif -%}', "{%- else -%}\n            {{- '<|channel>thought\\n' -}}\n        {%- endif -%}"));
}

// The oracle tokenizer with Gemma 4's thinking delimiters as special added tokens (as in
// Gemma's own tokenizer): the two last BPE merges give up their ids to them.
function gemma_tokenizer() {
  const t = JSON.parse(fs.readFileSync(path.join(oracle, 'tokenizer.json'), 'utf8'));
  const freed = t.model.merges.splice(-2).map(([a, b]) => a + b);
  const ids = freed.map((token) => t.model.vocab[token]);
  for (const token of freed) delete t.model.vocab[token];
  ['<|channel>', '<channel|>'].forEach((content, i) => t.added_tokens.push({
    id: ids[i], content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true,
  }));
  return JSON.stringify(t);
}

// name: [chat template, the parser `auto` must find, thinking off possible, bos token].
export const fixtures = {
  qwen3: { template: 'Qwen3.5-4B', parser: 'qwen3', can_turn_off: true, end: '</think>' },
  deepseek_r1: { template: 'deepseek-ai-DeepSeek-R1-Distill-Llama-8B', parser: 'deepseek_r1', can_turn_off: false, end: '</think>' },
  glm45: { template: 'GLM-4.7-Flash', parser: 'glm45', can_turn_off: true, end: '</think>' },
  gemma4: { template: null, parser: 'gemma4', can_turn_off: true, end: '<channel|>', needs: { enable_thinking: true } },
  // Qwen3's template does not open the block: the model may, this one does not.
  qwen3_may_open: { template: 'Qwen-Qwen3-0.6B', parser: 'qwen3', can_turn_off: true, end: '</think>' },
};

// Writes the fixture's folder under a fresh temporary directory; returns its path.
export function make_model(name) {
  const f = fixtures[name];
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `tandem-think-${name}-`));
  for (const file of ['config.json', 'generation_config.json', 'model.safetensors'])
    fs.copyFileSync(path.join(oracle, file), path.join(dir, file));
  const gemma = name === 'gemma4';
  fs.writeFileSync(path.join(dir, 'tokenizer.json'),
    gemma ? gemma_tokenizer() : fs.readFileSync(path.join(oracle, 'tokenizer.json')));
  const chat_template = gemma ? gemma_opening_template()
    : fs.readFileSync(path.join(templates, `${f.template}.jinja`), 'utf8');
  fs.writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify({
    tokenizer_class: 'PreTrainedTokenizerFast', bos_token: gemma ? '<bos>' : '<s>',
    eos_token: '<|im_end|>', pad_token: '<|endoftext|>', chat_template,
  }));
  return dir;
}
