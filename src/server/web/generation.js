// One streamed answer from /v1/chat/completions, timed as the user sees it:
//   ttft_ms          from sending the request to the first non-empty text
//   tokens_per_s     tokens after the first over the time since the first arrived
//                    (the decode rate; the prompt's time is in TTFT)
//   completion_tokens as the server counts them (stream_options.include_usage)
import { post_stream } from './api.js';

// The request body for `settings` (settings.js) and the conversation so far.
export function chat_request(model, settings, messages) {
  const all = [];
  if (settings.system_prompt.trim()) all.push({ role: 'system', content: settings.system_prompt });
  for (const m of messages) all.push({ role: m.role, content: message_content(m) });
  const body = {
    model,
    messages: all,
    stream: true,
    stream_options: { include_usage: true },
    temperature: settings.temperature,
    top_p: settings.top_p,
    max_tokens: settings.max_tokens,
  };
  if (settings.seed !== null) body.seed = settings.seed;
  return body;
}

// A message's content as the API takes it: its text, or, with images, image_url parts
// (data: URLs, as attached) followed by the text.
function message_content(m) {
  if (!m.images?.length) return m.content;
  const parts = m.images.map((url) => ({ type: 'image_url', image_url: { url } }));
  if (m.content) parts.push({ type: 'text', text: m.content });
  return parts;
}

// Streams the answer; on_text(text_so_far) after every chunk. Resolves with the answer
// and its figures; an abort (Stop) resolves too, with finish_reason "stopped".
export async function generate(body, { signal, on_text }) {
  const sent = performance.now();
  let text = '';
  let first = null;
  let last = null;
  let chunks = 0;
  let finish_reason = null;
  let usage = null;
  try {
    await post_stream('/v1/chat/completions', body, {
      signal,
      on_event(event) {
        if (event.usage) usage = event.usage;
        const choice = event.choices?.[0];
        if (!choice) return;
        if (choice.finish_reason) finish_reason = choice.finish_reason;
        const piece = choice.delta?.content ?? '';
        if (!piece) return;
        const now = performance.now();
        first ??= now;
        last = now;
        chunks++;
        text += piece;
        on_text(text);
      },
    });
  } catch (err) {
    if (err.name !== 'AbortError') throw err;
    finish_reason = 'stopped';
  }
  const tokens = usage?.completion_tokens ?? chunks;
  return {
    content: text,
    stats: {
      finish_reason: finish_reason ?? 'unknown',
      completion_tokens: tokens,
      prompt_tokens: usage?.prompt_tokens ?? null,
      ttft_ms: first === null ? null : first - sent,
      tokens_per_s: tokens > 1 && last > first ? (tokens - 1) / ((last - first) / 1000) : null,
    },
  };
}

// "42 tokens · 118.3 tok/s · TTFT 35 ms · length"
export function format_stats(stats) {
  const parts = [`${stats.completion_tokens} token${stats.completion_tokens === 1 ? '' : 's'}`];
  if (stats.tokens_per_s !== null) parts.push(`${stats.tokens_per_s.toFixed(1)} tok/s`);
  if (stats.ttft_ms !== null) parts.push(`TTFT ${Math.round(stats.ttft_ms)} ms`);
  parts.push(stats.finish_reason);
  return parts.join(' · ');
}
