// Executions per minute by outcome, drawn by uPlot (served by the service from its npm
// package; no CDN). The counts come from per-minute.js.
import uPlot from '/console/vendor/uPlot.esm.js';
import { h } from './dom.js';
import { OUTCOMES } from './per-minute.js';

function colour(name) {
  const v = getComputedStyle(document.documentElement).getPropertyValue(`--c-${name.replace(' ', '-')}`).trim();
  return v || '#888';
}

/** Mounts the chart in `container`; returns { update(data), destroy() }. */
export function executionsChart(container, data) {
  const text = getComputedStyle(document.documentElement).getPropertyValue('--fg-muted').trim() || '#666';
  const grid = getComputedStyle(document.documentElement).getPropertyValue('--line').trim() || '#ddd';
  const axis = { stroke: text, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
  const width = () => Math.max(280, container.clientWidth || 600);
  const opts = {
    width: width(),
    height: 240,
    cursor: { drag: { x: false, y: false } },
    scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
    axes: [axis, { ...axis, size: 40 }],
    series: [
      {},
      ...OUTCOMES.map((name) => ({ label: name, stroke: colour(name), width: 2, points: { show: false }, value: (_u, v) => (v == null ? '—' : String(v)) })),
    ],
  };
  const plot = new uPlot(opts, data, container);
  const resize = new ResizeObserver(() => plot.setSize({ width: width(), height: 240 }));
  resize.observe(container);
  return {
    update: (next) => plot.setData(next),
    destroy() {
      resize.disconnect();
      plot.destroy();
    },
  };
}

/** The chart's content as words, for screen readers and as a caption. */
export function chartSummary(data, hours) {
  const totals = OUTCOMES.map((name, i) => [name, data[i + 1].reduce((a, b) => a + b, 0)]);
  const all = totals.reduce((a, [, n]) => a + n, 0);
  return h('p', { class: 'chart-summary' }, `${all} executions in the last ${hours} h: `,
    totals.map(([name, n], i) => [i ? ', ' : '', `${n} ${name}`]));
}
