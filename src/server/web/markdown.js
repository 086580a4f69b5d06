// Markdown to HTML for model output: paragraphs, headings, emphasis, inline code, fenced
// code blocks, lists (nested by indentation), block quotes, rules and links.
//
// Safety invariant: the output contains no markup but the tags written below. Every piece
// of input text reaches the output through escape_html(), attribute values included, and a
// link keeps its href only for http(s):, mailto: or a same-page/relative path — anything
// else (javascript:, data:, …) is rendered as its text. So a model (or a user) cannot inject
// elements, attributes or script, however the text is crafted; the page's CSP is a second net.
//
// Streaming: the renderer is called on the whole text after every chunk, so an unclosed
// fence renders as a code block running to the end, and unclosed emphasis stays literal.

const ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escape_html(text) {
  return String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

// Block patterns. Indentation up to 3 spaces is allowed before a block marker.
const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const BULLET = /^( {0,3})([-*+])[ \t]+(.*)$/;
const ORDERED = /^( {0,3})(\d{1,9})[.)][ \t]+(.*)$/;
const QUOTE = /^ {0,3}>[ ]?(.*)$/;
const BLANK = /^[ \t]*$/;

export function render_markdown(text) {
  const lines = String(text).replace(/\r\n?/g, '\n').split('\n');
  return render_blocks(lines);
}

function render_blocks(lines) {
  const out = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (BLANK.test(line)) {
      i++;
      continue;
    }
    const block = fenced_code(lines, i) ?? heading(lines, i) ?? rule(lines, i) ??
      list(lines, i) ?? quote(lines, i) ?? paragraph(lines, i);
    out.push(block.html);
    i = block.next;
  }
  return out.join('\n');
}

