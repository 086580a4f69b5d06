// The conversations, kept in the browser's localStorage (nothing is stored on the server).
// A conversation: { id, title, updated (ms since epoch), messages: [{ role, content,
// images?, stats? }] } where images (data: URLs) ride on user messages and stats
// (generation.js) on assistant messages. The list is kept
// newest first; `current` names the one on screen.

const LIST_KEY = 'tandem.conversations';
const CURRENT_KEY = 'tandem.current';

function read_list() {
  try {
    const list = JSON.parse(localStorage.getItem(LIST_KEY) ?? '[]');
    return Array.isArray(list) ? list.filter((c) => c && Array.isArray(c.messages)) : [];
  } catch {
    return [];  // unreadable storage starts afresh rather than breaking the page
  }
}

function new_id() {
  return `c${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
}

export class Conversations {
  constructor() {
    this.list = read_list();
    const current = localStorage.getItem(CURRENT_KEY);
    this.current_id = this.list.some((c) => c.id === current) ? current : null;
  }

  // The conversation on screen; a fresh, unsaved one when there is none.
  current() {
    let c = this.list.find((x) => x.id === this.current_id);
    if (!c) {
      c = { id: new_id(), title: '', updated: Date.now(), messages: [] };
      this.current_id = c.id;
    }
    return c;
  }

  select(id) {
    this.current_id = id;
    localStorage.setItem(CURRENT_KEY, id);
  }

  start_new() {
    this.current_id = null;
    localStorage.removeItem(CURRENT_KEY);
  }

  remove(id) {
    this.list = this.list.filter((c) => c.id !== id);
    if (this.current_id === id) this.start_new();
    this.save_list();
  }

  // Stores `c` (adding it on its first message), newest first, titled by its first prompt.
  save(c) {
    if (!c.title) {
      const first = c.messages.find((m) => m.role === 'user');
      if (first) c.title = first.content.replace(/\s+/g, ' ').trim().slice(0, 60) || (first.images?.length ? 'Image' : '');
    }
    c.updated = Date.now();
    this.list = [c, ...this.list.filter((x) => x.id !== c.id)];
    this.current_id = c.id;
    localStorage.setItem(CURRENT_KEY, c.id);
    this.save_list();
  }

  save_list() {
    try {
      localStorage.setItem(LIST_KEY, JSON.stringify(this.list));
    } catch {
      // Quota exceeded: drop the oldest conversations until the rest fit.
      while (this.list.length > 1) {
        this.list.pop();
        try {
          localStorage.setItem(LIST_KEY, JSON.stringify(this.list));
          return;
        } catch { /* keep dropping */ }
      }
      // One conversation still too large (its images): store its text without the images
      // (they stay on screen until the page reloads).
      const text_only = this.list.map((c) => ({ ...c, messages: c.messages.map(({ images, ...m }) => m) }));
      try {
        localStorage.setItem(LIST_KEY, JSON.stringify(text_only));
      } catch { /* nothing more to drop */ }
    }
  }
}
