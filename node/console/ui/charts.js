// Charts drawn as inline SVG: stacked or grouped bars and lines over a
// category axis (time buckets), with a y axis, grid lines, labels, a legend
// and a tooltip (<title>) on every mark.

import { h } from "./ui.js";

const NS = "http://www.w3.org/2000/svg";
export const palette = ["#4f6bed", "#16a394", "#f29f3d", "#d9486b", "#8a5cd6", "#3aa0d9", "#8c9a2c", "#7d8597"];

function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) el.setAttribute(k, v);
  for (const c of children) {
    if (c === null || c === undefined) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// niceTicks returns 0..top in 4-6 round steps covering max.
export function niceTicks(max, count = 5) {
  if (!(max > 0)) return [0, 1];
  const raw = max / count;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((st) => st >= raw);
  const ticks = [];
  for (let v = 0; v < max + step * 0.999; v += step) ticks.push(+v.toPrecision(12));
  return ticks;
}

const PAD = { top: 14, right: 16, bottom: 34, left: 64 };

// frame draws the axes and grid and returns the plot's geometry.
function frame(svg, labels, top, yFormat, height, W) {
  const ticks = niceTicks(top);
  const max = ticks[ticks.length - 1];
  const plotW = W - PAD.left - PAD.right, plotH = height - PAD.top - PAD.bottom;
  const y = (v) => PAD.top + plotH - (v / max) * plotH;
  const band = plotW / Math.max(1, labels.length);
  const grid = s("g", { class: "grid" });
  for (const t of ticks) {
    grid.append(s("line", { x1: PAD.left, x2: W - PAD.right, y1: y(t), y2: y(t) }),
      s("text", { x: PAD.left - 8, y: y(t) + 4, "text-anchor": "end", class: "tick" }, yFormat(t)));
  }
  const every = Math.ceil(labels.length / Math.max(4, Math.floor(W / 66)));
  const xaxis = s("g", { class: "xaxis" },
    s("line", { x1: PAD.left, x2: W - PAD.right, y1: y(0), y2: y(0), class: "axis" }));
  labels.forEach((l, i) => {
    if (i % every !== 0) return;
    xaxis.append(s("text", { x: PAD.left + band * (i + 0.5), y: height - PAD.bottom + 18, "text-anchor": "middle", class: "tick" }, l));
  });
  svg.append(grid, xaxis);
  return { y, band, max, plotH };
}

function legend(series) {
  return h("div.legend", series.map((ser, i) => h("span.legend-item",
    h("span.swatch", { style: `background:${ser.color || palette[i % palette.length]}` }), ser.name)));
}

function wrap(svg, series, opts) {
  const total = series.reduce((a, ser) => a + ser.values.reduce((x, v) => x + (v || 0), 0), 0);
  if (!total && !opts.showEmpty) {
    return h("div.chart-empty", opts.emptyText || "No data in this period yet.");
  }
  return h("figure.chart", { "aria-label": opts.title || "chart" },
    opts.title ? h("figcaption.chart-title", opts.title) : null, svg, series.length > 1 || opts.legend ? legend(series) : null);
}

// barChart draws series as stacked (default) or grouped bars per label.
// series: [{name, values: [number per label], color?}].
export function barChart({ labels, series, stacked = true, yFormat = String, height = 260, width: W = 800, title, emptyText, id }) {
  const svg = s("svg", { viewBox: `0 0 ${W} ${height}`, class: "chart-svg", role: "img", id });
  const sums = labels.map((_, i) => stacked
    ? series.reduce((a, ser) => a + (ser.values[i] || 0), 0)
    : Math.max(0, ...series.map((ser) => ser.values[i] || 0)));
  const { y, band } = frame(svg, labels, Math.max(0, ...sums), yFormat, height, W);
  const inner = band * 0.72, gap = (band - inner) / 2;
  const bars = s("g", { class: "bars" });
  labels.forEach((label, i) => {
    let base = 0;
    series.forEach((ser, j) => {
      const v = ser.values[i] || 0;
      if (v <= 0) return;
      const color = ser.color || palette[j % palette.length];
      const w = stacked ? inner : inner / series.length;
      const x = PAD.left + band * i + gap + (stacked ? 0 : w * j);
      const y0 = stacked ? base : 0;
      const r = s("rect", { x, y: y(y0 + v), width: Math.max(1, w - (stacked ? 0 : 1)), height: Math.max(1, y(y0) - y(y0 + v)), fill: color, class: "bar" },
        s("title", {}, `${label} · ${ser.name}: ${yFormat(v)}`));
      bars.append(r);
      if (stacked) base += v;
    });
  });
  svg.append(bars);
  return wrap(svg, series, { title, emptyText, legend: true });
}

// lineChart draws each series as a line with points.
export function lineChart({ labels, series, yFormat = String, height = 240, width: W = 800, title, emptyText, id }) {
  const svg = s("svg", { viewBox: `0 0 ${W} ${height}`, class: "chart-svg", role: "img", id });
  const top = Math.max(0, ...series.flatMap((ser) => ser.values.map((v) => v || 0)));
  const { y, band } = frame(svg, labels, top, yFormat, height, W);
  const x = (i) => PAD.left + band * (i + 0.5);
  series.forEach((ser, j) => {
    const color = ser.color || palette[j % palette.length];
    const pts = ser.values.map((v, i) => `${x(i).toFixed(1)},${y(v || 0).toFixed(1)}`).join(" ");
    const g = s("g", { class: "line" }, s("polyline", { points: pts, fill: "none", stroke: color, "stroke-width": 2.2, "stroke-linejoin": "round" }));
    ser.values.forEach((v, i) => g.append(s("circle", { cx: x(i), cy: y(v || 0), r: labels.length > 40 ? 1.8 : 3, fill: color },
      s("title", {}, `${labels[i]} · ${ser.name}: ${yFormat(v || 0)}`))));
    svg.append(g);
  });
  return wrap(svg, series, { title, emptyText, legend: true });
}

// hbars draws a horizontal bar list (name, value) sorted as given.
export function hbars(rows, { format = String, id } = {}) {
  const max = Math.max(0, ...rows.map((r) => r.value));
  return h("div.hbars", { id }, rows.map((r, i) => h("div.hbar-row",
    h("span.hbar-name", { title: r.name }, r.name),
    h("span.hbar-track", h("span.hbar-fill", { style: `width:${max ? (r.value / max) * 100 : 0}%;background:${r.color || palette[i % palette.length]}` })),
    h("span.hbar-value", format(r.value)))));
}
