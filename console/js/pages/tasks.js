// Tasks: list, detail with history, create, edit, trigger, delete.
import { api } from '../api.js';
import { badge, facts, fill, h, headersTable, link, pageHead, pre, time } from '../dom.js';
import { flowControlFact } from './flow-control.js';
import { editAndDelete, getData, historySection, listPage, mentions, ofKind, resourceForms, sameAsLast, triggerButton } from './common.js';

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'].map((m) => [m, m]);

export const notifyFields = {
  legend: 'Notifications',
  fields: [
    { name: 'notify_on_failure', label: 'Notify on failure', type: 'tristate' },
    { name: 'notify_on_recovery', label: 'Notify on recovery', type: 'tristate' },
    { name: 'on_failure_url', label: 'Failure webhook URL', type: 'url', placeholder: 'https://…', nullable: true },
    { name: 'on_recovery_url', label: 'Recovery webhook URL', type: 'url', placeholder: 'https://…', nullable: true },
    {
      name: 'channels', label: 'Notification channels', type: 'channels',
      help: 'Which of the organization\'s channels hear of this one\'s failures and recoveries',
      load: async () => (await api('GET', '/channels')).data,
    },
  ],
};

export const requestFields = [
  { name: 'method', label: 'Method', type: 'select', options: METHODS, default: 'POST' },
  { name: 'headers', label: 'Headers', type: 'headers', help: 'One per line: Name: value', rows: 3 },
  { name: 'body', label: 'Body', type: 'body', rows: 5 },
];

export const deliveryFields = {
  legend: 'Delivery',
  fields: [
    { name: 'timeout_ms', label: 'Timeout (ms)', type: 'number', placeholder: '30000', help: '1000 to 300000' },
    { name: 'retry_attempts', label: 'Retry attempts', type: 'number', placeholder: '5', help: '0 to 10' },
    { name: 'expected_status_codes', label: 'Expected status codes', type: 'text', placeholder: '200-299', nullable: true },
  ],
};

export const scriptField = { name: 'script', label: 'Lua script (Pro)', type: 'textarea', rows: 5, nullable: true, help: 'function on_response(res, task) … end' };

const flowControlField = {
  name: 'flow_control', label: 'Flow control', type: 'json', rows: 2, placeholder: '{"key": "partner-api", "parallelism": 5, "rate": 10, "period": "1s"}',
  help: 'Instead of a lane: at most parallelism at once and rate starts per period, over every task naming the key',
};

function taskFields(mode) {
  return [
    { name: 'name', label: 'Name', type: 'text' },
    { name: 'url', label: 'URL', type: 'url', required: true, placeholder: 'https://example.com/hook' },
    ...requestFields,
    {
      legend: 'When',
      fields: mode === 'create'
        ? [
          { name: 'delay', label: 'Delay', type: 'text', placeholder: '10m', help: 'A number followed by s, m, h or d; empty: now' },
          { name: 'run_at', label: 'Run at', type: 'text', placeholder: '2030-01-31T09:00:00Z', help: 'An RFC 3339 time, instead of a delay' },
          { name: 'lane', label: 'Lane', type: 'text', help: 'Tasks of one lane run one at a time, in order' },
          flowControlField,
          { name: 'debounce', label: 'Debounce', type: 'text', placeholder: '30s', help: 'With a lane and a debounce key' },
          { name: 'debounce_key', label: 'Debounce key', type: 'text' },
        ]
        : [
          { name: 'delay', label: 'Delay', type: 'text', placeholder: '10m', nullable: true },
          { name: 'run_at', label: 'Run at', type: 'text', placeholder: '2030-01-31T09:00:00Z', nullable: true },
          { ...flowControlField, nullable: true },
        ],
    },
    { ...deliveryFields, fields: [...deliveryFields.fields, { name: 'expected_body_pattern', label: 'Expected body text', type: 'text', nullable: true }, { name: 'callback_url', label: 'Callback URL', type: 'url', nullable: true }] },
    notifyFields,
    { name: 'enabled', label: 'Enabled', type: 'checkbox', default: true },
    scriptField,
  ];
}

export function tasksList(ctx) {
  return listPage(ctx, {
    title: 'Tasks',
    newPath: ['tasks', 'new'],
    newLabel: 'New task',
    load: async () => (await api('GET', '/tasks')).data,
    empty: 'No tasks yet.',
    match: ofKind('task', 'execution'),
    columns: [
      { label: 'Name', cell: (t) => link(t.name || t.id, 'tasks', t.id) },
      { label: 'Status', cell: (t) => badge(t.status) },
      { label: 'Target', cell: (t) => h('code', { class: 'wrap' }, `${t.method} ${t.url}`) },
      { label: 'Next run', cell: (t) => time(t.next_run_at) },
      { label: 'Last execution', cell: (t) => (t.last_execution_id ? link(t.last_execution_id, 'executions', t.last_execution_id) : '—') },
    ],
  });
}

export async function taskDetail(ctx) {
  const id = ctx.params.id;
  const result = h('div', { class: 'action-result', role: 'status' });
  const body = h('div');
  const unchanged = sameAsLast();
  const draw = async () => {
    const [task, history] = await Promise.all([getData(`/tasks/${encodeURIComponent(id)}`), getData(`/tasks/${encodeURIComponent(id)}/executions?limit=50`)]);
    if (!ctx.alive() || unchanged([task, history])) return;
    ctx.setTitle(task.name || task.id);
    fill(body,
      pageHead(task.name || task.id,
        triggerButton(`/tasks/${encodeURIComponent(id)}`, result),
        editAndDelete('tasks', 'task', id)),
      result,
      facts([
        ['Id', h('code', {}, task.id)],
        ['Status', badge(task.status)],
        ['Request', h('code', { class: 'wrap' }, `${task.method} ${task.url}`)],
        ['Next run', time(task.next_run_at)],
        ['Last execution', task.last_execution_id ? link(task.last_execution_id, 'executions', task.last_execution_id) : null],
        ['Lane', task.lane],
        ['Flow control', flowControlFact(task.flow_control)],
        ['Timeout', `${task.timeout_ms} ms`],
        ['Retry attempts', String(task.retry_attempts)],
        ['Expected status codes', task.expected_status_codes],
        ['Callback URL', task.callback_url],
        ['Enabled', task.enabled ? 'yes' : 'no'],
        ['Created', time(task.created_at)],
        ['Updated', time(task.updated_at)],
      ]),
      Object.keys(task.headers ?? {}).length ? headersTable(task.headers, 'Headers') : null,
      task.body !== null && task.body !== undefined ? [h('h2', {}, 'Body'), pre(typeof task.body === 'string' ? task.body : JSON.stringify(task.body, null, 2))] : null,
      task.script ? [h('h2', {}, 'Script'), pre(task.script)] : null,
      historySection(id, history));
  };
  await draw();
  fill(ctx.main, body);
  ctx.live((m) => mentions(m, id), draw);
}

const forms = resourceForms({ section: 'tasks', noun: 'task', fieldsFor: taskFields });
export const taskNew = forms.create;
export const taskEdit = forms.edit;
