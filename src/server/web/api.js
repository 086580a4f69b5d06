// How the pages talk to the server. Every call goes to this page's own origin (relative
// paths, nothing else: the page's CSP allows no other) and carries the API key the user
// entered, kept in localStorage; POST bodies are JSON and say so.

const KEY_STORAGE = 'tandem.api_key';

export function api_key() {
  return localStorage.getItem(KEY_STORAGE) ?? '';
}

export function set_api_key(key) {
  if (key) localStorage.setItem(KEY_STORAGE, key);
  else localStorage.removeItem(KEY_STORAGE);
}

// An HTTP error in the API's own shape, or a network failure (status 0).
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function headers(extra = {}) {
  const h = { ...extra };
  const key = api_key();
  if (key) h.authorization = `Bearer ${key}`;
  return h;
}

async function error_of(res) {
  const text = await res.text();
  let message = `HTTP ${res.status}`;
  try {
    const body = JSON.parse(text);
    message = body?.error?.message ?? message;  // OpenAI's and Anthropic's shapes alike
  } catch {
    if (text) message = `${message}: ${text.slice(0, 200)}`;
  }
  return new ApiError(res.status, message);
}

async function call(path, init) {
  let res;
  try {
    res = await fetch(path, init);
  } catch (err) {
    if (err.name === 'AbortError') throw err;
    throw new ApiError(0, `The server did not answer (${err.message}).`);
  }
  if (!res.ok) throw await error_of(res);
  return res;
}

export async function get_json(path) {
  const res = await call(path, { headers: headers(), cache: 'no-store' });
  return res.json();
}

export async function get_text(path) {
  const res = await call(path, { headers: headers(), cache: 'no-store' });
  return res.text();
}

// POSTs `body` and calls on_event(json) for each server-sent event until `data: [DONE]`.
// An error event inside the stream (the server failed mid-way) throws ApiError.
export async function post_stream(path, body, { signal, on_event }) {
  const res = await call(path, {
    method: 'POST',
    headers: headers({ 'content-type': 'application/json', accept: 'text/event-stream' }),
    body: JSON.stringify(body),
    signal,
  });
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value.replace(/\r\n?/g, '\n');
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = block.split('\n').filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).replace(/^ /, '')).join('\n');
      if (!data) continue;
      if (data === '[DONE]') return;
      const event = JSON.parse(data);
      if (event.error) throw new ApiError(500, event.error.message ?? 'The stream failed.');
      on_event(event);
    }
  }
}
