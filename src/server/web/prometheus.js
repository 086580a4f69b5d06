// Reads the Prometheus text format (what /metrics serves) into samples by metric name:
// parse_metrics(text).get('tandem:num_preemptions_total') → [{ labels: {...}, value }].
// Comments and malformed lines are skipped; label values are unescaped.

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parse_metrics(text) {
  const out = new Map();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = SAMPLE.exec(line);
    if (!m) continue;
    const labels = {};
    for (const [, key, value] of (m[2] ?? '').matchAll(LABEL))
      labels[key] = value.replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
    const value = Number(m[3] === '+Inf' ? Infinity : m[3]);
    if (!out.has(m[1])) out.set(m[1], []);
    out.get(m[1]).push({ labels, value });
  }
  return out;
}

// The sum of a metric's samples, or null when the server does not report it.
export function metric_sum(metrics, name) {
  const samples = metrics.get(name);
  return samples ? samples.reduce((a, s) => a + s.value, 0) : null;
}
