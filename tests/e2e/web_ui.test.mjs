// The web pages in a real browser: Debian's chromium, headless, driven through the
// DevTools protocol by playwright-core, against its own `tandem serve` on the embedded
// model (models/tiny-kjv, --batch 4, an API key). The chat page must stream the answer
// /v1/chat/completions gives for the same greedy request, keep the conversation across a
// reload, regenerate, edit and stop, render hostile text inertly, and send an attached or
// pasted image as a data: URL part (the text-only model's 400 shown); the dashboard must
// show the running rows move while `tandem bench` loads the server. Every request the
// browser makes is recorded: one to any other origin fails the run, as does an uncaught
// script error or a CSP violation. Screenshots of both pages (and of the chat on a phone)
// go to build/screenshots/ (WEB_SCREENSHOTS_DIR=docs refreshes the copies docs/web.md shows).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { chromium } from 'playwright-core';

const bin = process.env.TANDEM_BIN ?? 'build/tandem';
const chromium_path = process.env.CHROMIUM ?? '/usr/bin/chromium';
const shots = process.env.WEB_SCREENSHOTS_DIR ?? 'build/screenshots';
const key = 'web-e2e-key';
const model = 'tiny-kjv';
const max_tokens = 40;

let server;   // the tandem serve child
let origin;   // http://127.0.0.1:PORT
let context;  // the browser (a persistent context on a fresh profile)
let page;     // the chat
let dash;     // the dashboard, open from the start so that its charts hold the whole run
let profile;
const requests = [];     // every URL the browser asked for
const page_errors = [];  // uncaught exceptions and CSP violations

function free_port() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function until(fn, what, timeout_ms = 20_000, every_ms = 50) {
  const deadline = Date.now() + timeout_ms;
  for (;;) {
    const value = await fn();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, every_ms));
  }
}

