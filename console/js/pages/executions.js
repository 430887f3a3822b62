// Executions: the API's filterable list (status, task, since/until) with paging, and one
// execution with its request as sent, attempts, response and script logs.
import { api, query } from '../api.js';
import { bodyView } from '../body-view.js';
import { badge, duration, facts, fill, h, headersTable, pageHead, pre, table, time } from '../dom.js';
import { hashWith } from '../router.js';
import { executionColumns, getData, mentions, sameAsLast, sourceLink } from './common.js';

const STATUSES = ['pending', 'running', 'success', 'failed', 'timeout', 'cancelled'];
const PAGE = 50;
const FILTERS = ['status', 'task_id', 'since', 'until'];

function filterForm(current) {
  const field = (name, label, control, help) => h('div', { class: 'field' }, h('label', { for: `flt-${name}` }, label), control, help ? h('p', { class: 'help', id: `flt-${name}-help` }, help) : null);
  const status = h('select', { id: 'flt-status', name: 'status' },
    h('option', { value: '' }, 'Any'), STATUSES.map((s) => h('option', { value: s, selected: current.status === s }, s)));
  const text = (name, placeholder) => h('input', { id: `flt-${name}`, name, type: 'text', value: current[name] ?? '', placeholder, autocomplete: 'off', 'aria-describedby': `flt-${name}-help` });
  const form = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter executions' },
    field('status', 'Status', status),
    field('task_id', 'Task, schedule or endpoint', text('task_id', 'tsk_…, sch_…, ep_…'), 'Its id: its executions only'),
    field('since', 'Since', text('since', '24h'), 'A duration (30m, 24h, 7d) or an ISO time'),
    field('until', 'Until', text('until', ''), 'Same forms; empty: now'),
    h('div', { class: 'form-actions' }, h('button', { type: 'submit', class: 'primary' }, 'Apply'), h('a', { class: 'button quiet', href: '#/executions' }, 'Clear')));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const params = {};
    for (const name of FILTERS) params[name] = String(data.get(name) ?? '').trim();
    location.hash = hashWith(['executions'], params);
  });
  return form;
}

export async function executionsList(ctx) {
  ctx.setTitle('Executions');
  const filters = Object.fromEntries(FILTERS.map((f) => [f, ctx.query.get(f) ?? '']));
  const offset = Math.max(0, Number(ctx.query.get('offset')) || 0);
  const region = h('div', { class: 'list', 'aria-live': 'polite' });
  const unchanged = sameAsLast();
  const draw = async () => {
    let page;
    try {
      page = await api('GET', `/executions${query({ ...filters, limit: PAGE, offset })}`);
    } catch (err) {
      if (!ctx.alive()) return;
      // A filter the API refuses names its field: say so next to the list.
      fill(region, h('div', { class: 'error-box', role: 'alert' }, err.field ? `${err.field}: ` : '', err.message));
      return;
    }
    if (!ctx.alive() || unchanged(page)) return;
    const pager = h('nav', { class: 'pager', 'aria-label': 'Pages' },
      offset > 0 ? h('a', { class: 'button', href: hashWith(['executions'], { ...filters, offset: Math.max(0, offset - PAGE) || '' }), rel: 'prev' }, '← Newer') : null,
      h('span', { class: 'muted' }, page.data.length ? `${offset + 1}–${offset + page.data.length}` : ''),
      page.has_more ? h('a', { class: 'button', href: hashWith(['executions'], { ...filters, offset: offset + PAGE }), rel: 'next' }, 'Older →') : null);
    fill(region, table(executionColumns, page.data, { empty: 'No executions match.', label: 'Executions' }), pager);
  };
  await draw();
  fill(ctx.main, pageHead('Executions'), filterForm(filters), region);
  // New executions land on the first page; later pages would only shift under the reader.
  if (offset === 0) ctx.live((m) => m.kind === 'execution', draw, 500);
}

/** The X-Jetcron-* headers a request was signed with, apart from the rest. */
function signatureHeaders(headers) {
  return Object.fromEntries(Object.entries(headers ?? {}).filter(([k]) => /^x-jetcron-/i.test(k)));
}

export async function executionDetail(ctx) {
  const id = ctx.params.id;
  const body = h('div');
  const unchanged = sameAsLast();
  const draw = async () => {
    const e = await getData(`/executions/${encodeURIComponent(id)}`);
    if (!ctx.alive() || unchanged(e)) return;
    ctx.setTitle(`Execution ${e.id}`);
    const req = e.request;
    const signed = signatureHeaders(req?.headers);
    fill(body,
      pageHead(`Execution ${e.id}`),
      facts([
        ['Status', h('span', { class: 'execution-status' }, badge(e.status))],
        ['For', [sourceLink(e.task), ' ', h('span', { class: 'muted' }, e.task?.type ?? '')]],
        ['URL', h('code', { class: 'wrap' }, e.task?.url ?? '')],
        ['Scheduled', time(e.scheduled_for)],
        ['Started', time(e.started_at)],
        ['Finished', time(e.finished_at)],
        ['Attempt', String(e.attempt ?? '—')],
        ['Status code', e.status_code === null ? null : String(e.status_code)],
        ['Duration', duration(e.duration_ms)],
        ['Error', e.error_message],
        ['Callback URL', e.callback_url],
      ]),
      h('section', { 'aria-labelledby': 'attempts-h' },
        h('h2', { id: 'attempts-h' }, 'Attempts'),
        table([
          { label: '#', cell: (a) => String(a.attempt) },
          { label: 'Status', cell: (a) => badge(a.status) },
          { label: 'Code', cell: (a) => (a.status_code ?? '—') },
          { label: 'Started', cell: (a) => time(a.started_at) },
          { label: 'Finished', cell: (a) => time(a.finished_at) },
          { label: 'Duration', cell: (a) => duration(a.duration_ms) },
          { label: 'Error', cell: (a) => (a.error_message ? h('span', { class: 'wrap' }, a.error_message) : '—') },
        ], e.attempts ?? [], { empty: 'No attempt yet.', label: 'Attempts' })),
      h('section', { 'aria-labelledby': 'request-h' },
        h('h2', { id: 'request-h' }, 'Request as sent'),
        req ? [
          h('p', {}, h('code', { class: 'wrap' }, `${req.method} ${req.url}`)),
          Object.keys(signed).length ? headersTable(signed, 'Signature headers') : h('p', { class: 'muted' }, 'Not signed yet.'),
          headersTable(req.headers, 'Headers'),
          bodyView(typeof req.body === 'string' || req.body == null ? req.body : JSON.stringify(req.body), 'utf8', 'Request body'),
        ] : h('p', { class: 'muted' }, 'Not sent yet.')),
      h('section', { 'aria-labelledby': 'response-h' },
        h('h2', { id: 'response-h' }, 'Response'),
        e.status_code === null && !e.response_body ? h('p', { class: 'muted' }, 'No response.') : [
          e.response_truncated ? h('p', { class: 'notice' }, 'The body was longer than 256 KB: only its beginning was kept.') : null,
          headersTable(e.response_headers, 'Response headers'),
          bodyView(e.response_body, e.response_body_encoding, 'Response body'),
        ]),
      e.script_logs?.length ? h('section', { 'aria-labelledby': 'logs-h' }, h('h2', { id: 'logs-h' }, 'Script logs'), pre(e.script_logs.join('\n'))) : null);
  };
  await draw();
  fill(ctx.main, body);
  ctx.live((m) => mentions(m, id), draw);
}
