// Hostile images (issue 41): bombs (a PNG, a GIF and a JPEG whose headers declare far more
// pixels than allowed, one with 300 MB of deflated zeros behind it), corrupt and truncated
// files, formats tandem does not decode, images over --max-image-bytes, more images than
// --max-images-per-request, and image URLs the flags do not allow. Each is a 400 in the
// API's shape naming the message part, the server's memory stays flat, and it goes on
// serving with no row or KV block leaked.
//
// The decoding cases need a model that takes images: run_hardening.sh serves
// tests/data/oracle/vision/gemma3_vision (IMAGES_URL; flags: --max-image-bytes 1MiB
// --max-images-per-request 4 --max-image-pixels 4000000). The text-only server refuses
// every image part up front.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { open, MiB, zlib, fetchJson, measured, assertError, assertServing } from './common.mjs';

const images = { url: process.env.IMAGES_URL, pid: Number(process.env.IMAGES_PID) };

function chunk(type, data) {
  const body = Buffer.concat([Buffer.from(type), data]);
  const out = Buffer.alloc(12 + data.length);
  out.writeUInt32BE(data.length, 0);
  body.copy(out, 4);
  out.writeUInt32BE(zlib.crc32(body), 8 + data.length);
  return out;
}

// A PNG file whose header says width x height (8-bit RGB) and whose IDAT holds `idat`.
function png_file(width, height, idat) {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr.set([8, 2, 0, 0, 0], 8);
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr), chunk('IDAT', idat), chunk('IEND', Buffer.alloc(0))]);
}

// A real w x h gradient (each row: filter byte 0, then RGB).
function good_png(w, h) {
  const raw = Buffer.alloc(h * (1 + 3 * w));
  for (let y = 0; y < h; y++)
    for (let x = 0; x < w; x++) raw.set([x * 7 & 255, y * 5 & 255, (x + y) & 255], y * (1 + 3 * w) + 1 + 3 * x);
  return png_file(w, h, zlib.deflateSync(raw));
}

// A decompression bomb: 10000 x 10000 declared, 100 MB of zeros deflated to ~100 KB.
const deflate_bomb = () => png_file(10000, 10000, zlib.deflateSync(Buffer.alloc(100 * MiB), { level: 9 }));

// A GIF whose logical screen is 65535 x 65535 (one 1x1 frame in it).
function gif_canvas_bomb() {
  return Buffer.concat([Buffer.from('GIF89a'), Buffer.from([0xff, 0xff, 0xff, 0xff, 0x80, 0, 0]),
    Buffer.from([0, 0, 0, 255, 255, 255]),                       // 2-entry palette
    Buffer.from([0x2c, 0, 0, 0, 0, 1, 0, 1, 0, 0, 2, 2, 0x44, 0x01, 0, 0x3b])]);
}

// A JPEG whose frame header declares 30000 x 30000 (then ends).
function jpeg_header_bomb() {
  const sof = [0xff, 0xc0, 0, 17, 8, 0x75, 0x30, 0x75, 0x30, 3, 1, 0x11, 0, 2, 0x11, 0, 3, 0x11, 0];
  return Buffer.from([0xff, 0xd8, ...sof, 0xff, 0xd9]);
}

const data_url = (bytes, type = 'image/png') => `data:${type};base64,${bytes.toString('base64')}`;
const image_part = (url) => ({ type: 'image_url', image_url: { url } });
const chat_with = (parts) => ({ messages: [{ role: 'user', content: [{ type: 'text', text: 'Look:' }, ...parts] }], max_tokens: 2 });

async function refused(server, parts, words, label, param = 'messages[0].content[1]') {
  const { result, growth, ms } = await measured(server,
    () => fetchJson(server, '/v1/chat/completions', { method: 'POST', body: chat_with(parts) }), label);
  assertError(result, 400, words);
  assert.equal(result.json.error.param, param);
  assert.ok(growth < 64 * MiB, `RSS grew ${growth >> 20} MiB (bound 64)`);
  assert.ok(ms < 5000, `${ms} ms (bound 5000)`);
}

