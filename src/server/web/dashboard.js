// The dashboard (/dashboard): polls /stats and /metrics once a second and draws the last
// minute. Gauges (rows, KV blocks) and the server's own windowed latency percentiles
// (/stats latency_1m) are shown as read; rates (tokens, preemptions, prefix-cache hits)
// are differences of the server's counters between the samples this page has taken, so
// "last minute" means the last minute this page has watched (less right after opening).
import { get_json, get_text } from './api.js';
import { draw_bar, draw_lines } from './charts.js';
import { el } from './dom.js';
import { metric_sum, parse_metrics } from './prometheus.js';

const WINDOW_S = 60;
const $ = (id) => document.getElementById(id);
const history = [];  // [{ t (seconds), stats (/stats), prefix: { queries, hits } | null }]

async function sample() {
  const [stats, text] = await Promise.all([get_json('/stats'), get_text('/metrics')]);
  const metrics = parse_metrics(text);
  const queries = metric_sum(metrics, 'tandem:prefix_cache_queries_total');
  const hits = metric_sum(metrics, 'tandem:prefix_cache_hits_total');
  const prefix = queries === null || hits === null ? null : { queries, hits };
  return { t: performance.now() / 1000, stats, prefix };
}

// ---- Numbers ----

function fmt_count(v) {
  return v === null || v === undefined ? '–' : Math.round(v).toLocaleString('en-US');
}

function fmt_rate(v) {
  if (v === null || !Number.isFinite(v)) return '–';
  return v < 10 ? v.toFixed(1) : fmt_count(v);
}

function fmt_seconds(s) {
  if (s === null || s === undefined) return '–';
  if (s < 0.01) return `${(s * 1000).toFixed(2)} ms`;
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  return `${s.toFixed(2)} s`;
}

function fmt_percent(v) {
  return v === null ? '–' : `${(v * 100).toFixed(v < 0.1 ? 1 : 0)}%`;
}

function fmt_duration(s) {
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  return h ? `${h} h ${m} min` : m ? `${m} min ${Math.floor(s % 60)} s` : `${Math.floor(s)} s`;
}

// ---- Series from the history ----

// Per-interval rate of a counter: [[t, per second]]; a counter that went back (the server
// restarted) leaves a gap.
function rate_points(get) {
  const out = [];
  for (let i = 1; i < history.length; i++) {
    const a = history[i - 1];
    const b = history[i];
    const d = get(b) - get(a);
    out.push([b.t, Number.isFinite(d) && d >= 0 ? d / (b.t - a.t) : null]);
  }
  return out;
}

// Change of a counter over the whole history: { delta, seconds }, or null.
function window_delta(get) {
  if (history.length < 2) return null;
  const a = history[0];
  const b = history.at(-1);
  const delta = get(b) - get(a);
  return Number.isFinite(delta) && delta >= 0 ? { delta, seconds: b.t - a.t } : null;
}

function window_rate(get) {
  const w = window_delta(get);
  return w && w.seconds > 0 ? w.delta / w.seconds : null;
}

const gauge = (get) => history.map((h) => [h.t, get(h)]);

function chart(id, max_id, series, opts = {}) {
  const top = draw_lines($(id), series, { now: history.at(-1).t, span: WINDOW_S, ...opts });
  if (max_id) $(max_id).textContent = (opts.format ?? fmt_count)(top);
}

// ---- Cards ----

function draw_facts(s) {
  const parts = [s.model, s.device, s.batch && `batch ${s.batch}`,
    s.max_batched_tokens && `${s.max_batched_tokens} tokens per step`,
    s.kv_cache_dtype && `KV ${s.kv_cache_dtype}`, s.max_model_len && `context ${s.max_model_len}`,
    `up ${fmt_duration(s.uptime_s)}`, `${fmt_count(s.requests_finished)} requests finished`];
  $('facts').textContent = parts.filter(Boolean).join(' · ');
}

function draw_rows(s) {
  $('running-value').textContent = fmt_count(s.running);
  $('waiting-value').textContent = fmt_count(s.waiting);
  chart('rows-chart', 'rows-max', [
    { points: gauge((h) => h.stats.running), cls: 'series-1' },
    { points: gauge((h) => h.stats.waiting), cls: 'series-2' },
  ]);
}

function draw_throughput() {
  const output = (h) => h.stats.generation_tokens_total;
  const prompt = (h) => h.stats.prompt_tokens_total;
  $('output-rate').textContent = fmt_rate(window_rate(output));
  $('prompt-rate').textContent = fmt_rate(window_rate(prompt));
  const w = window_delta(output);
  $('rate-window').textContent = w ? `last ${Math.round(w.seconds)} s` : '';
  chart('rate-chart', 'rate-max', [
    { points: rate_points(output), cls: 'series-1' },
    { points: rate_points(prompt), cls: 'series-2' },
  ]);
}

// Per KV group when the server reports groups, else the pool's totals as one group.
function kv_groups(s) {
  if (Array.isArray(s.kv_groups) && s.kv_groups.length) return s.kv_groups;
  return [{ window: 0, ...s.kv_blocks }];
}

