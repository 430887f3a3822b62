// Heartbeat monitors: list, detail with the runs on a timeline and their durations
// charted, why it is down, ping history; create, edit, pause / resume, delete.
import { api } from '../api.js';
import { runsChart } from '../chart.js';
import { badge, copyable, duration, facts, fill, formatTime, h, link, pageHead, relative, svg, table, time } from '../dom.js';
import { downReasonText, durationSeries, endOutcome, kindText, runsOf } from '../runs.js';
import { editAndDelete, getData, listPage, mentions, ofKind, pauseResumeButton, resourceForms, sameAsLast } from './common.js';
import { notifyFields } from './tasks.js';

const monitorFields = [
  { name: 'name', label: 'Name', type: 'text', required: true },
  { name: 'schedule_type', label: 'Expect pings', type: 'select', options: [['interval', 'Every interval'], ['cron', 'On a cron schedule']], default: 'interval' },
  { name: 'interval_seconds', label: 'Interval (seconds)', type: 'number', placeholder: '3600', help: '60 to 604800; for "every interval"' },
  { name: 'cron_expression', label: 'Cron expression', type: 'text', placeholder: '0 3 * * *', nullable: true, help: 'For "on a cron schedule"' },
  { name: 'timezone', label: 'Time zone', type: 'text', placeholder: 'UTC' },
  { name: 'grace_period_seconds', label: 'Grace period (seconds)', type: 'number', placeholder: '300', help: '0 to 3600: how late a ping may be before the monitor is down' },
  { name: 'max_duration_seconds', label: 'Maximum run duration (seconds)', type: 'number', nullable: true, help: '1 to 86400: a run started (/start) and not ended after this long is down; empty: the grace period' },
  { name: 'min_duration_seconds', label: 'Minimum run duration (seconds)', type: 'number', nullable: true, help: '1 to 86400: a run that ends in success faster than this is down (ran too fast)' },
  { name: 'slug', label: 'Slug', type: 'text', nullable: true, placeholder: 'nightly-backup', help: 'Lower-case letters, digits, - and _: pinged as /ping/<ping key>/<slug>' },
  notifyFields,
  { name: 'enabled', label: 'Enabled', type: 'checkbox', default: true },
];

const every = (m) => (m.schedule_type === 'cron' ? `cron ${m.cron_expression} (${m.timezone ?? 'UTC'})` : `every ${m.interval_seconds} s`);

export function monitorsList(ctx) {
  return listPage(ctx, {
    title: 'Monitors',
    newPath: ['monitors', 'new'],
    newLabel: 'New monitor',
    load: async () => (await api('GET', '/monitors')).data,
    empty: 'No monitors yet.',
    match: ofKind('monitor'),
    columns: [
      { label: 'Name', cell: (m) => link(m.name || m.id, 'monitors', m.id) },
      { label: 'Status', cell: (m) => [badge(m.status), m.down_reason ? h('span', { class: 'muted' }, ` ${m.down_reason}`) : null] },
      { label: 'Expects', cell: (m) => every(m) },
      { label: 'Last ping', cell: (m) => time(m.last_ping_at) },
      { label: 'Next expected', cell: (m) => time(m.next_expected_at) },
    ],
  });
}

/** The badge colour of a ping's class (see app.css `.s-*`). */
const KIND_COLOUR = { ping: 'success', fail: 'fail', start: 'running', log: 'new' };
const pingClass = (p) => (p.kind === 'start' ? 'start' : p.kind === 'log' ? 'log' : endOutcome(p) === 'success' ? 'ping' : 'fail');

/**
 * Runs and pings on a time line from the oldest shown to now: each run a bar from its
 * start to its end (overlapping runs on rows of their own; one still open reaches
 * now), each ping a tick by kind, and the moment the monitor goes down if no ping comes.
 */