test('images: a text-only model refuses image parts on every API, before reading them', async () => {
  const url = data_url(good_png(8, 8));
  await refused(open, [image_part(url)], /does not take images/, 'image to a text-only model');
  const responses = await fetchJson(open, '/v1/responses', { method: 'POST', body: {
    input: [{ role: 'user', content: [{ type: 'input_image', image_url: url }] }] } });
  assertError(responses, 400, /input\[0\]\.content\[0\]: this model does not take images/);
  const anthropic = await fetchJson(open, '/v1/messages', { method: 'POST', body: {
    max_tokens: 2, messages: [{ role: 'user', content: [
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: good_png(8, 8).toString('base64') } }] }] } });
  assertError(anthropic, 400, /messages\[0\]\.content\[0\]: this model does not take images/, { anthropic: true });
  await assertServing(open);
});

test('images: bombs are refused from their headers, memory flat', async () => {
  const bomb = deflate_bomb();
  assert.ok(bomb.length < 2 * MiB, `the bomb is ${bomb.length} bytes`);
  await refused(images, [image_part(data_url(png_file(30000, 30000, Buffer.alloc(0))))], /--max-image-pixels/, 'PNG declaring 30000x30000');
  await refused(images, [image_part(data_url(bomb))], /--max-image-bytes|--max-image-pixels/, 'PNG deflate bomb');
  await refused(images, [image_part(data_url(gif_canvas_bomb(), 'image/gif'))], /--max-image-pixels|pixels a side/, 'GIF 65535x65535 canvas');
  await refused(images, [image_part(data_url(jpeg_header_bomb(), 'image/jpeg'))], /JPEG image/, 'JPEG declaring 30000x30000');
  await assertServing(images);
});

test('images: corrupt, truncated and unsupported files are 400s naming the part', async () => {
  const good = good_png(64, 48);
  await refused(images, [image_part(data_url(good.subarray(0, good.length >> 1)))], /PNG image is corrupt/, 'truncated PNG');
  const flipped = Buffer.from(good);
  for (let i = 40; i < flipped.length - 12; i += 5) flipped[i] ^= 0x5a;
  await refused(images, [image_part(data_url(flipped))], /corrupt/, 'corrupt PNG');
  await refused(images, [image_part(data_url(Buffer.from('BM' + '\0'.repeat(60)), 'image/png'))], /BMP images are not supported/, 'BMP');
  await refused(images, [image_part(data_url(Buffer.from('just some text')))], /not a known image format/, 'text as an image');
  await refused(images, [image_part('data:image/png;base64,!!!!')], /not valid base64/, 'bad base64');
  await assertServing(images);
});

test('images: oversized images, too many images and URLs the flags do not allow', async () => {
  const big = Buffer.concat([good_png(8, 8), Buffer.alloc(MiB + 1)]);  // 1 MiB + over --max-image-bytes
  await refused(images, [image_part(data_url(big))], /--max-image-bytes/, 'image over 1 MiB');
  const five = Array.from({ length: 5 }, (_, i) => image_part(data_url(good_png(8 + i, 8))));
  await refused(images, five, /--max-images-per-request/, 'five images', 'messages[0].content[5]');
  await refused(images, [image_part('http://169.254.169.254/latest/meta-data')], /--allowed-media-domains/, 'http URL');
  await refused(images, [image_part('file:///etc/shadow')], /--allowed-local-media-path/, 'file URL');
  await assertServing(images);
});

test('images: a good image is served, and the model reports that it takes images', async () => {
  const models = await fetchJson(images, '/v1/models');
  assert.deepEqual(models.json.data[0].input_modalities, ['text', 'image']);
  const r = await fetchJson(images, '/v1/chat/completions', { method: 'POST', body: chat_with([image_part(data_url(good_png(64, 64)))]) });
  assert.equal(r.status, 200, r.text);
  assert.ok(r.json.usage.prompt_tokens > 16, 'the image\'s soft tokens are in the prompt');
  await assertServing(images);
});