function draw_kv(s) {
  const groups = kv_groups(s);
  const box = $('kv-groups');
  if (box.children.length !== groups.length) {
    box.replaceChildren(...groups.map(() => el('div', { class: 'kv-group' }, [
      el('div', { class: 'label' }, [el('span'), el('span')]),
      document.createElementNS('http://www.w3.org/2000/svg', 'svg'),
    ])));
  }
  groups.forEach((g, i) => {
    const [name, numbers] = box.children[i].querySelectorAll('.label span');
    name.textContent = g.window ? `sliding window ${fmt_count(g.window)}` : 'full attention';
    numbers.textContent = `${fmt_count(g.used)} used · ${fmt_count(g.cached ?? 0)} cached · ${fmt_count(g.free)} free / ${fmt_count(g.total)}`;
    draw_bar(box.children[i].querySelector('svg'),
      [{ value: g.used, cls: 'used' }, { value: g.cached ?? 0, cls: 'cached' }], g.total);
  });
  chart('kv-chart', null, groups.map((_, i) => ({
    points: gauge((h) => {
      const hg = kv_groups(h.stats)[i];
      return hg && hg.total > 0 ? hg.used / hg.total : null;
    }),
    cls: `series-${(i % 4) + 1}`,
  })), { floor: 1 });
}

function draw_latency(kind, key) {
  const q = history.at(-1).stats.latency_1m?.[key];
  const figures = $(`${kind}-figures`);
  if (!q) {
    figures.textContent = 'Not reported by this server.';
    return;
  }
  figures.replaceChildren(...[['p50', 'series-1'], ['p90', null], ['p99', 'series-2']].map(([p, cls]) =>
    el('div', {}, [el('span', { class: cls ? `key ${cls}` : 'key' }, p), el('span', { class: 'value' }, fmt_seconds(q[p]))])),
  el('div', {}, [el('span', { class: 'key' }, 'samples'), el('span', { class: 'value' }, fmt_count(q.count))]));
  const at = (p) => gauge((h) => h.stats.latency_1m?.[key]?.[p] ?? null);
  chart(`${kind}-chart`, `${kind}-max`, [
    { points: at('p50'), cls: 'series-1' },
    { points: at('p99'), cls: 'series-2' },
  ], { floor: 0.001, format: fmt_seconds });
}

function draw_preemptions(s) {
  const get = (h) => h.stats.preemptions;
  $('preemptions-total').textContent = fmt_count(s.preemptions);
  $('preemptions-recent').textContent = fmt_count(window_delta(get)?.delta ?? null);
  chart('preemption-chart', 'preemption-max', [{ points: rate_points(get), cls: 'series-2' }], { format: fmt_rate });
}

function draw_requests(s) {
  const get = (h) => h.stats.requests_finished;
  const e2e = s.latency_1m?.e2e_s;
  $('in-flight').textContent = fmt_count(s.in_flight);
  $('finished-recent').textContent = fmt_count(window_delta(get)?.delta ?? null);
  $('e2e-p50').textContent = fmt_seconds(e2e?.p50);
  $('e2e-p99').textContent = fmt_seconds(e2e?.p99);
  chart('finished-chart', 'finished-max', [{ points: rate_points(get), cls: 'series-1' }], { format: fmt_rate });
}

function draw_prefix(s) {
  $('prefix-cached').textContent = fmt_count(s.kv_blocks?.cached ?? null);
  const last = history.at(-1).prefix;
  if (!last) {
    $('prefix-hit-rate').textContent = '–';
    $('prefix-note').textContent = 'This server does not report prefix-cache lookups.';
    return;
  }
  const queries = window_delta((h) => h.prefix?.queries ?? NaN);
  const hits = window_delta((h) => h.prefix?.hits ?? NaN);
  const recent = queries && hits && queries.delta > 0 ? hits.delta / queries.delta : null;
  const overall = last.queries > 0 ? last.hits / last.queries : null;
  $('prefix-hit-rate').textContent = fmt_percent(recent ?? overall);
  $('prefix-note').textContent = recent !== null ? 'Hits per lookup, last minute.'
    : overall !== null ? 'Hits per lookup since the server started.' : 'No lookups yet.';
  const points = [];
  for (let i = 1; i < history.length; i++) {
    const a = history[i - 1].prefix;
    const b = history[i].prefix;
    const dq = a && b ? b.queries - a.queries : 0;
    points.push([history[i].t, dq > 0 ? (b.hits - a.hits) / dq : null]);
  }
  chart('prefix-chart', null, [{ points, cls: 'series-3' }]);
}

function draw() {
  const s = history.at(-1).stats;
  draw_facts(s);
  draw_rows(s);
  draw_throughput();
  draw_kv(s);
  draw_latency('ttft', 'ttft_s');
  draw_latency('itl', 'itl_s');
  draw_preemptions(s);
  draw_requests(s);
  draw_prefix(s);
}

function set_status(state, text) {
  $('status').dataset.state = state;
  $('status').textContent = text;
}

async function tick() {
  const started = performance.now();
  try {
    history.push(await sample());
    while (history.length > 1 && history.at(-1).t - history[0].t > WINDOW_S) history.shift();
    draw();
    set_status('live', 'live, every second');
  } catch (err) {
    set_status('down', err.status === 503 ? 'the server is loading' : `unreachable: ${err.message}`);
  }
  setTimeout(tick, Math.max(0, 1000 - (performance.now() - started)));
}

tick();
