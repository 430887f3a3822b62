// Charts drawn by uPlot (served by the service from its npm package; no CDN):
// executions per minute by outcome (the counts come from per-minute.js), and a
// monitor's run durations (from runs.js).
import uPlot from '/console/vendor/uPlot.esm.js';
import { h } from './dom.js';
import { OUTCOMES } from './per-minute.js';

function colour(name) {
  const v = getComputedStyle(document.documentElement).getPropertyValue(`--c-${name.replace(' ', '-')}`).trim();
  return v || '#888';
}

/** A time chart in `container` that follows its width; returns { update(data), destroy() }. */
function timeChart(container, data, series, { yValues, yTop = (max) => Math.max(1, max) } = {}) {
  const text = getComputedStyle(document.documentElement).getPropertyValue('--fg-muted').trim() || '#666';
  const grid = getComputedStyle(document.documentElement).getPropertyValue('--line').trim() || '#ddd';
  const axis = { stroke: text, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
  const width = () => Math.max(280, container.clientWidth || 600);
  const opts = {
    width: width(),
    height: 240,
    cursor: { drag: { x: false, y: false } },
    scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, yTop(max)] } },
    axes: [axis, { ...axis, size: yValues ? 72 : 40, ...(yValues ? { values: yValues } : {}) }],
    series: [{}, ...series],
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

/** Executions per minute by outcome; returns { update(data), destroy() }. */
export function executionsChart(container, data) {
  return timeChart(container, data,
    OUTCOMES.map((name) => ({ label: name, stroke: colour(name), width: 2, points: { show: false }, value: (_u, v) => (v == null ? '—' : String(v)) })));
}

const seconds = (v) => (v == null ? '—' : v < 1 ? `${Math.round(v * 1000)} ms` : v < 120 ? `${+v.toFixed(1)} s` : `${+(v / 60).toFixed(1)} min`);

/** A monitor's runs: each one's duration as a bar at its end, successes and failures apart. */
export function runsChart(container, data) {
  const bars = uPlot.paths.bars({ size: [0.6, 24] });
  return timeChart(container, data, [
    { label: 'succeeded', stroke: colour('success'), fill: colour('success'), paths: bars, points: { show: false }, value: (_u, v) => seconds(v) },
    { label: 'failed', stroke: colour('failed'), fill: colour('failed'), paths: bars, points: { show: false }, value: (_u, v) => seconds(v) },
  ], { yValues: (_u, ticks) => ticks.map(seconds), yTop: (max) => (max > 0 ? max * 1.15 : 1) });
}

/** The chart's content as words, for screen readers and as a caption. */
export function chartSummary(data, hours) {
  const totals = OUTCOMES.map((name, i) => [name, data[i + 1].reduce((a, b) => a + b, 0)]);
  const all = totals.reduce((a, [, n]) => a + n, 0);
  return h('p', { class: 'chart-summary' }, `${all} executions in the last ${hours} h: `,
    totals.map(([name, n], i) => [i ? ', ' : '', `${n} ${name}`]));
}
