// Inbound endpoints: list, detail with inbound events, create, edit, pause / resume,
// delete; one inbound event with its stored request, its forwards and Replay.
import { api } from '../api.js';
import { bodyView } from '../body-view.js';
import { badge, button, copyable, errorBox, facts, fill, h, headersTable, link, pageHead, pre, table, time } from '../dom.js';
import { flowLimits } from './flow-control.js';
import { bulkAction } from './failures.js';
import { editAndDelete, getData, listPage, mentions, pauseResumeButton, resourceForms, sameAsLast } from './common.js';
import { notifyFields, scriptField } from './tasks.js';

const FAILED = new Set(['failed', 'timeout']);
const METHODS = [['', 'The original method'], ...['GET', 'POST', 'PUT', 'PATCH', 'DELETE'].map((m) => [m, m])];

const endpointFields = [
  { name: 'name', label: 'Name', type: 'text', required: true },
  { name: 'forward_urls', label: 'Forward URLs', type: 'lines', rows: 3, help: 'One URL per line (up to 10). None: the endpoint only collects events.' },
  { name: 'retry_attempts', label: 'Retry attempts', type: 'number', placeholder: '5', help: '0 to 10' },
  { name: 'use_lane', label: 'Deliver one at a time, in order', type: 'checkbox', default: true },
  {
    name: 'flow_control', label: 'Flow control', type: 'json', rows: 2, nullable: true, placeholder: '{"rate": 10, "period": "1s"}',
    help: 'Limits on the forwards: rate starts per period; parallelism (at most that many at once) needs one at a time off',
  },
  {
    legend: 'Forwarded request',
    fields: [
      { name: 'forward_method', label: 'Method', type: 'select', options: METHODS, default: '' },
      { name: 'forward_headers', label: 'Extra headers', type: 'headers', rows: 3, nullable: true, help: 'One per line: Name: value' },
      { name: 'forward_body', label: 'Body instead of the original', type: 'textarea', rows: 3, nullable: true },
    ],
  },
  notifyFields,
  {
    name: 'verification', label: 'Verify incoming requests', type: 'verification',
    help: 'Every plan. Checked on the raw body before anything else: a request that fails is stored as rejected, answered 403 and not forwarded.',
  },
  { name: 'enabled', label: 'Enabled', type: 'checkbox', default: true },
  { ...scriptField, help: 'verify(req, secrets), filter(req), transform(req), route(req)' },
  { name: 'secrets', label: 'Secrets (Pro)', type: 'secrets', rows: 2, help: 'NAME=value per line, for verify(); write-only: leave empty to keep the stored ones' },
];

const PRESET_NAMES = { 'standard-webhooks': 'Standard Webhooks / Svix', stripe: 'Stripe', github: 'GitHub', shopify: 'Shopify', hmac: 'HMAC' };
const verificationText = (v) => [PRESET_NAMES[v.type] ?? v.type, v.type === 'hmac' ? ` (${v.algorithm}, ${v.encoding}, in ${v.header})` : ''].join('');

/** Whether each endpoint's latest forward ended failed: one read per endpoint. */
async function failingOf(endpoints) {
  const latest = await Promise.all(endpoints.map((e) => api('GET', `/executions?task_id=${encodeURIComponent(e.id)}&limit=1`).then((r) => r.data[0] ?? null, () => null)));
  return new Map(endpoints.map((e, i) => [e.id, Boolean(latest[i] && FAILED.has(latest[i].status))]));
}

function stateBadge(e, failing) {
  return h('span', { class: 'badges' }, e.paused ? badge('paused') : badge(e.enabled === false ? 'disabled' : 'active'), failing ? [' ', badge('failing')] : null);
}

export function endpointsList(ctx) {
  return listPage(ctx, {
    title: 'Endpoints',
    newPath: ['endpoints', 'new'],
    newLabel: 'New endpoint',
    load: async () => {
      const endpoints = (await api('GET', '/endpoints')).data;
      const failing = await failingOf(endpoints);
      return endpoints.map((e) => ({ ...e, failing: failing.get(e.id) }));
    },
    empty: 'No endpoints yet.',
    match: (m) => m.kind === 'endpoint' || (m.kind === 'execution' && Boolean(m.endpoint_id)),
    columns: [
      { label: 'Name', cell: (e) => link(e.name || e.id, 'endpoints', e.id) },
      { label: 'State', cell: (e) => stateBadge(e, e.failing) },
      { label: 'Inbound URL', cell: (e) => h('code', { class: 'wrap' }, e.inbound_url) },
      { label: 'Forwards to', cell: (e) => (e.forward_urls.length ? h('span', { class: 'wrap' }, e.forward_urls.join(', ')) : h('span', { class: 'muted' }, 'nothing (collects only)')) },
    ],
  });
}

