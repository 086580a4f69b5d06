// The sampling controls (system prompt, temperature, top-p, max tokens, seed), read from
// their form fields into one settings object and kept in localStorage. A field that does
// not hold a valid number keeps the last valid value and is marked invalid.

const STORAGE_KEY = 'tandem.settings';

export const DEFAULTS = Object.freeze({
  system_prompt: '',
  temperature: 0.7,
  top_p: 1,
  max_tokens: 256,
  seed: null,  // null: the server picks one per request
});

// field id → how to read it: [key, parse(text) → value or undefined when invalid]
const FIELDS = [
  ['system-prompt', 'system_prompt', (t) => t],
  ['temperature', 'temperature', (t) => number_in(t, 0, 2)],
  ['top-p', 'top_p', (t) => number_in(t, 0, 1, { exclusive_min: true })],
  ['max-tokens', 'max_tokens', (t) => integer_in(t, 1, 1 << 20)],
  ['seed', 'seed', (t) => (t.trim() === '' ? null : integer_in(t, 0, Number.MAX_SAFE_INTEGER))],
];

function number_in(text, min, max, { exclusive_min = false } = {}) {
  if (text.trim() === '') return undefined;
  const v = Number(text);
  if (!Number.isFinite(v) || v > max || v < min || (exclusive_min && v === min)) return undefined;
  return v;
}

function integer_in(text, min, max) {
  const v = number_in(text, min, max);
  return v !== undefined && Number.isInteger(v) ? v : undefined;
}

function load() {
  try {
    return { ...DEFAULTS, ...JSON.parse(localStorage.getItem(STORAGE_KEY) ?? '{}') };
  } catch {
    return { ...DEFAULTS };
  }
}

export class Settings {
  // Fills the fields from storage and keeps the object in step with them.
  constructor(doc) {
    this.values = load();
    for (const [id, key, parse] of FIELDS) {
      const field = doc.getElementById(id);
      const v = this.values[key];
      field.value = v === null ? '' : String(v);
      field.addEventListener('input', () => {
        const parsed = parse(field.value);
        field.classList.toggle('invalid', parsed === undefined);
        field.setAttribute('aria-invalid', String(parsed === undefined));
        if (parsed === undefined) return;
        this.values[key] = parsed;
        localStorage.setItem(STORAGE_KEY, JSON.stringify(this.values));
      });
    }
  }

  get() {
    return { ...this.values };
  }
}