function fenced_code(lines, i) {
  const m = FENCE.exec(lines[i]);
  if (!m) return null;
  const fence = m[1];
  const lang = m[2].replace(/[^A-Za-z0-9_+#.-]/g, '');
  const body = [];
  let j = i + 1;
  for (; j < lines.length; j++) {
    const close = lines[j].trim();
    if (close.startsWith(fence[0].repeat(fence.length)) && /^[`~]+$/.test(close) &&
        close[0] === fence[0]) break;
    body.push(lines[j]);
  }
  const cls = lang ? ` class="language-${escape_html(lang)}"` : '';
  const label = lang ? `<div class="code-lang">${escape_html(lang)}</div>` : '';
  const code = `<pre><code${cls}>${escape_html(body.join('\n'))}</code></pre>`;
  const html = `<div class="code-block">${label}${code}</div>`;
  return { html, next: j + 1 };
}

function heading(lines, i) {
  const m = HEADING.exec(lines[i]);
  if (!m) return null;
  const level = m[1].length;
  return { html: `<h${level}>${render_inline(m[2] ?? '')}</h${level}>`, next: i + 1 };
}

function rule(lines, i) {
  return RULE.test(lines[i]) ? { html: '<hr>', next: i + 1 } : null;
}

function quote(lines, i) {
  if (!QUOTE.test(lines[i])) return null;
  const inner = [];
  let j = i;
  for (; j < lines.length && QUOTE.test(lines[j]); j++) inner.push(QUOTE.exec(lines[j])[1]);
  return { html: `<blockquote>${render_blocks(inner)}</blockquote>`, next: j };
}

// A list: items of one kind (bullet or ordered); an item owns the lines indented past its
// marker, which are rendered as blocks of their own (nested lists, code, paragraphs).
function list(lines, i) {
  const first = BULLET.exec(lines[i]) ?? ORDERED.exec(lines[i]);
  if (!first) return null;
  const ordered = !BULLET.test(lines[i]);
  const pattern = ordered ? ORDERED : BULLET;
  const items = [];
  let j = i;
  let loose = false;
  while (j < lines.length) {
    const m = pattern.exec(lines[j]);
    if (!m) break;
    const indent = m[0].length - m[3].length;  // where the item's text starts
    const body = [m[3]];
    j++;
    while (j < lines.length) {
      const l = lines[j];
      if (BLANK.test(l)) {
        // A blank line inside the list continues it only if an indented line or another
        // item follows.
        const k = next_non_blank(lines, j);
        if (k < lines.length && (leading_spaces(lines[k]) >= indent || pattern.test(lines[k]))) {
          if (leading_spaces(lines[k]) >= indent) body.push('');
          else loose = true;
          j = k;
          continue;
        }
        break;
      }
      const lead = leading_spaces(l);
      // Nested lists are often indented by 2 under an ordered item's 3-wide marker.
      if (lead >= indent || (lead >= 2 && (BULLET.test(l) || ORDERED.test(l)))) {
        body.push(l.slice(Math.min(lead, indent)));
      } else if (pattern.test(l) || is_block_start(l)) {
        break;
      } else {
        body.push(l.trimStart());  // a lazy continuation of the item's paragraph
      }
      j++;
    }
    items.push(body);
  }
  const tag = ordered ? 'ol' : 'ul';
  const start = ordered && Number(first[2]) !== 1 ? ` start="${Number(first[2])}"` : '';
  const rendered = items.map((body) => `<li>${render_item(body, loose)}</li>`).join('');
  return { html: `<${tag}${start}>${rendered}</${tag}>`, next: j };
}

// A tight item whose content is one paragraph shows without <p>.
function render_item(body, loose) {
  const html = render_blocks(body);
  if (loose) return html;
  const m = /^<p>([\s\S]*?)<\/p>([\s\S]*)$/.exec(html);
  return m && !m[1].includes('<p>') ? m[1] + m[2] : html;
}

function next_non_blank(lines, j) {
  while (j < lines.length && BLANK.test(lines[j])) j++;
  return j;
}

function leading_spaces(line) {
  return /^ */.exec(line)[0].length;
}

function is_block_start(line) {
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line) ||
    BULLET.test(line) || ORDERED.test(line);
}

function paragraph(lines, i) {
  const body = [lines[i]];
  let j = i + 1;
  for (; j < lines.length && !BLANK.test(lines[j]) && !is_block_start(lines[j]); j++)
    body.push(lines[j]);
  // Single newlines inside a paragraph are kept as line breaks (chat text is written so).
  const html = body.map((l) => render_inline(l.trim())).join('<br>\n');
  return { html: `<p>${html}</p>`, next: j };
}

// ---- Inline ----

const PUNCTUATION = /[!"#$%&'()*+,\-./:;<=>?@[\\\]^_`{|}~]/;

export function render_inline(text) {
  let out = '';
  let plain = '';
  const flush = () => {
    out += escape_html(plain);
    plain = '';
  };
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === '\\' && i + 1 < text.length && PUNCTUATION.test(text[i + 1])) {
      plain += text[i + 1];
      i += 2;
      continue;
    }
    const span = code_span(text, i) ?? link(text, i) ?? emphasis(text, i);
    if (span) {
      flush();
      out += span.html;
      i = span.next;
      continue;
    }
    plain += c;
    i++;
  }
  flush();
  return out;
}

function code_span(text, i) {
  if (text[i] !== '`') return null;
  let n = 1;
  while (text[i + n] === '`') n++;
  const ticks = '`'.repeat(n);
  let j = i + n;
  for (;;) {
    j = text.indexOf(ticks, j);
    if (j < 0) return null;
    if (text[j + n] !== '`') break;
    while (text[j] === '`') j++;  // a longer run does not close
  }
  let body = text.slice(i + n, j);
  if (/^ .* $/.test(body) && body.trim()) body = body.slice(1, -1);
  return { html: `<code>${escape_html(body)}</code>`, next: j + n };
}

// [text](destination) — destination without spaces, optionally followed by a "title".
function link(text, i) {
  if (text[i] !== '[') return null;
  let depth = 0;
  let j = i;
  for (; j < text.length; j++) {
    if (text[j] === '\\') j++;
    else if (text[j] === '[') depth++;
    else if (text[j] === ']' && --depth === 0) break;
  }
  if (j >= text.length || text[j + 1] !== '(') return null;
  const m = /^\(\s*<?([^\s()<>]*)>?(?:\s+"[^"]*")?\s*\)/.exec(text.slice(j + 1));
  if (!m) return null;
  const label = render_inline(text.slice(i + 1, j));
  const href = m[1];
  const next = j + 1 + m[0].length;
  if (!safe_href(href)) return { html: label, next };
  return {
    html: `<a href="${escape_html(href)}" target="_blank" rel="noopener noreferrer">${label}</a>`,
    next,
  };
}

// http(s):, mailto:, or a path on this origin ("/x", "./x", "../x", "#x", "x/y"; not "//host").
export function safe_href(href) {
  return /^(https?:\/\/|mailto:)/i.test(href) || /^(\/(?!\/)|#|\.\.?\/)/.test(href) ||
    (/^[\w-]+(\.[\w-]+)*(\/[^:]*)?$/.test(href) && !href.includes(':'));
}

// **strong**, __strong__, *em*, _em_, ~~del~~: an opener must be followed by a non-space,
// a closer preceded by one; `_` only between word boundaries (snake_case stays literal).
const DELIMITERS = [
  ['**', 'strong'], ['__', 'strong'], ['~~', 'del'], ['*', 'em'], ['_', 'em'],
];

function emphasis(text, i) {
  for (const [mark, tag] of DELIMITERS) {
    if (!text.startsWith(mark, i)) continue;
    const after = text[i + mark.length];
    if (after === undefined || /\s/.test(after)) continue;
    if (mark[0] === '_' && i > 0 && /\w/.test(text[i - 1])) continue;
    const close = find_closer(text, i + mark.length, mark);
    if (close === null) continue;
    const inner = render_inline(text.slice(i + mark.length, close));
    return { html: `<${tag}>${inner}</${tag}>`, next: close + mark.length };
  }
  return null;
}

function find_closer(text, from, mark) {
  for (let j = from + 1; j <= text.length - mark.length; j++) {
    if (text[j] === '\\') {
      j++;
      continue;
    }
    if (text[j] === '`') {  // code spans are opaque to emphasis
      const span = code_span(text, j);
      if (span) j = span.next - 1;
      continue;
    }
    if (text[j] !== mark[0]) continue;
    let run = 1;
    while (text[j + run] === mark[0]) run++;
    // A run closes only a mark of its own width ("*" does not end on half of a "**", nor
    // "**" on a lone "*"), or a run of 3 that ends both ("***both***").
    if ((run !== mark.length && run !== 3) || /\s/.test(text[j - 1])) {
      j += run - 1;
      continue;
    }
    const at = j + run - mark.length;
    if (mark[0] === '_' && /\w/.test(text[at + mark.length] ?? '')) continue;
    return at;
  }
  return null;
}