const eventStatus = (ev) => badge(ev.execution_status ?? ev.outcome ?? 'received');

/**
 * Makes a disabled forward URL active again; with "replay since" (ISO 8601 or `2d`), the
 * events it missed since then are replayed to it as a job (the answer links the job).
 */
function enableForward(path, url, result, draw) {
  const since = h('input', { type: 'text', placeholder: 'e.g. 2d', 'aria-label': `Replay what ${url} missed since`, size: 10 });
  const enable = async () => {
    try {
      const res = await api('POST', `${path}/forwards/enable`, { url, ...(since.value.trim() ? { recover_since: since.value.trim() } : {}) });
      const job = res.data.job;
      fill(result, h('p', { class: 'ok' }, `${url} enabled`, job ? [': replaying ', String(job.total), ' missed events, job ', h('code', {}, job.id), ' (Jobs on the Failures page)'] : null));
      await draw();
    } catch (err) {
      fill(result, errorBox(err));
    }
  };
  return h('span', { class: 'enable-forward' }, h('label', {}, 'replay missed since ', since), ' ', button('Enable', enable, { class: 'primary' }));
}

export async function endpointDetail(ctx) {
  const id = ctx.params.id;
  const path = `/endpoints/${encodeURIComponent(id)}`;
  const result = h('div', { class: 'action-result', role: 'status' });
  const body = h('div');
  const unchanged = sameAsLast();
  const draw = async () => {
    const [e, events, failing] = await Promise.all([getData(path), getData(`${path}/events?limit=50`), failingOf([{ id }])]);
    if (!ctx.alive() || unchanged([e, events, failing.get(id)])) return;
    ctx.setTitle(e.name || e.id);
    fill(body,
      pageHead(e.name || e.id,
        pauseResumeButton(path, e.paused, result, draw, { pausedText: 'Endpoint paused: events are stored and held', resumedText: 'Endpoint resumed: held events go out in order' }),
        editAndDelete('endpoints', 'endpoint', id)),
      result,
      facts([
        ['State', h('span', { class: 'endpoint-state' }, stateBadge(e, failing.get(id)))],
        ['Inbound URL', copyable(e.inbound_url, 'Inbound URL')],
        ['Forwards to', e.forward_urls.length ? h('ul', { class: 'plain' }, (e.forward_health ?? e.forward_urls.map((url) => ({ url, status: 'active' }))).map((f) => h('li', {}, h('code', { class: 'wrap' }, f.url),
          // Destination health: a disabled URL receives nothing until enabled (POST /endpoints/{id}/forwards/enable).
          f.status === 'disabled' ? [' ', badge('failed'), ` disabled ${f.disabled_at ?? ''} after ${f.consecutive_failures} failures `, enableForward(path, f.url, result, draw)] : null))) : 'nothing: it only collects events'],
        ['Forward method', e.forward_method || 'the original'],
        ['Retry attempts', String(e.retry_attempts)],
        ['One at a time', e.use_lane ? 'yes' : 'no'],
        ['Flow control', e.flow_control ? flowLimits(e.flow_control) : null],
        ['Verification', e.verification ? verificationText(e.verification) : null],
        ['Secrets', e.secret_names?.length ? e.secret_names.join(', ') : null],
        ['Id', h('code', {}, e.id)],
        ['Created', time(e.created_at)],
      ]),
      e.forward_headers && Object.keys(e.forward_headers).length ? headersTable(e.forward_headers, 'Extra headers') : null,
      e.script ? [h('h2', {}, 'Script'), pre(e.script)] : null,
      h('h2', {}, 'Inbound events'),
      h('p', { class: 'help' }, 'Send any GET, POST, PUT, PATCH or DELETE to the inbound URL; no API key needed. Kept 30 days.'),
      table([
        { label: 'Event', cell: (ev) => link(ev.id, 'endpoints', id, 'events', ev.id) },
        { label: 'Received', cell: (ev) => time(ev.received_at) },
        { label: 'Method', cell: (ev) => ev.method },
        { label: 'Source IP', cell: (ev) => ev.source_ip ?? '—' },
        { label: 'Status', cell: eventStatus },
        { label: 'Forwards', cell: (ev) => (ev.executions.length ? ev.executions.map((x, i) => [i ? ' ' : '', link(x.status, 'executions', x.id)]) : '—') },
      ], events, { caption: 'Newest first', empty: 'No events yet.', label: 'Inbound events' }));
  };
  await draw();
  // Outside the redrawn part: a count and a running job's progress stay across live redraws.
  const status = h('select', { id: 'replay-status', 'aria-label': 'Delivery status' },
    ['failed', 'pending', 'success', ''].map((s) => h('option', { value: s }, s || 'any')));
  const since = h('input', { id: 'replay-since', type: 'text', placeholder: '7d', 'aria-label': 'Received after', autocomplete: 'off' });
  const filter = () => Object.fromEntries(Object.entries({ delivery_status: status.value, received_after: since.value.trim() }).filter(([, v]) => v));
  const replayMatching = h('section', { class: 'replay-matching', 'aria-label': 'Replay matching events' },
    h('h2', {}, 'Replay matching events'),
    h('p', { class: 'help' }, 'Inbound events of the last 30 days by their worst delivery, sent again through the current script to every forward URL.'),
    h('div', { class: 'filters' }, status, since),
    bulkAction({ path: `${path}/events/replay`, body: () => ({ filter: filter() }), verb: 'Replay', noun: 'events', alive: ctx.alive }));
  fill(ctx.main, body, replayMatching);
  ctx.live((m) => mentions(m, id), draw);
}