export function pingTimeline(monitor, pings, nowMs = Date.now()) {
  const times = pings.map((p) => Date.parse(p.received_at));
  const deadline = monitor.next_expected_at ? Date.parse(monitor.next_expected_at) + (monitor.grace_period_seconds ?? 0) * 1000 : null;
  const runs = runsOf(pings);
  const start = Math.min(nowMs - 60_000, ...times, ...runs.map((r) => r.startMs), Date.parse(monitor.created_at));
  const end = Math.max(nowMs, deadline ?? 0);
  const x = (ms) => ((ms - start) / Math.max(1, end - start)) * 1000;
  const lanes = runs.reduce((n, r) => Math.max(n, r.lane + 1), 0);
  const height = 60 + lanes * 14;
  const bars = runs.map((r) => {
    const x1 = x(r.startMs);
    const x2 = x(r.endMs ?? nowMs);
    const what = r.endMs === null ? `run started ${formatTime(new Date(r.startMs).toISOString())}, not ended` : `run ${duration(r.durationMs)}, ${r.outcome}`;
    return svg('rect', { x: x1, y: 58 + r.lane * 14, width: Math.max(3, x2 - x1), height: 10, class: `run ${r.endMs === null ? 'open' : r.outcome === 'success' ? 'ok' : 'fail'}` },
      svg('title', {}, `${what}${r.rid ? ` (rid ${r.rid})` : ''}`));
  });
  const marks = pings.map((p, i) => svg('rect', { x: x(times[i]) - 2, y: 10, width: 4, height: 40, class: `tick ${pingClass(p)}` },
    svg('title', {}, `${kindText(p)} at ${formatTime(p.received_at)}${p.duration_ms != null ? `, run of ${duration(p.duration_ms)}` : ''}`)));
  return h('figure', { class: 'timeline' },
    svg('svg', { viewBox: `0 0 1000 ${height}`, preserveAspectRatio: 'none', height, role: 'img', 'aria-label': `${pings.length} pings and ${runs.length} runs between ${formatTime(new Date(start).toISOString())} and now` },
      svg('line', { x1: 0, y1: 30, x2: 1000, y2: 30, class: 'axis' }),
      svg('line', { x1: x(nowMs), y1: 4, x2: x(nowMs), y2: height - 4, class: 'now' }, svg('title', {}, 'now')),
      deadline ? svg('line', { x1: x(deadline), y1: 4, x2: x(deadline), y2: height - 4, class: 'deadline' }, svg('title', {}, `down if no ping by ${formatTime(new Date(deadline).toISOString())}`)) : null,
      marks, bars),
    h('figcaption', { class: 'timeline-legend' },
      h('span', {}, formatTime(new Date(start).toISOString())),
      h('span', { class: 'keys' },
        h('span', { class: 'key ping' }, 'success'), h('span', { class: 'key start' }, 'start'), h('span', { class: 'key fail' }, 'fail / exit ≠ 0'),
        h('span', { class: 'key log' }, 'log'), runs.length ? h('span', { class: 'key run' }, 'run') : null,
        deadline ? h('span', { class: 'key deadline' }, 'down after') : null, h('span', { class: 'key now' }, 'now')),
      h('span', {}, formatTime(new Date(end).toISOString()))));
}

/** A ping's body: the first line, all of it on demand. */
function pingBody(body) {
  if (!body) return '—';
  const first = body.split('\n', 1)[0];
  const short = first.length > 80 ? `${first.slice(0, 80)}…` : first;
  if (short === body) return h('code', { class: 'wrap' }, body);
  return h('details', { class: 'ping-body' }, h('summary', {}, h('code', {}, short), h('span', { class: 'muted' }, ` ${body.length} characters`)), h('pre', { class: 'block wrap', tabindex: '0' }, body));
}

