// The chat page's Markdown renderer (src/server/web/markdown.js), under node's own test
// runner: the blocks and spans it promises, and its safety invariant — whatever the input,
// the output holds only the renderer's own tags and attributes, every href is safe, and
// no raw <, > or " survives outside them — checked on a hostile corpus and on random text
// built from Markdown's and HTML's special characters.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { render_markdown as md, render_inline, safe_href } from '../../../../src/server/web/markdown.js';

const TAGS = new Set(['p', 'br', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'strong', 'em', 'del', 'code',
  'pre', 'div', 'ul', 'ol', 'li', 'blockquote', 'hr', 'a']);
const ATTRS = {
  class: (v) => /^(code-block|code-lang|language-[A-Za-z0-9_+#.-]+)$/.test(v),
  href: (v) => safe_href(v.replace(/&amp;/g, '&')),
  target: (v) => v === '_blank',
  rel: (v) => v === 'noopener noreferrer',
  start: (v) => /^\d+$/.test(v),
};

// Fails unless `html` is made only of the renderer's markup around escaped text.
function assert_inert(html, input) {
  const rest = html.replace(/<(\/?)([a-z0-9]+)((?:\s[a-z]+="[^"<>]*")*)\s*>/g, (tag, close, name, attrs) => {
    assert.ok(TAGS.has(name), `tag <${name}> from ${JSON.stringify(input)}`);
    for (const [, key, value] of attrs.matchAll(/\s([a-z]+)="([^"]*)"/g)) {
      assert.ok(!close && ATTRS[key], `attribute ${key} from ${JSON.stringify(input)}`);
      assert.ok(ATTRS[key](value), `${key}="${value}" from ${JSON.stringify(input)}`);
    }
    return '';
  });
  assert.doesNotMatch(rest, /[<>"]/, `raw markup left in ${JSON.stringify(html)} from ${JSON.stringify(input)}`);
}

test('markdown: paragraphs keep line breaks; text is escaped', () => {
  assert.equal(md('a & b\nc < d'), '<p>a &amp; b<br>\nc &lt; d</p>');
  assert.equal(md('one\n\ntwo'), '<p>one</p>\n<p>two</p>');
  assert.equal(md(`"q" 'a'`), '<p>&quot;q&quot; &#39;a&#39;</p>');
});

test('markdown: headings, rules, quotes', () => {
  assert.equal(md('# Title'), '<h1>Title</h1>');
  assert.equal(md('### Three ###'), '<h3>Three</h3>');
  assert.equal(md('#nospace'), '<p>#nospace</p>');
  assert.equal(md('---'), '<hr>');
  assert.equal(md('> said\n> he'), '<blockquote><p>said<br>\nhe</p></blockquote>');
});

test('markdown: emphasis, strong, strike, and snake_case left alone', () => {
  assert.equal(render_inline('*a* **b** ***c*** ~~d~~ _e_'),
    '<em>a</em> <strong>b</strong> <strong><em>c</em></strong> <del>d</del> <em>e</em>');
  assert.equal(render_inline('*a **b** c*'), '<em>a <strong>b</strong> c</em>');
  assert.equal(render_inline('snake_case_name and 2 * 3 * 4'), 'snake_case_name and 2 * 3 * 4');
  assert.equal(render_inline('**open'), '**open');
  assert.equal(render_inline('\\*not em\\*'), '*not em*');
});

test('markdown: inline code is literal', () => {
  assert.equal(render_inline('`a *b* <c>`'), '<code>a *b* &lt;c&gt;</code>');
  assert.equal(render_inline('`` x ` y ``'), '<code>x ` y</code>');
  assert.equal(render_inline('`unclosed'), '`unclosed');
  assert.equal(render_inline('*a `*` b*'), '<em>a <code>*</code> b</em>');
});

test('markdown: fenced code blocks, with a language, closed or still streaming', () => {
  assert.equal(md('```js\nif (a < b) {}\n```'),
    '<div class="code-block"><div class="code-lang">js</div><pre><code class="language-js">if (a &lt; b) {}</code></pre></div>');
  assert.equal(md('~~~\nx\n~~~\nafter'), '<div class="code-block"><pre><code>x</code></pre></div>\n<p>after</p>');
  assert.equal(md('```py\nprint(1)'),
    '<div class="code-block"><div class="code-lang">py</div><pre><code class="language-py">print(1)</code></pre></div>');
  assert.equal(md('````\n```\n````'), '<div class="code-block"><pre><code>```</code></pre></div>');
});

test('markdown: lists, nested and ordered', () => {
  assert.equal(md('- a\n- b\n  - c\n- d'), '<ul><li>a</li><li>b\n<ul><li>c</li></ul></li><li>d</li></ul>');
  assert.equal(md('3. x\n4. y'), '<ol start="3"><li>x</li><li>y</li></ol>');
  assert.equal(md('1. x\n  - sub'), '<ol><li>x\n<ul><li>sub</li></ul></li></ol>');
  assert.equal(md('- a\n\n- b'), '<ul><li><p>a</p></li><li><p>b</p></li></ul>');
  assert.equal(md('- item\n```\ncode\n```'),
    '<ul><li>item</li></ul>\n<div class="code-block"><pre><code>code</code></pre></div>');
});

test('markdown: links keep only safe destinations', () => {
  assert.equal(render_inline('[t](https://x.org/a?b=1&c=2)'),
    '<a href="https://x.org/a?b=1&amp;c=2" target="_blank" rel="noopener noreferrer">t</a>');
  assert.equal(render_inline('[t](/dashboard)'), '<a href="/dashboard" target="_blank" rel="noopener noreferrer">t</a>');
  for (const bad of ['javascript:alert(1)', 'JaVaScRiPt:x', 'data:text/html,x', 'vbscript:x', '//evil.example/x'])
    assert.equal(render_inline(`[t](${bad})`).includes('<a'), false, bad);
  assert.equal(render_inline('[**b**](https://x.org)'),
    '<a href="https://x.org" target="_blank" rel="noopener noreferrer"><strong>b</strong></a>');
});

const HOSTILE = [
  '<script>alert(1)</script>', '<img src=x onerror=alert(1)>', '<a href="javascript:alert(1)">x</a>',
  '[x](javascript:alert(1))', '[x](https://a.example" onclick="alert(1))', '[x](<javascript:alert(1)>)',
  '```"><script>x</script>\ncode\n```', '```js" onmouseover="x\n1\n```', '`<b>`', '**<i>**',
  '# <h1 onclick=x>', '- <li onclick=x>', '> <blockquote>', '[<img src=x>](https://ok.example)',
  '[a](https://ok.example "title"onclick=x)', '&lt;script&gt;', '\u0000<x>\u2028', '<!-- x -->', ']]>',
];

test('markdown: a hostile corpus renders inert', () => {
  for (const text of HOSTILE) assert_inert(md(text), text);
  assert_inert(md(HOSTILE.join('\n')), 'the corpus as one text');
});

test('markdown: random text of special characters renders inert', () => {
  const alphabet = ['*', '_', '`', '~', '[', ']', '(', ')', '#', '>', '<', '"', "'", '&', '-', '+', '1.',
    ' ', '  ', '\n', '\n\n', '```', 'a', 'b', 'javascript:', 'https://x.org', '\\', '!', '=', 'on'];
  let seed = 12345;
  const rand = (n) => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed % n;
  };
  for (let i = 0; i < 3000; i++) {
    let text = '';
    for (let n = 1 + rand(40); n > 0; n--) text += alphabet[rand(alphabet.length)];
    assert_inert(md(text), text);
  }
});
