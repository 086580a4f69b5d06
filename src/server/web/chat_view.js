// What the chat page shows: the conversation list and the messages of one conversation.
// Assistant text goes through the Markdown renderer (markdown.js, escapes everything);
// user text is shown as typed (a text node). Nothing here changes state: actions call back.
import { el } from './dom.js';
import { render_markdown } from './markdown.js';
import { format_stats } from './generation.js';

// actions: { select(id), remove(id) }
export function render_conversation_list(ul, list, current_id, actions) {
  ul.replaceChildren(...list.map((c) => el('li', { class: c.id === current_id ? 'current' : null }, [
    el('button', { class: 'title', type: 'button', title: c.title, on_click: () => actions.select(c.id) },
      c.title || 'Untitled'),
    el('button', { class: 'icon delete', type: 'button', 'aria-label': `Delete “${c.title}”`,
      on_click: () => actions.remove(c.id) }, '×'),
  ])));
}

// actions: { edit(index, text), regenerate() }; `busy`: an answer is streaming (no edits).
export function render_messages(ol, messages, { busy, actions }) {
  const last_assistant = messages.map((m) => m.role).lastIndexOf('assistant');
  ol.replaceChildren(...messages.map((m, i) => message_item(m, i, {
    busy,
    actions,
    can_regenerate: i === last_assistant && i === messages.length - 1,
  })));
}

function message_item(message, index, { busy, actions, can_regenerate }) {
  const li = el('li', { class: `message ${message.role}`, 'data-index': index });
  const content = el('div', { class: 'content' });
  set_content(content, message);
  li.append(el('div', { class: 'role' }, message.role === 'user' ? 'You' : 'Model'));
  const images = message.role === 'user' ? images_of(message) : null;
  if (images) li.append(images);
  li.append(content);
  if (message.stats) li.append(el('div', { class: 'stats' }, format_stats(message.stats)));
  const buttons = [];
  if (message.role === 'user' && !busy)
    buttons.push(el('button', { type: 'button', class: 'edit', on_click: () => start_edit(li, message, index, actions) }, 'Edit'));
  if (can_regenerate && !busy)
    buttons.push(el('button', { type: 'button', class: 'regenerate', on_click: () => actions.regenerate() }, 'Regenerate'));
  if (buttons.length) li.append(el('div', { class: 'actions' }, buttons));
  return li;
}

export function set_content(node, message) {
  if (message.role === 'assistant') {
    node.innerHTML = render_markdown(message.content);  // safe: see markdown.js
  } else {
    node.textContent = message.content;
  }
}

// A user message's images, as sent: only data:image/ URLs are shown (anything else in
// storage is not ours), and the page's CSP allows no other image source either.
function images_of(message) {
  const urls = (message.images ?? []).filter((u) => typeof u === 'string' && u.startsWith('data:image/'));
  if (!urls.length) return null;
  return el('div', { class: 'images' }, urls.map((src, i) => el('img', { src, alt: `image ${i + 1}` })));
}

// The images waiting to be sent, each with a button that removes it.
export function render_attachments(box, urls, remove) {
  box.replaceChildren(...urls.map((src, i) => el('figure', {}, [
    el('img', { src, alt: `attached image ${i + 1}` }),
    el('button', { type: 'button', class: 'remove secondary', 'aria-label': `Remove image ${i + 1}`,
      on_click: () => remove(i) }, '×'),
  ])));
  box.hidden = urls.length === 0;
}

// The streaming answer: the last message's content and a live figure.
export function update_streaming(ol, text) {
  const li = ol.lastElementChild;
  if (!li) return;
  set_content(li.querySelector('.content'), { role: 'assistant', content: text });
  li.classList.add('streaming');
}

function start_edit(li, message, index, actions) {
  const box = el('textarea', { class: 'edit-box', rows: 3, 'aria-label': 'Edit message' });
  box.value = message.content;
  const form = el('form', { class: 'edit-form' }, [
    box,
    el('div', { class: 'actions' }, [
      el('button', { type: 'submit' }, 'Send'),
      el('button', { type: 'button', class: 'secondary', on_click: () => li.replaceWith(message_item(message, index, { busy: false, actions, can_regenerate: false })) }, 'Cancel'),
    ]),
  ]);
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    if (box.value.trim()) actions.edit(index, box.value);
  });
  li.replaceChildren(el('div', { class: 'role' }, 'You'), form);
  box.focus();
}