// The answer the API itself gives to a greedy request for `content`.
async function api_answer(content) {
  const res = await fetch(`${origin}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ model, messages: [{ role: 'user', content }], temperature: 0, top_p: 1, max_tokens }),
  });
  assert.equal(res.status, 200);
  return (await res.json()).choices[0].message.content;
}

const stored = () => page.evaluate(() => {
  const list = JSON.parse(localStorage.getItem('tandem.conversations') ?? '[]');
  return list.find((c) => c.id === localStorage.getItem('tandem.current')) ?? null;
});
const idle = () => page.waitForSelector('body[data-state="idle"]');

function watch(p) {
  p.on('pageerror', (err) => page_errors.push(`uncaught: ${err.message}`));
  p.on('console', (msg) => {
    if (/Content Security Policy|Refused to/i.test(msg.text())) page_errors.push(`csp: ${msg.text()}`);
  });
  return p;
}

before(async () => {
  assert.ok(fs.existsSync(chromium_path), `${chromium_path} is missing: run scripts/bootstrap.sh`);
  const port = await free_port();
  origin = `http://127.0.0.1:${port}`;
  server = spawn(bin, ['serve', '--model', 'models/tiny-kjv', '--port', String(port), '--batch', '4',
    '--api-key', key, '--kv-budget', '64MB'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  server.stderr.on('data', (d) => { log += d; });
  await until(async () => {
    if (server.exitCode !== null) throw new Error(`tandem serve exited:\n${log}`);
    return (await fetch(`${origin}/health`).catch(() => null))?.status === 200;
  }, 'the server to be ready', 60_000);

  profile = fs.mkdtempSync(path.join(os.tmpdir(), 'tandem-web-e2e-'));
  context = await chromium.launchPersistentContext(profile, {
    executablePath: chromium_path,
    headless: true,
    viewport: { width: 1280, height: 800 },
    colorScheme: 'light',
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  context.on('request', (r) => requests.push(r.url()));
  // Nothing may leave for another origin; such a request is recorded above and refused
  // here, so it fails the last test instead of hanging on this closed network.
  await context.route((url) => url.origin !== origin && url.protocol !== 'data:', (route) => route.abort());
  page = watch(context.pages()[0] ?? await context.newPage());
  dash = watch(await context.newPage());
  const res = await dash.goto(`${origin}/dashboard`);
  assert.equal(res.status(), 200);
  fs.mkdirSync(shots, { recursive: true });
});

after(async () => {
  await context?.close();
  if (profile) fs.rmSync(profile, { recursive: true, force: true });
  if (server && server.exitCode === null) {
    server.kill('SIGTERM');
    await new Promise((r) => server.once('exit', r));
  }
});

test('web: the chat page loads without the key, then streams the greedy answer the API gives', async () => {
  const res = await page.goto(`${origin}/`);
  assert.equal(res.status(), 200);
  await page.waitForSelector('#notice:has-text("API key")');  // /v1/models answered 401
  await page.fill('#api-key', key);
  await page.press('#api-key', 'Tab');
  await until(() => page.inputValue('#model').then((v) => v === model), 'the model picker');
  await page.fill('#temperature', '0');
  await page.fill('#top-p', '1');
  await page.fill('#max-tokens', String(max_tokens));

  const prompt = 'Who made the heaven and the earth?';
  const sent = page.waitForRequest((r) => r.url() === `${origin}/v1/chat/completions`);
  await page.fill('#input', prompt);
  await page.press('#input', 'Enter');
  const request = await sent;
  await page.waitForSelector('body[data-state="generating"]');
  await idle();

  const headers = request.headers();
  assert.equal(headers.authorization, `Bearer ${key}`);
  assert.match(headers['content-type'], /^application\/json/);
  const body = request.postDataJSON();
  assert.equal(body.stream, true);
  assert.equal(body.temperature, 0);
  assert.equal(body.max_tokens, max_tokens);
  assert.deepEqual(body.messages, [{ role: 'user', content: prompt }]);

  const want = await api_answer(prompt);
  assert.ok(want.length > 0);
  const conv = await stored();
  assert.equal(conv.messages.length, 2);
  assert.equal(conv.messages[1].content, want, 'the streamed answer is the API\'s greedy answer');
  // What is on screen is that answer, rendered.
  const shown = await page.innerHTML('.message.assistant .content');
  const rendered = await page.evaluate(async (text) =>
    (await import('/web/markdown.js')).render_markdown(text), want);
  assert.equal(shown, rendered);
  const stats = await page.textContent('.message.assistant .stats');
  assert.match(stats, /^\d+ tokens? · [\d.]+ tok\/s · TTFT \d+ ms · (length|stop)$/);
  assert.equal(Number(stats.split(' ')[0]), conv.messages[1].stats.completion_tokens);
});

test('web: the conversation survives a reload; regenerate and edit re-ask the model', async () => {
  const before_reload = await stored();
  await page.reload();
  await page.waitForSelector('.message.assistant .stats');
  assert.equal(await page.textContent('.message.user .content'), before_reload.messages[0].content);
  assert.equal(await page.locator('#conversations li').count(), 1);
  assert.equal(await page.textContent('#conversations li.current .title'), before_reload.title);
  await until(() => page.inputValue('#model').then((v) => v === model), 'the model picker');

  await page.click('.message.assistant .regenerate');
  await page.waitForSelector('body[data-state="generating"]');
  await idle();
  const regenerated = await stored();
  assert.equal(regenerated.messages.length, 2);
  assert.equal(regenerated.messages[1].content, before_reload.messages[1].content, 'greedy twice, same answer');

  const edited = 'And God said, Let there be light';
  await page.click('.message.user .edit');
  await page.fill('.edit-box', edited);
  await page.click('.edit-form button[type="submit"]');
  await page.waitForSelector('body[data-state="generating"]');
  await idle();
  const after_edit = await stored();
  assert.deepEqual(after_edit.messages.map((m) => m.role), ['user', 'assistant']);
  assert.equal(after_edit.messages[0].content, edited);
  assert.equal(after_edit.messages[1].content, await api_answer(edited));
  await page.screenshot({ path: path.join(shots, 'web-chat.png') });
});

test('web: Stop ends a long answer and keeps what came', async () => {
  // The answer must still be arriving when Stop is clicked, however fast this CPU
  // generates it (900 tokens of the embedded model take under a second on some
  // machines): the page's downloads are throttled to 4 KB/s for this test, ~20 streamed
  // tokens a second, so the stream lasts well past the click.
  const cdp = await context.newCDPSession(page);
  const throttle = (bytes_per_s) => cdp.send('Network.emulateNetworkConditions',
    { offline: false, latency: 0, downloadThroughput: bytes_per_s, uploadThroughput: -1 });
  await cdp.send('Network.enable');
  await throttle(4096);
  try {
    await page.fill('#max-tokens', '900');
    await page.click('#new-chat');
    await page.fill('#input', 'And it came to pass');  // greedy, it runs past 300 tokens
    await page.click('#send');
    await page.waitForSelector('.message.assistant.streaming');
    await until(async () => (await page.textContent('.message.assistant .content')).length > 0, 'the first text');
    // Forced: while tokens stream in, the layout moves under the button every frame and
    // playwright's wait for a stable target could outlast the answer.
    await page.click('#stop', { force: true });
    await idle();
  } finally {
    await throttle(-1);
    await cdp.detach();
  }
  const conv = await stored();
  assert.equal(conv.messages[1].stats.finish_reason, 'stopped');
  assert.ok(conv.messages[1].content.length > 0);
  assert.ok(conv.messages[1].stats.completion_tokens < 900);
  assert.equal(await page.locator('#conversations li').count(), 2);
  await page.fill('#max-tokens', String(max_tokens));
});

test('web: hostile text in a conversation renders as inert text', async () => {
  const hostile = [
    '<img src=x onerror="window.__xss=1">', '<script>window.__xss=2</script>',
    '[click](javascript:window.__xss=3)', '[x](https://a.example" onmouseover="window.__xss=4)',
    '**<svg onload=window.__xss=5>**', '```html\n</code></pre><img src=x onerror=window.__xss=6>\n```',
    '`<iframe src=javascript:window.__xss=7>`', '# <a href="javascript:window.__xss=8">h</a>',
  ].join('\n\n');
  await page.evaluate((text) => {
    const conv = { id: 'hostile', title: 'hostile', updated: Date.now(),
      messages: [{ role: 'user', content: text }, { role: 'assistant', content: text }] };
    const list = JSON.parse(localStorage.getItem('tandem.conversations'));
    localStorage.setItem('tandem.conversations', JSON.stringify([conv, ...list]));
    localStorage.setItem('tandem.current', 'hostile');
  }, hostile);
  await page.reload();
  await page.waitForSelector('.message.assistant .content h1');
  await new Promise((r) => setTimeout(r, 200));
  const found = await page.evaluate(() => {
    const box = document.getElementById('messages');
    const bad = [...box.querySelectorAll('*')].filter((e) =>
      ['SCRIPT', 'IMG', 'IFRAME', 'svg', 'SVG'].includes(e.tagName) ||
      [...e.attributes].some((a) => a.name.startsWith('on')) ||
      (e.tagName === 'A' && !/^https?:/.test(e.getAttribute('href'))));
    return { xss: window.__xss ?? null, bad: bad.map((e) => e.outerHTML), text: box.textContent };
  });
  assert.equal(found.xss, null);
  assert.deepEqual(found.bad, []);
  assert.ok(found.text.includes('<img src=x onerror="window.__xss=1">'), 'the user text is shown as typed');
  await page.click('#conversations li.current .delete');
  assert.equal(await page.locator('#conversations li').count(), 2);
});

test('web: the chat fits a phone-sized screen', async () => {
  const phone = watch(await context.newPage());
  await phone.setViewportSize({ width: 390, height: 844 });
  await phone.goto(`${origin}/`);
  const sidebar_left = () => phone.evaluate(() => document.getElementById('sidebar').getBoundingClientRect().left);
  assert.ok(await phone.isVisible('#toggle-sidebar'));
  await phone.click('#toggle-sidebar');
  await until(async () => (await sidebar_left()) >= 0, 'the drawer to open');
  await phone.click('#conversations li:nth-child(2) .title');  // the first chat
  await phone.waitForSelector('.message.assistant .stats');
  await until(() => phone.evaluate(() => document.getElementById('sidebar').getBoundingClientRect().right <= 0),
    'the drawer to close');
  const layout = await phone.evaluate(() => ({
    overflow: document.documentElement.scrollWidth - window.innerWidth,
    sidebar: document.getElementById('sidebar').getBoundingClientRect().right,
    composer: document.getElementById('composer').getBoundingClientRect().bottom,
  }));
  assert.ok(layout.overflow <= 0, `the page scrolls sideways by ${layout.overflow}px`);
  assert.ok(layout.sidebar <= 0, 'the conversation list is a closed drawer');
  assert.ok(layout.composer <= 844, 'the message box is on screen');
  await phone.screenshot({ path: path.join(shots, 'web-chat-phone.png') });
  await phone.close();
});

// A 2x2 PNG (red, green / blue, white), made here: the file the picker and the paste take.
function png_2x2() {
  const chunk = (type, data) => {
    const body = Buffer.concat([Buffer.from(type), data]);
    const out = Buffer.alloc(12 + data.length);
    out.writeUInt32BE(data.length, 0);
    body.copy(out, 4);
    out.writeUInt32BE(zlib.crc32(body), 8 + data.length);
    return out;
  };
  const ihdr = Buffer.from([0, 0, 0, 2, 0, 0, 0, 2, 8, 2, 0, 0, 0]);  // 2x2, 8-bit RGB
  const rows = Buffer.from([0, 255, 0, 0, 0, 255, 0, 0, 0, 0, 255, 255, 255, 255]);  // filter 0 each
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr), chunk('IDAT', zlib.deflateSync(rows)), chunk('IEND', Buffer.alloc(0))]);
}
const tiny_png = png_2x2();

test('web: an image attached by the file picker or pasted is shown and sent as a data: URL part', async () => {
  await page.bringToFront();
  await page.click('#new-chat');
  // The file picker.
  await page.setInputFiles('#image-file', { name: 'dots.png', mimeType: 'image/png', buffer: tiny_png });
  await page.waitForSelector('#attachments img');
  // A paste into the message box (a screenshot on the clipboard is such an image file).
  await page.evaluate((b64) => {
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const data = new DataTransfer();
    data.items.add(new File([bytes], 'pasted.png', { type: 'image/png' }));
    document.getElementById('input').dispatchEvent(
      new ClipboardEvent('paste', { clipboardData: data, bubbles: true, cancelable: true }));
  }, tiny_png.toString('base64'));
  await until(async () => (await page.locator('#attachments img').count()) === 2, 'the pasted image');
  const want_url = `data:image/png;base64,${tiny_png.toString('base64')}`;

  const sent = page.waitForRequest((r) => r.url() === `${origin}/v1/chat/completions`);
  await page.fill('#input', 'What are these?');
  await page.press('#input', 'Enter');
  const body = (await sent).postDataJSON();
  assert.deepEqual(body.messages, [{ role: 'user', content: [
    { type: 'image_url', image_url: { url: want_url } },
    { type: 'image_url', image_url: { url: want_url } },
    { type: 'text', text: 'What are these?' }] }]);
  await idle();
  // The embedded model takes text only: the server's 400 names the part and is shown.
  assert.match(await page.textContent('#notice'), /messages\[0\]\.content\[0\]: this model does not take images/);
  assert.equal(await page.locator('#attachments img').count(), 0, 'the composer is cleared');
  // The conversation shows the images as sent, and keeps them across a reload.
  const shown = () => page.$$eval('.message.user .images img', (imgs) => imgs.map((i) => i.getAttribute('src')));
  assert.deepEqual(await shown(), [want_url, want_url]);
  assert.deepEqual((await stored()).messages[0].images, [want_url, want_url]);
  await page.reload();
  await page.waitForSelector('.message.user .images img');
  assert.deepEqual(await shown(), [want_url, want_url]);
  assert.equal(await page.textContent('.message.user .content'), 'What are these?');
  // A file that is not an image the server decodes is refused in the page.
  await page.setInputFiles('#image-file', { name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('hi') });
  await page.waitForSelector('#notice:has-text("Only PNG, JPEG, WebP and GIF")');
  assert.equal(await page.locator('#attachments img').count(), 0);
  await page.click('#conversations li.current .delete');
});

test('web: the dashboard shows the running rows move under a tandem bench run', async () => {
  page = dash;
  await page.bringToFront();
  await page.waitForSelector('#status[data-state="live"]');
  assert.equal(await page.textContent('#running-value'), '0');
  assert.match(await page.textContent('#kv-groups'), /full attention.*free \/ \d+/);

  // One bench round: 6 clients on 4 rows (some wait too), watched from the page until the
  // bench exits. Keeps the last screenshot taken while rows ran together (one a second).
  let running_max = 0;
  let shot = null;
  const bench_round = async (output_len) => {
    const bench = spawn(bin, ['bench', '--url', origin, '--api-key', key, '--concurrency', '6',
      '--num-requests', '12', '--input-len', '16', '--output-len', String(output_len)], { stdio: 'ignore' });
    let code = null;
    const exited = new Promise((r) => bench.once('exit', (c) => r(code = c)));
    let shot_at = 0;
    while (code === null) {
      const running = Number(await page.textContent('#running-value')) || 0;
      running_max = Math.max(running_max, running);
      if (running >= 2 && Date.now() - shot_at > 1000) {
        const height = await page.evaluate(() => Math.ceil(document.querySelector('.cards').getBoundingClientRect().bottom) + 16);
        shot = await page.screenshot({ clip: { x: 0, y: 0, width: 1280, height: Math.min(height, 800) } });
        shot_at = Date.now();
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(await exited, 0, 'tandem bench succeeded');
  };
  // The page samples once a second: on a machine fast enough to finish a round between two
  // samples, run another with answers twice as long (what is checked is that the figure
  // moves, not how fast; 12 answers of 96 tokens take well under a second on some CPUs).
  const lens = [96, 192, 384, 768, 960];  // 16 + 960 tokens fit the model's 1024
  for (let round = 0; round < lens.length && running_max < 2; round++) await bench_round(lens[round]);
  assert.ok(running_max >= 2, `running rows peaked at ${running_max}`);
  fs.writeFileSync(path.join(shots, 'web-dashboard.png'), shot);
  await until(async () => (await page.textContent('#running-value')) === '0', 'the rows to drain', 10_000);
  assert.ok(Number((await page.textContent('#output-rate')).replace(/,/g, '')) > 0);
  assert.match(await page.textContent('#ttft-figures'), /p50\s*[\d.]+ m?s/);
  assert.match(await page.textContent('#itl-figures'), /p99\s*[\d.]+ m?s/);
  assert.ok(await page.locator('#rows-chart polyline').count() >= 2);
  assert.ok(Number(await page.textContent('#finished-recent')) >= 12, 'the bench\'s requests finished');
});

// The prefix cache lands later; its counters are appended to the real /metrics here, as
// the server will report them: 3 hits in every 4 lookups now, after 1000 that all missed.
test('web: the dashboard reads the prefix-cache counters when the server reports them', async () => {
  const probe = watch(await context.newPage());
  let calls = 0;
  await probe.route(`${origin}/metrics`, async (route) => {
    const real = await route.fetch();
    calls++;
    const extra = `tandem:prefix_cache_queries_total{model_name="${model}"} ${1000 + 400 * calls}\n` +
      `tandem:prefix_cache_hits_total{model_name="${model}"} ${300 * calls}\n`;
    await route.fulfill({ response: real, body: (await real.text()) + extra });
  });
  await probe.goto(`${origin}/dashboard`);
  await until(async () => (await probe.textContent('#prefix-hit-rate')) === '75%', 'the hit rate', 10_000);
  assert.equal(await probe.textContent('#prefix-note'), 'Hits per lookup, last minute.');
  await probe.close();
});

test('web: every request the browser made went to the tandem server', () => {
  const elsewhere = requests.filter((u) => !u.startsWith(`${origin}/`) && !u.startsWith('data:'));
  assert.deepEqual(elsewhere, []);
  assert.ok(requests.some((u) => u === `${origin}/web/chat.js`));
  assert.ok(requests.some((u) => u === `${origin}/metrics`));
  assert.deepEqual(page_errors, []);
});
