// What the resource pages share: execution rows, history tables, create/edit pages and
// which live messages concern a page.
import { api } from '../api.js';
import { badge, button, confirmButton, duration, errorBox, fill, h, hashPath, link, pageHead, table, time, toast } from '../dom.js';
import { buildForm } from '../form.js';
import { hashWith } from '../router.js';

const SOURCE_PATHS = { task: 'tasks', schedule: 'schedules', endpoint: 'endpoints', monitor: 'monitors' };

/** The console page of what an execution ran for (a task, schedule or endpoint). */
export function sourceLink(source) {
  if (!source?.id) return h('span', { class: 'muted' }, '—');
  const section = SOURCE_PATHS[source.type];
  const text = source.name || source.id;
  return section ? link(text, section, source.id) : h('span', {}, text);
}

export const executionColumns = [
  { label: 'Execution', cell: (e) => link(e.id, 'executions', e.id) },
  { label: 'Status', cell: (e) => badge(e.status) },
  { label: 'For', cell: (e) => sourceLink(e.task) },
  { label: 'Scheduled', cell: (e) => time(e.scheduled_for) },
  { label: 'Code', cell: (e) => (e.status_code ?? '—') },
  { label: 'Attempt', cell: (e) => String(e.attempt ?? '—') },
  { label: 'Duration', cell: (e) => duration(e.duration_ms) },
];

/** A task's or schedule's history, with a link to the same in the filterable executions list. */
export function historySection(id, rows) {
  return [
    h('div', { class: 'panel-head' }, h('h2', {}, 'History'), h('a', { href: hashWith(['executions'], { task_id: id }) }, 'In the executions list')),
    historyTable(rows),
  ];
}

/** A resource's own execution history (`/tasks/{id}/executions` rows). */
export function historyTable(rows, caption = 'Executions') {
  return table([
    { label: 'Execution', cell: (e) => link(e.id, 'executions', e.id) },
    { label: 'Status', cell: (e) => badge(e.status) },
    { label: 'Scheduled', cell: (e) => time(e.scheduled_for) },
    { label: 'Finished', cell: (e) => time(e.finished_at) },
    { label: 'Code', cell: (e) => (e.status_code ?? '—') },
    { label: 'Attempt', cell: (e) => String(e.attempt ?? '—') },
    { label: 'Duration', cell: (e) => duration(e.duration_ms) },
  ], rows, { caption, empty: 'No executions yet.', label: caption });
}

const ID_FIELDS = ['id', 'task_id', 'schedule_id', 'endpoint_id', 'monitor_id', 'execution_id'];
/** Whether a live message is about `id` in any of its id fields. */
export function mentions(message, id) {
  return ID_FIELDS.some((f) => message[f] === id);
}

export const ofKind = (...kinds) => (message) => kinds.includes(message.kind);

/**
 * A list page: heading with a "New" link, a table filled by `load()`, reloaded on live
 * messages `match` accepts. `above`: shown between the heading and the table (an
 * action's result); `onDraw` is given the page's redraw (for actions in its rows).
 */
export async function listPage(ctx, { title, newPath, newLabel, load, columns, empty, match, above = null, onDraw }) {
  ctx.setTitle(title);
  const region = h('div', { class: 'list', 'aria-live': 'polite', 'aria-busy': 'true' });
  const unchanged = sameAsLast();
  const draw = async () => {
    const rows = await load();
    if (!ctx.alive() || unchanged(rows)) return;
    fill(region, table(columns, rows, { empty, label: title }));
    region.setAttribute('aria-busy', 'false');
  };
  onDraw?.(draw);
  await draw();
  fill(ctx.main, pageHead(title, newPath ? h('a', { class: 'button primary', href: hashPath(...newPath) }, newLabel) : null), above, region);
  ctx.live(match, draw);
}

/** A create or edit page for one resource. */
export async function formPage(ctx, { title, fields, initial, mode, submitLabel, send, done, back }) {
  ctx.setTitle(title);
  const form = buildForm({
    fields, initial, mode, submitLabel,
    onSubmit: async (payload) => {
      const res = await send(payload);
      toast(mode === 'edit' ? 'Saved' : 'Created');
      location.hash = done(res.data);
    },
    onCancel: () => {
      location.hash = back;
    },
  });
  fill(ctx.main, pageHead(title), form);
  form.querySelector('input, select, textarea')?.focus();
}

/** Loads `/path` → data, for detail pages. */
export async function getData(path) {
  return (await api('GET', path)).data;
}

/**
 * `unchanged(data)` is true when `data` equals what it was given last time: a live
 * reload that finds nothing new leaves the page (and the keyboard focus) alone.
 */
export function sameAsLast() {
  let last = null;
  return (data) => {
    const text = JSON.stringify(data);
    if (text === last) return true;
    last = text;
    return false;
  };
}

/** The create and edit pages of one kind of resource; `fieldsFor(mode)` gives the form's fields. */
export function resourceForms({ section, noun, fieldsFor }) {
  return {
    create: (ctx) => formPage(ctx, {
      title: `New ${noun}`, mode: 'create', submitLabel: `Create ${noun}`, fields: fieldsFor('create'),
      send: (payload) => api('POST', `/${section}`, payload),
      done: (created) => hashPath(section, created.id),
      back: hashPath(section),
    }),
    async edit(ctx) {
      const id = ctx.params.id;
      const path = `/${section}/${encodeURIComponent(id)}`;
      const current = await getData(path);
      return formPage(ctx, {
        title: `Edit ${current.name || current.id}`, mode: 'edit', submitLabel: 'Save', fields: fieldsFor('edit'), initial: current,
        send: (payload) => api('PUT', path, payload),
        done: () => hashPath(section, id),
        back: hashPath(section, id),
      });
    },
  };
}

/** "Trigger now" for a task or schedule: the queued execution is linked in `result`. */
export function triggerButton(path, result) {
  return button('Trigger now', async () => {
    try {
      const res = await api('POST', `${path}/trigger`, {});
      fill(result, 'Execution queued: ', link(res.data.execution_id, 'executions', res.data.execution_id));
    } catch (err) {
      fill(result, errorBox(err));
    }
  }, { class: 'primary' });
}

/** Edit and (confirmed) Delete for a detail page; a delete returns to the list. */
export function editAndDelete(section, noun, id) {
  return [
    h('a', { class: 'button', href: hashPath(section, id, 'edit') }, 'Edit'),
    confirmButton('Delete', `Delete this ${noun}`, async () => {
      await api('DELETE', `/${section}/${encodeURIComponent(id)}`);
      toast(`${noun[0].toUpperCase()}${noun.slice(1)} deleted`);
      location.hash = hashPath(section);
    }, { class: 'danger' }),
  ];
}

/** Pause or Resume, whichever applies, for a monitor or an endpoint; `after()` redraws the page. */
export function pauseResumeButton(path, paused, result, after, { pausedText, resumedText }) {
  return button(paused ? 'Resume' : 'Pause', async () => {
    try {
      await api('POST', `${path}/${paused ? 'resume' : 'pause'}`);
      toast(paused ? resumedText : pausedText);
      await after();
    } catch (err) {
      fill(result, errorBox(err));
    }
  }, { class: paused ? 'primary' : null });
}
