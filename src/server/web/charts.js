// Small SVG charts for the dashboard, drawn by hand: a line chart of a trailing time
// window, and a stacked bar. Lines are drawn in a fixed viewBox stretched to the element
// (strokes keep their width: non-scaling-stroke); text stays in HTML beside the SVG.
// Only presentation attributes are used (no style attributes), as the page's CSP requires.

const SVG = 'http://www.w3.org/2000/svg';
const W = 300;
const H = 80;

function svg_el(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  return node;
}

// A rounded-up axis top: 1, 2, 5 × 10^k, never below `floor`.
export function nice_max(value, floor = 1) {
  const v = Math.max(value, floor);
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

// Draws `series` ([{ points: [[t_seconds, value]], cls }], cls a CSS class giving its stroke) over the `span` seconds
// before `now`, y from 0 to a rounded maximum; returns that maximum (for the label).
// Points whose value is null leave a gap.
export function draw_lines(svg, series, { now, span = 60, floor = 1 }) {
  const values = series.flatMap((s) => s.points.map((p) => p[1])).filter((v) => v !== null);
  const top = nice_max(Math.max(0, ...values), floor);
  svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
  svg.setAttribute('preserveAspectRatio', 'none');
  const children = [];
  for (const frac of [0.5, 1]) {
    const y = H - frac * H + 0.5;
    children.push(svg_el('line', { x1: 0, x2: W, y1: y, y2: y, stroke: 'currentColor',
      'stroke-opacity': 0.15, 'vector-effect': 'non-scaling-stroke' }));
  }
  for (const s of series) {
    for (const run of runs(s.points)) {
      const pts = run.map(([t, v]) => {
        const x = W - ((now - t) / span) * W;
        const y = H - (v / top) * (H - 2) - 1;
        return `${x.toFixed(1)},${y.toFixed(1)}`;
      });
      if (pts.length === 1) pts.push(pts[0]);
      children.push(svg_el('polyline', { points: pts.join(' '), fill: 'none', class: s.cls,
        'stroke-width': 1.8, 'stroke-linejoin': 'round', 'vector-effect': 'non-scaling-stroke' }));
    }
  }
  svg.replaceChildren(...children);
  return top;
}

// Consecutive non-null points.
function runs(points) {
  const out = [];
  let run = [];
  for (const p of points) {
    if (p[1] === null) {
      if (run.length) out.push(run);
      run = [];
    } else {
      run.push(p);
    }
  }
  if (run.length) out.push(run);
  return out;
}

// One horizontal bar split into `parts` ([{ value, cls }], cls giving the fill) of `total`.
export function draw_bar(svg, parts, total) {
  svg.setAttribute('viewBox', `0 0 ${W} 12`);
  svg.setAttribute('preserveAspectRatio', 'none');
  const children = [svg_el('rect', { x: 0, y: 0, width: W, height: 12, rx: 3, fill: 'currentColor', 'fill-opacity': 0.08 })];
  let x = 0;
  for (const p of parts) {
    const w = total > 0 ? (p.value / total) * W : 0;
    if (w > 0) children.push(svg_el('rect', { x, y: 0, width: w, height: 12, class: p.cls }));
    x += w;
  }
  svg.replaceChildren(...children);
}
