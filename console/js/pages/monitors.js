// Heartbeat monitors: list, detail with ping timeline and history, create, edit,
// pause / resume, delete.
import { api } from '../api.js';
import { badge, copyable, facts, fill, formatTime, h, link, pageHead, relative, svg, table, time } from '../dom.js';
import { editAndDelete, getData, listPage, mentions, ofKind, pauseResumeButton, resourceForms, sameAsLast } from './common.js';
import { notifyFields } from './tasks.js';

const monitorFields = [
  { name: 'name', label: 'Name', type: 'text', required: true },
  { name: 'schedule_type', label: 'Expect pings', type: 'select', options: [['interval', 'Every interval'], ['cron', 'On a cron schedule']], default: 'interval' },
  { name: 'interval_seconds', label: 'Interval (seconds)', type: 'number', placeholder: '3600', help: '60 to 604800; for "every interval"' },
  { name: 'cron_expression', label: 'Cron expression', type: 'text', placeholder: '0 3 * * *', nullable: true, help: 'For "on a cron schedule"' },
  { name: 'timezone', label: 'Time zone', type: 'text', placeholder: 'UTC' },
  { name: 'grace_period_seconds', label: 'Grace period (seconds)', type: 'number', placeholder: '300', help: '0 to 3600: how late a ping may be before the monitor is down' },
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
      { label: 'Status', cell: (m) => badge(m.status) },
      { label: 'Expects', cell: (m) => every(m) },
      { label: 'Last ping', cell: (m) => time(m.last_ping_at) },
      { label: 'Next expected', cell: (m) => time(m.next_expected_at) },
    ],
  });
}

/**
 * Pings on a time line from the oldest shown to now, failures marked apart, and the
 * moment the monitor goes down if no ping comes.
 */
export function pingTimeline(monitor, pings, nowMs = Date.now()) {
  const times = pings.map((p) => Date.parse(p.received_at));
  const deadline = monitor.next_expected_at ? Date.parse(monitor.next_expected_at) + (monitor.grace_period_seconds ?? 0) * 1000 : null;
  const start = Math.min(nowMs - 60_000, ...times, Date.parse(monitor.created_at));
  const end = Math.max(nowMs, deadline ?? 0);
  const x = (ms) => ((ms - start) / Math.max(1, end - start)) * 1000;
  const marks = pings.map((p, i) => svg('rect', { x: x(times[i]) - 2, y: 10, width: 4, height: 40, class: p.kind === 'fail' ? 'tick fail' : 'tick' },
    svg('title', {}, `${p.kind} at ${formatTime(p.received_at)}`)));
  return h('figure', { class: 'timeline' },
    svg('svg', { viewBox: '0 0 1000 60', preserveAspectRatio: 'none', role: 'img', 'aria-label': `${pings.length} pings between ${formatTime(new Date(start).toISOString())} and now` },
      svg('line', { x1: 0, y1: 30, x2: 1000, y2: 30, class: 'axis' }),
      svg('line', { x1: x(nowMs), y1: 4, x2: x(nowMs), y2: 56, class: 'now' }, svg('title', {}, 'now')),
      deadline ? svg('line', { x1: x(deadline), y1: 4, x2: x(deadline), y2: 56, class: 'deadline' }, svg('title', {}, `down if no ping by ${formatTime(new Date(deadline).toISOString())}`)) : null,
      marks),
    h('figcaption', { class: 'timeline-legend' },
      h('span', {}, formatTime(new Date(start).toISOString())),
      h('span', { class: 'keys' }, h('span', { class: 'key ping' }, 'ping'), h('span', { class: 'key fail' }, 'fail'), deadline ? h('span', { class: 'key deadline' }, 'down after') : null, h('span', { class: 'key now' }, 'now')),
      h('span', {}, formatTime(new Date(end).toISOString()))));
}

export async function monitorDetail(ctx) {
  const id = ctx.params.id;
  const result = h('div', { class: 'action-result', role: 'status' });
  const body = h('div');
  const path = `/monitors/${encodeURIComponent(id)}`;
  const unchanged = sameAsLast();
  const draw = async () => {
    const [m, pings] = await Promise.all([getData(path), getData(`${path}/pings?limit=100`)]);
    if (!ctx.alive() || unchanged([m, pings])) return;
    ctx.setTitle(m.name || m.id);
    const paused = m.status === 'paused';
    fill(body,
      pageHead(m.name || m.id,
        pauseResumeButton(path, paused, result, draw, { pausedText: 'Monitor paused', resumedText: 'Monitor resumed' }),
        editAndDelete('monitors', 'monitor', id)),
      result,
      facts([
        ['Status', h('span', { class: 'monitor-status' }, badge(m.status))],
        ['Ping URL', copyable(m.ping_url, 'Ping URL')],
        ['Expects', every(m)],
        ['Grace period', `${m.grace_period_seconds ?? 0} s`],
        ['Last ping', m.last_ping_at ? [time(m.last_ping_at), ' ', h('span', { class: 'muted' }, relative(m.last_ping_at))] : null],
        ['Next expected', m.next_expected_at ? [time(m.next_expected_at), ' ', h('span', { class: 'muted' }, relative(m.next_expected_at))] : null],
        ['Id', h('code', {}, m.id)],
        ['Created', time(m.created_at)],
      ]),
      h('p', { class: 'help' }, 'Ping it from your job: ', h('code', { class: 'wrap' }, `curl -fsS ${m.ping_url}`), '; report a failure with ', h('code', {}, '/fail'), ' after the URL.'),
      h('h2', {}, 'Pings'),
      pingTimeline(m, pings),
      table([
        { label: 'Received', cell: (p) => time(p.received_at) },
        { label: 'Kind', cell: (p) => badge(p.kind === 'fail' ? 'fail' : 'ping') },
        { label: 'Method', cell: (p) => p.method },
        { label: 'Source IP', cell: (p) => p.source_ip ?? '—' },
        { label: 'User agent', cell: (p) => h('span', { class: 'wrap' }, p.user_agent ?? '—') },
        { label: 'Body', cell: (p) => (p.body ? h('code', { class: 'wrap' }, p.body.length > 120 ? `${p.body.slice(0, 120)}…` : p.body) : '—') },
      ], pings, { caption: 'Ping history (newest first)', empty: 'No pings yet.', label: 'Ping history' }));
  };
  await draw();
  fill(ctx.main, body);
  ctx.live((msg) => mentions(msg, id), draw);
  // Down happens without a message of ours to wait for when the feed is off; the page also reads again while it is open.
  const timer = setInterval(() => ctx.alive() && draw().catch(() => {}), 15_000);
  ctx.onCleanup(() => clearInterval(timer));
}

const forms = resourceForms({ section: 'monitors', noun: 'monitor', fieldsFor: () => monitorFields });
export const monitorNew = forms.create;
export const monitorEdit = forms.edit;