export async function inboundEventDetail(ctx) {
  const { id, eventId } = ctx.params;
  const path = `/endpoints/${encodeURIComponent(id)}/events/${encodeURIComponent(eventId)}`;
  const result = h('div', { class: 'action-result', role: 'status' });
  const body = h('div');
  const unchanged = sameAsLast();
  const replay = async () => {
    try {
      const res = await api('POST', `${path}/replay`);
      const ids = res.data.execution_ids;
      fill(result, h('p', { class: 'ok' }, res.message ?? 'Replay queued', ids.length ? [': ', ids.map((x, i) => [i ? ', ' : '', link(x, 'executions', x)])] : null));
      await draw();
    } catch (err) {
      fill(result, errorBox(err));
    }
  };
  const draw = async () => {
    const [ev, endpoint] = await Promise.all([getData(path), getData(`/endpoints/${encodeURIComponent(id)}`)]);
    if (!ctx.alive() || unchanged([ev, endpoint])) return;
    ctx.setTitle(`Event ${ev.id}`);
    const req = ev.request;
    fill(body,
      h('p', { class: 'crumbs' }, link(endpoint.name || endpoint.id, 'endpoints', id), ' / inbound event'),
      pageHead(`Event ${ev.id}`, button('Replay', replay, { class: 'primary' })),
      result,
      facts([
        ['Received', time(ev.received_at)],
        ['Status', eventStatus(ev)],
        ['Request', h('code', { class: 'wrap' }, `${req.method} ${req.path}${req.query ? `?${req.query}` : ''}`)],
        ['Source IP', ev.source_ip],
        ['Size', `${req.body_size} bytes`],
        ['Error', ev.error_message],
      ]),
      h('h2', {}, 'Forwards'),
      table([
        { label: 'Execution', cell: (x) => link(x.id, 'executions', x.id) },
        { label: 'Status', cell: (x) => badge(x.status) },
        { label: 'URL', cell: (x) => h('code', { class: 'wrap' }, x.url) },
      ], ev.executions, { empty: 'Not forwarded.', label: 'Forwards' }),
      ev.script_logs?.length ? [h('h2', {}, 'Script logs'), pre(ev.script_logs.join('\n'))] : null,
      h('h2', {}, 'Stored request'),
      bodyView(req.body, req.body_encoding, 'Body'),
      headersTable(req.headers, 'Headers as received'));
  };
  await draw();
  fill(ctx.main, body);
  ctx.live((m) => mentions(m, eventId) || mentions(m, id), draw);
}

const forms = resourceForms({ section: 'endpoints', noun: 'endpoint', fieldsFor: () => endpointFields });
export const endpointNew = forms.create;
export const endpointEdit = forms.edit;
