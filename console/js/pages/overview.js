// Overview: counts by state, executions per minute by outcome, the latest failures.
// Everything is read from the public API: executions of the last 24 h (paged), monitors
// and endpoints.
import { allExecutions, api } from '../api.js';
import { chartSummary, executionsChart } from '../chart.js';
import { perMinute } from '../per-minute.js';
import { fill, h, pageHead, table } from '../dom.js';
import { hashWith } from '../router.js';
import { executionColumns, sameAsLast } from './common.js';

const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;
const EXECUTION_STATES = ['success', 'failed', 'timeout', 'pending', 'running', 'cancelled'];
const MONITOR_STATES = ['up', 'down', 'new', 'paused'];
const CHART_HOURS = [1, 3, 6, 12, 24];

function countBy(rows, key) {
  const counts = {};
  for (const row of rows) counts[key(row)] = (counts[key(row)] ?? 0) + 1;
  return counts;
}

/** One card: a title and state → count links. */
function card(title, entries, note) {
  return h('section', { class: 'card', 'aria-label': title },
    h('h2', {}, title),
    h('ul', { class: 'counts' }, entries.map(([label, n, href, state]) => h('li', { class: `count s-${state ?? label}`, dataset: { state: state ?? label } },
      href ? h('a', { href }, h('span', { class: 'n' }, String(n)), h('span', { class: 'label' }, label)) : [h('span', { class: 'n' }, String(n)), h('span', { class: 'label' }, label)]))),
    note ? h('p', { class: 'help' }, note) : null);
}

export async function overviewPage(ctx) {
  ctx.setTitle('Overview');
  const hours = CHART_HOURS.includes(Number(ctx.query.get('hours'))) ? Number(ctx.query.get('hours')) : 3;
  const cards = h('div', { class: 'cards' });
  const chartBox = h('div', { class: 'chart', role: 'img', 'aria-label': `Executions per minute by outcome, last ${hours} hours` });
  const summary = h('div');
  const failures = h('div', { 'aria-live': 'polite' });
  let chart = null;
  let lastData = null;
  ctx.onCleanup(() => chart?.destroy());
  const unchanged = sameAsLast();

  const draw = async () => {
    const now = Date.now();
    const [day, monitors, endpoints] = await Promise.all([
      allExecutions({ since: new Date(now - DAY_MS).toISOString() }),
      api('GET', '/monitors').then((r) => r.data),
      api('GET', '/endpoints').then((r) => r.data),
    ]);
    if (!ctx.alive() || unchanged([day, monitors, endpoints])) return;
    const byStatus = countBy(day.rows, (e) => e.status);
    const byMonitor = countBy(monitors, (m) => m.status);
    // An endpoint is failing when its latest forward of the last 24 h failed.
    const latestByEndpoint = new Map();
    for (const e of day.rows) if (e.task?.type === 'endpoint' && !latestByEndpoint.has(e.task.id)) latestByEndpoint.set(e.task.id, e.status);
    const failing = endpoints.filter((e) => ['failed', 'timeout'].includes(latestByEndpoint.get(e.id)));
    const since = new Date(now - DAY_MS).toISOString();
    fill(cards,
      card('Executions, last 24 h', EXECUTION_STATES.map((s) => [s, byStatus[s] ?? 0, hashWith(['executions'], { status: s, since: '24h' })]),
        day.capped ? `Counted over the newest ${day.rows.length} executions since ${new Date(since).toLocaleString()}.` : null),
      card('Monitors', MONITOR_STATES.map((s) => [s, byMonitor[s] ?? 0, '#/monitors'])),
      card('Endpoints', [
        ['total', endpoints.length, '#/endpoints', 'total'],
        ['paused', endpoints.filter((e) => e.paused).length, '#/endpoints', 'paused'],
        ['failing', failing.length, '#/endpoints', 'failing'],
      ]));

    const data = perMinute(day.rows, now - hours * HOUR_MS, now);
    lastData = data;
    chart?.update(data);
    fill(summary, chartSummary(data, hours));

    const latest = day.rows.filter((e) => e.status === 'failed' || e.status === 'timeout').slice(0, 10);
    fill(failures, table(executionColumns, latest, { empty: 'No failures in the last 24 h.', label: 'Latest failures' }));
  };

  const range = h('nav', { class: 'range', 'aria-label': 'Chart range' },
    CHART_HOURS.map((n) => h('a', { href: hashWith([], n === 3 ? {} : { hours: n }), 'aria-current': n === hours ? 'true' : null, class: 'button quiet' }, `${n} h`)));
  await draw();
  fill(ctx.main,
    pageHead('Overview'),
    cards,
    h('section', { class: 'panel', 'aria-labelledby': 'chart-h' },
      h('div', { class: 'panel-head' }, h('h2', { id: 'chart-h' }, `Executions per minute, last ${hours} h`), range),
      chartBox, summary),
    h('section', { class: 'panel', 'aria-labelledby': 'failures-h' },
      h('div', { class: 'panel-head' }, h('h2', { id: 'failures-h' }, 'Latest failures'), h('a', { href: hashWith(['executions'], { status: 'failed' }) }, 'All failed executions')),
      failures));
  // uPlot measures its box: it is drawn once the page is in the document.
  chart = executionsChart(chartBox, lastData);
  // A full read of the day: at most one every 2 s however busy the feed is.
  ctx.live(() => true, async () => {
    await draw();
    await new Promise((r) => setTimeout(r, 2000));
  }, 1000);
}
