// The chat page (/): wires the form, the sampling controls, the model picker and the
// conversation list to the server. State lives in four places: the conversations
// (conversations.js, localStorage), the settings (settings.js), `attached`, the images the
// next message will carry (file picker, paste or drop; shown above the message box), and
// `busy`, the answer now streaming (its AbortController; Stop aborts it). body[data-state] is "generating"
// while an answer streams and "idle" otherwise.
import { ApiError, api_key, get_json, set_api_key } from './api.js';
import { Conversations } from './conversations.js';
import { chat_request, generate } from './generation.js';
import { Settings } from './settings.js';
import { render_attachments, render_conversation_list, render_messages, update_streaming } from './chat_view.js';

const MODEL_KEY = 'tandem.model';
const IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/webp', 'image/gif'];
const MAX_IMAGE_BYTES = 20 << 20;  // the server's default --max-image-bytes
const $ = (id) => document.getElementById(id);

const conversations = new Conversations();
const settings = new Settings(document);
let busy = null;  // { controller } while an answer streams
let attached = [];  // data: URLs of the images the next message carries

function render() {
  const conv = conversations.current();
  render_conversation_list($('conversations'), conversations.list, conv.id, {
    select(id) {
      if (busy) return;
      conversations.select(id);
      close_drawers();
      render();
    },
    remove(id) {
      if (busy && id === conv.id) return;
      conversations.remove(id);
      render();
    },
  });
  render_messages($('messages'), conv.messages, { busy: Boolean(busy), actions: { edit, regenerate } });
  $('empty').hidden = conv.messages.length > 0;
  $('send').hidden = Boolean(busy);
  $('stop').hidden = !busy;
  document.body.dataset.state = busy ? 'generating' : 'idle';
  scroll_to_end();
}

function scroll_to_end() {
  const box = $('messages').parentElement;
  box.scrollTop = box.scrollHeight;
}

function notice(text) {
  $('notice').textContent = text ?? '';
  $('notice').hidden = !text;
}

// Streams an answer to the conversation as it stands (its last message is the user's).
async function answer() {
  const conv = conversations.current();
  const model = $('model').value;
  if (!model) {
    notice('No model to ask: the model list has not loaded (is the API key right?).');
    return;
  }
  const body = chat_request(model, settings.get(), conv.messages);
  const reply = { role: 'assistant', content: '' };
  conv.messages.push(reply);
  busy = { controller: new AbortController() };
  notice(null);
  render();
  let frame = null;
  try {
    const result = await generate(body, {
      signal: busy.controller.signal,
      on_text(text) {
        reply.content = text;
        frame ??= requestAnimationFrame(() => {
          frame = null;
          update_streaming($('messages'), reply.content);
          scroll_to_end();
        });
      },
    });
    reply.content = result.content;
    reply.stats = result.stats;
  } catch (err) {
    notice(err instanceof ApiError ? err.message : String(err));
    if (err instanceof ApiError && err.status === 401) $('settings').classList.add('open');
    if (!reply.content) conv.messages.pop();
    else reply.stats = { finish_reason: 'error', completion_tokens: 0, ttft_ms: null, tokens_per_s: null };
  } finally {
    if (frame !== null) cancelAnimationFrame(frame);
    busy = null;
    conversations.save(conv);
    render();
  }
}

function send(text) {
  if (busy || (!text.trim() && !attached.length)) return;
  const conv = conversations.current();
  const message = { role: 'user', content: text };
  if (attached.length) message.images = attached;
  conv.messages.push(message);
  conversations.save(conv);
  $('input').value = '';
  set_attached([]);
  answer();
}

function edit(index, text) {
  if (busy) return;
  const conv = conversations.current();
  const images = conv.messages[index]?.images;  // an edit changes the text, keeps the images
  conv.messages = conv.messages.slice(0, index);
  conv.messages.push(images ? { role: 'user', content: text, images } : { role: 'user', content: text });
  conversations.save(conv);
  answer();
}

function set_attached(urls) {
  attached = urls;
  render_attachments($('attachments'), attached, (i) => set_attached(attached.filter((_, k) => k !== i)));
}

function read_as_data_url(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

// Images from the file picker, a paste or a drop, sent as data: URLs. Formats the server
// does not decode, and files over its default size bound, are refused here with a note.
async function attach(files) {
  const images = [...files].filter((f) => IMAGE_TYPES.includes(f.type) && f.size <= MAX_IMAGE_BYTES);
  if (images.length < files.length)
    notice('Only PNG, JPEG, WebP and GIF images up to 20 MiB can be attached.');
  try {
    const urls = await Promise.all(images.map(read_as_data_url));
    set_attached([...attached, ...urls]);
  } catch (err) {
    notice(`The image could not be read: ${err}`);
  }
}

// The files a paste or drop carries (a pasted screenshot is one).
function files_of(transfer) {
  return [...(transfer?.items ?? [])].filter((i) => i.kind === 'file').map((i) => i.getAsFile()).filter(Boolean);
}

function regenerate() {
  const conv = conversations.current();
  if (busy || conv.messages.at(-1)?.role !== 'assistant') return;
  conv.messages.pop();
  answer();
}

// The model picker, from /v1/models. A 401 asks for the key; a 503 (still loading) retries.
async function load_models() {
  const select = $('model');
  try {
    const list = await get_json('/v1/models');
    const ids = (list.data ?? []).map((m) => m.id);
    const wanted = localStorage.getItem(MODEL_KEY);
    select.replaceChildren(...ids.map((id) => new Option(id, id, false, id === wanted)));
    $('api-key').classList.remove('invalid');
    notice(null);
  } catch (err) {
    select.replaceChildren();
    if (err.status === 401) {
      $('api-key').classList.add('invalid');
      $('settings').classList.add('open');
      notice('This server needs an API key: enter it in the settings.');
    } else {
      notice(err.status === 503 ? 'The server is loading the model…' : err.message);
      setTimeout(load_models, 1000);
    }
  }
}

function close_drawers() {
  $('sidebar').classList.remove('open');
  $('settings').classList.remove('open');
}

function wire() {
  $('composer').addEventListener('submit', (e) => {
    e.preventDefault();
    send($('input').value);
  });
  $('input').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send($('input').value);
    }
  });
  $('stop').addEventListener('click', () => busy?.controller.abort());
  $('attach').addEventListener('click', () => $('image-file').click());
  $('image-file').addEventListener('change', () => {
    attach($('image-file').files);
    $('image-file').value = '';
  });
  $('input').addEventListener('paste', (e) => {
    const files = files_of(e.clipboardData);
    if (!files.length) return;  // plain text pastes as usual
    e.preventDefault();
    attach(files);
  });
  $('composer').addEventListener('dragover', (e) => e.preventDefault());
  $('composer').addEventListener('drop', (e) => {
    e.preventDefault();
    attach(files_of(e.dataTransfer));
  });
  $('new-chat').addEventListener('click', () => {
    if (busy) return;
    conversations.start_new();
    close_drawers();
    render();
    $('input').focus();
  });
  $('model').addEventListener('change', () => localStorage.setItem(MODEL_KEY, $('model').value));
  $('api-key').value = api_key();
  $('api-key').addEventListener('change', () => {
    set_api_key($('api-key').value.trim());
    load_models();
  });
  $('toggle-sidebar').addEventListener('click', () => $('sidebar').classList.toggle('open'));
  $('toggle-settings').addEventListener('click', () => $('settings').classList.toggle('open'));
}

wire();
render();
load_models();