export async function monitorDetail(ctx) {
  const id = ctx.params.id;
  const result = h('div', { class: 'action-result', role: 'status' });
  const body = h('div');
  const chartBox = h('div', { class: 'chart runs-chart' });
  const chartCaption = h('p', { class: 'chart-summary' });
  let chart = null;
  const path = `/monitors/${encodeURIComponent(id)}`;
  const unchanged = sameAsLast();
  const org = await getData('/organization').catch(() => null);
  const draw = async () => {
    const [m, pings] = await Promise.all([getData(path), getData(`${path}/pings?limit=100`)]);
    if (!ctx.alive() || unchanged([m, pings])) return;
    ctx.setTitle(m.name || m.id);
    const paused = m.status === 'paused';
    const runs = runsOf(pings);
    const done = runs.filter((r) => r.endMs !== null);
    const byName = m.slug && org?.ping_key ? m.ping_url.replace(/\/ping\/[^/]+$/, `/ping/${org.ping_key}/${m.slug}`) : null;
    fill(body,
      pageHead(m.name || m.id,
        pauseResumeButton(path, paused, result, draw, { pausedText: 'Monitor paused', resumedText: 'Monitor resumed' }),
        editAndDelete('monitors', 'monitor', id)),
      result,
      m.status === 'down' && m.down_reason
        ? h('p', { class: 'notice down-reason', role: 'note' }, h('strong', {}, 'Down: '), downReasonText(m.down_reason), ' ', h('code', {}, m.down_reason))
        : null,
      facts([
        ['Status', h('span', { class: 'monitor-status' }, badge(m.status))],
        m.down_reason ? ['Down reason', h('span', { class: 'monitor-down-reason' }, m.down_reason)] : null,
        ['Ping URL', copyable(m.ping_url, 'Ping URL')],
        byName ? ['Ping by name', copyable(byName, 'Ping by name')] : null,
        ['Expects', every(m)],
        ['Grace period', `${m.grace_period_seconds ?? 0} s`],
        ['Run duration', m.max_duration_seconds || m.min_duration_seconds
          ? `${m.min_duration_seconds ? `at least ${m.min_duration_seconds} s` : ''}${m.min_duration_seconds && m.max_duration_seconds ? ', ' : ''}${m.max_duration_seconds ? `at most ${m.max_duration_seconds} s` : ''}`
          : `at most the grace period (${m.grace_period_seconds ?? 0} s)`],
        ['Last ping', m.last_ping_at ? [time(m.last_ping_at), ' ', h('span', { class: 'muted' }, relative(m.last_ping_at))] : null],
        ['Next expected', m.next_expected_at ? [time(m.next_expected_at), ' ', h('span', { class: 'muted' }, relative(m.next_expected_at))] : null],
        ['Id', h('code', {}, m.id)],
        ['Created', time(m.created_at)],
      ]),
      h('p', { class: 'help' }, 'Ping it from your job: ', h('code', { class: 'wrap' }, `curl -fsS -m 10 --retry 5 ${m.ping_url}`),
        '; time a run with ', h('code', {}, '/start'), ' before and ', h('code', {}, '/$?'), ' (the exit status) after; ', h('code', {}, '/fail'), ' reports a failure, ',
        h('code', {}, '/log'), ' a line. Or wrap the job with runitor.'),
      h('h2', {}, 'Runs'),
      pingTimeline(m, pings),
      done.length ? chartBox : h('p', { class: 'empty' }, 'No timed runs yet: send /start before the job and its end after it.'),
      done.length ? chartCaption : null,
      h('h2', {}, 'Pings'),
      table([
        { label: 'Received', cell: (p) => time(p.received_at) },
        { label: 'Kind', cell: (p) => h('span', { class: `badge s-${KIND_COLOUR[pingClass(p)]}` }, kindText(p)) },
        { label: 'Exit status', cell: (p) => (p.exit_status ?? '—') },
        { label: 'Duration', cell: (p) => duration(p.duration_ms) },
        { label: 'Method', cell: (p) => p.method },
        { label: 'Source IP', cell: (p) => p.source_ip ?? '—' },
        { label: 'User agent', cell: (p) => h('span', { class: 'wrap' }, p.user_agent ?? '—') },
        { label: 'Body', cell: (p) => pingBody(p.body) },
      ], pings, { caption: 'Ping history (newest first)', empty: 'No pings yet.', label: 'Ping history' }));
    if (done.length) {
      const total = done.reduce((a, r) => a + r.durationMs, 0);
      fill(chartCaption, `${done.length} timed run${done.length === 1 ? '' : 's'} in the last ${pings.length} pings: average ${duration(Math.round(total / done.length))}, longest ${duration(Math.max(...done.map((r) => r.durationMs)))}, ${done.filter((r) => r.outcome !== 'success').length} failed.`);
      chartBox.setAttribute('aria-label', 'Run durations');
      if (chart) chart.update(durationSeries(runs));
      else chart = runsChart(chartBox, durationSeries(runs));
    }
  };
  await draw();
  fill(ctx.main, body);
  ctx.live((msg) => mentions(msg, id), draw);
  // Down happens without a message of ours to wait for when the feed is off; the page also reads again while it is open.
  const timer = setInterval(() => ctx.alive() && draw().catch(() => {}), 15_000);
  ctx.onCleanup(() => {
    clearInterval(timer);
    chart?.destroy();
  });
}

const forms = resourceForms({ section: 'monitors', noun: 'monitor', fieldsFor: () => monitorFields });
export const monitorNew = forms.create;
export const monitorEdit = forms.edit;
