// Failures: dead letters (executions that failed or timed out after their last attempt
// and that no retry replaced) with the shared filters; retry one, retry the selected,
// or count what matches and retry all of it as a job whose progress is shown. Also the
// job widget an endpoint's page uses to replay its matching inbound events.
import { api, query } from '../api.js';
import { badge, button, fill, h, link, pageHead, table, time } from '../dom.js';
import { hashWith } from '../router.js';
import { sourceLink } from './common.js';

const FILTERS = ['source_type', 'status_code', 'host', 'error', 'finished_after'];
const PAGE = 50;

/** A job's progress until it is no longer running: a bar and a line, polled. */
export function jobProgress(job, alive) {
  const bar = h('progress', { max: String(Math.max(1, job.total)), value: '0', 'aria-label': 'Job progress' });
  const line = h('p', { class: 'job-line', role: 'status' });
  const box = h('div', { class: 'job-progress', 'data-job': job.id }, bar, line);
  const show = (j) => {
    bar.value = j.done + j.skipped;
    bar.max = Math.max(1, j.total);
    fill(line, `Job ${j.id}: ${j.status}, ${j.done + j.skipped} of ${j.total} (${j.done} ${j.kind === 'replay' ? 'replayed' : 'retried'}, ${j.skipped} skipped)`);
    box.dataset.status = j.status;
  };
  show(job);
  const poll = async () => {
    if (!alive()) return;
    const j = (await api('GET', `/jobs/${encodeURIComponent(job.id)}`)).data;
    show(j);
    if (j.status === 'running') setTimeout(poll, 400);
  };
  if (job.status === 'running') setTimeout(poll, 400);
  return box;
}

/** "Count" (a dry run) then "<verb> all N matching" (the job), with its progress below. */
export function bulkAction({ path, body, verb, noun, alive }) {
  const region = h('div', { class: 'bulk', 'aria-live': 'polite' });
  const count = async () => {
    try {
      const { data } = await api('POST', path, { ...body(), dry_run: true });
      fill(region, data.count
        ? button(`${verb} all ${data.count} matching`, run, { class: 'primary' })
        : h('p', { class: 'muted' }, `No ${noun} match.`));
    } catch (err) {
      fill(region, h('div', { class: 'error-box', role: 'alert' }, err.field ? `${err.field}: ` : '', err.message));
    }
  };
  const run = async () => {
    try {
      const { data } = await api('POST', path, body());
      fill(region, jobProgress(data, alive));
    } catch (err) {
      fill(region, h('div', { class: 'error-box', role: 'alert' }, err.message));
    }
  };
  return h('div', { class: 'bulk-action' }, button(`Count matching ${noun}`, count), region);
}

function filterForm(current) {
  const field = (name, label, control) => h('div', { class: 'field' }, h('label', { for: `flt-${name}` }, label), control);
  const text = (name, placeholder) => h('input', { id: `flt-${name}`, name, type: 'text', value: current[name] ?? '', placeholder, autocomplete: 'off' });
  const kind = h('select', { id: 'flt-source_type', name: 'source_type' },
    h('option', { value: '' }, 'Any'), ['task', 'schedule', 'endpoint'].map((k) => h('option', { value: k, selected: current.source_type === k }, k)));
  const form = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter dead letters' },
    field('source_type', 'Kind', kind),
    field('status_code', 'Status code', text('status_code', '500,502 or 5xx')),
    field('host', 'Host', text('host', 'api.example.com')),
    field('error', 'Error contains', text('error', 'timeout')),
    field('finished_after', 'Finished after', text('finished_after', '7d')),
    h('div', { class: 'form-actions' }, h('button', { type: 'submit', class: 'primary' }, 'Apply'), h('a', { class: 'button quiet', href: '#/failures' }, 'Clear')));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const data = new FormData(form);
    location.hash = hashWith(['failures'], Object.fromEntries(FILTERS.map((n) => [n, String(data.get(n) ?? '').trim()])));
  });
  return form;
}

export async function failuresPage(ctx) {
  ctx.setTitle('Failures');
  const filters = Object.fromEntries(FILTERS.map((f) => [f, ctx.query.get(f) ?? '']));
  const given = Object.fromEntries(Object.entries(filters).filter(([, v]) => v));
  const result = h('div', { class: 'action-result', role: 'status' });
  const region = h('div', { class: 'list', 'aria-live': 'polite' });
  const selected = new Set();
  const retryOne = async (id) => {
    try {
      const { data } = await api('POST', `/executions/${encodeURIComponent(id)}/retry`);
      fill(result, 'Retry queued: ', link(data.execution_id, 'executions', data.execution_id));
    } catch (err) {
      fill(result, h('span', { class: 'error-box', role: 'alert' }, err.message));
    }
    await draw();
  };
  const retrySelected = async () => {
    const ids = [...selected];
    let queued = 0;
    for (const id of ids) {
      try {
        await api('POST', `/executions/${encodeURIComponent(id)}/retry`);
        queued++;
      } catch {
        // One that cannot be retried (its source gone) is left; the count says so.
      }
    }
    selected.clear();
    fill(result, `Retried ${queued} of ${ids.length} selected`);
    await draw();
  };
  const draw = async () => {
    let page;
    try {
      page = await api('GET', `/executions${query({ ...filters, dead: 'true', limit: PAGE })}`);
    } catch (err) {
      if (!ctx.alive()) return;
      fill(region, h('div', { class: 'error-box', role: 'alert' }, err.field ? `${err.field}: ` : '', err.message));
      return;
    }
    if (!ctx.alive()) return;
    fill(region, table([
      { label: 'Select', cell: (e) => h('input', { type: 'checkbox', 'aria-label': `Select ${e.id}`, checked: selected.has(e.id), onchange: (ev) => (ev.target.checked ? selected.add(e.id) : selected.delete(e.id)) }) },
      { label: 'Execution', cell: (e) => link(e.id, 'executions', e.id) },
      { label: 'Status', cell: (e) => badge(e.status) },
      { label: 'For', cell: (e) => sourceLink(e.task) },
      { label: 'Code', cell: (e) => (e.status_code ?? '—') },
      { label: 'Error', cell: (e) => e.error_message ?? '—' },
      { label: 'Finished', cell: (e) => time(e.finished_at) },
      { label: 'Retry', cell: (e) => button('Retry', () => retryOne(e.id), { 'aria-label': `Retry ${e.id}` }) },
    ], page.data, { empty: 'No dead letters match.', label: 'Dead letters' }));
  };
  await draw();
  fill(ctx.main,
    pageHead('Failures', button('Retry selected', retrySelected)),
    h('p', { class: 'help' }, 'Executions that failed or timed out after their last attempt and that no retry has replaced. A retry sends what the task, schedule or endpoint sends now.'),
    filterForm(filters), result,
    bulkAction({ path: '/executions/retry', body: () => ({ filter: given }), verb: 'Retry', noun: 'dead letters', alive: ctx.alive }),
    region);
  ctx.live((m) => m.kind === 'execution', draw, 500);
}
