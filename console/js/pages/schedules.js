// Schedules: list, detail with next runs and history, create, edit, trigger, delete.
import { api } from '../api.js';
import { badge, facts, fill, h, headersTable, link, pageHead, pre, relative, time } from '../dom.js';
import { nextRuns } from '../cron.js';
import { editAndDelete, getData, historySection, listPage, mentions, resourceForms, sameAsLast, triggerButton } from './common.js';
import { deliveryFields, notifyFields, requestFields, scriptField } from './tasks.js';

const scheduleFields = [
  { name: 'name', label: 'Name', type: 'text' },
  { name: 'url', label: 'URL', type: 'url', required: true, placeholder: 'https://example.com/nightly' },
  { name: 'cron', label: 'Cron expression', type: 'text', required: true, placeholder: '0 3 * * *', help: '5 fields (or 6 with seconds first), or @hourly, @daily, @weekly, @monthly, @yearly' },
  { name: 'timezone', label: 'Time zone', type: 'text', placeholder: 'UTC', help: 'An IANA name such as Europe/Berlin' },
  ...requestFields,
  deliveryFields,
  notifyFields,
  { name: 'enabled', label: 'Enabled', type: 'checkbox', default: true },
  scriptField,
];

export function schedulesList(ctx) {
  return listPage(ctx, {
    title: 'Schedules',
    newPath: ['schedules', 'new'],
    newLabel: 'New schedule',
    load: async () => (await api('GET', '/schedules')).data,
    empty: 'No schedules yet.',
    match: (m) => m.kind === 'schedule' || (m.kind === 'execution' && Boolean(m.schedule_id)),
    columns: [
      { label: 'Name', cell: (s) => link(s.name || s.id, 'schedules', s.id) },
      { label: 'Cron', cell: (s) => h('code', {}, `${s.cron} (${s.timezone ?? 'UTC'})`) },
      { label: 'Last run', cell: (s) => (s.last_status ? badge(s.last_status) : h('span', { class: 'muted' }, 'never')) },
      { label: 'Next run', cell: (s) => (s.enabled === false ? h('span', { class: 'muted' }, 'disabled') : time(s.next_run_at)) },
      { label: 'Target', cell: (s) => h('code', { class: 'wrap' }, `${s.method} ${s.url}`) },
    ],
  });
}

/** The next runs: the API's next one, then the ones after it as this browser works them out. */
function nextRunsList(schedule) {
  if (schedule.enabled === false) return h('p', { class: 'muted' }, 'Disabled: no runs planned.');
  const from = schedule.next_run_at ? Date.parse(schedule.next_run_at) - 1 : Date.now();
  const runs = nextRuns(schedule.cron, schedule.timezone ?? 'UTC', from, 5);
  const items = runs ?? (schedule.next_run_at ? [new Date(schedule.next_run_at)] : []);
  if (items.length === 0) return h('p', { class: 'muted' }, 'No run planned.');
  const now = Date.now();
  return h('div', {},
    h('ol', { class: 'next-runs' }, items.map((d) => h('li', {}, time(d.toISOString()), ' ', h('span', { class: 'muted' }, relative(d.toISOString(), now))))),
    h('p', { class: 'help' }, runs ? 'In this browser\'s time zone.' : 'Only the next run is shown: this browser does not read this expression.'));
}

export async function scheduleDetail(ctx) {
  const id = ctx.params.id;
  const result = h('div', { class: 'action-result', role: 'status' });
  const body = h('div');
  const unchanged = sameAsLast();
  const draw = async () => {
    const [s, history] = await Promise.all([getData(`/schedules/${encodeURIComponent(id)}`), getData(`/schedules/${encodeURIComponent(id)}/executions?limit=50`)]);
    if (!ctx.alive() || unchanged([s, history])) return;
    ctx.setTitle(s.name || s.id);
    fill(body,
      pageHead(s.name || s.id,
        triggerButton(`/schedules/${encodeURIComponent(id)}`, result),
        editAndDelete('schedules', 'schedule', id)),
      result,
      h('div', { class: 'columns' },
        facts([
          ['Id', h('code', {}, s.id)],
          ['Cron', h('code', {}, s.cron)],
          ['Time zone', s.timezone ?? 'UTC'],
          ['Request', h('code', { class: 'wrap' }, `${s.method} ${s.url}`)],
          ['Last run', s.last_status ? [badge(s.last_status), ' ', s.last_execution_id ? link(s.last_execution_id, 'executions', s.last_execution_id) : ''] : null],
          ['Timeout', `${s.timeout_ms} ms`],
          ['Retry attempts', String(s.retry_attempts)],
          ['Enabled', s.enabled === false ? (s.disabled_reason === 'failing' ? 'no: turned off after failing for too long (edit and enable it to run again)' : 'no') : 'yes'],
          ['Created', time(s.created_at)],
        ]),
        h('section', { 'aria-labelledby': 'next-runs-h' }, h('h2', { id: 'next-runs-h' }, 'Next runs'), nextRunsList(s))),
      Object.keys(s.headers ?? {}).length ? headersTable(s.headers, 'Headers') : null,
      s.body !== null && s.body !== undefined ? [h('h2', {}, 'Body'), pre(typeof s.body === 'string' ? s.body : JSON.stringify(s.body, null, 2))] : null,
      s.script ? [h('h2', {}, 'Script'), pre(s.script)] : null,
      historySection(id, history));
  };
  await draw();
  fill(ctx.main, body);
  ctx.live((m) => mentions(m, id), draw);
}

const forms = resourceForms({ section: 'schedules', noun: 'schedule', fieldsFor: () => scheduleFields });
export const scheduleNew = forms.create;
export const scheduleEdit = forms.edit;
