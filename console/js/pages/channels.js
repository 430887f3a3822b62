// Notification channels: list, detail with "Send test" and the last delivery, and a
// create/edit form whose config fields follow the chosen kind. The kinds and their
// fields come from the service's own OpenAPI document (the same JSON Schemas the API
// validates with), so the console holds no second copy of them.
import { api, ApiError } from '../api.js';
import { badge, button, confirmButton, errorBox, facts, fill, h, hashPath, link, pageHead, time, toast } from '../dom.js';
import { getData, listPage } from './common.js';

const KIND_LABELS = {
  email: 'Email', webhook: 'Webhook (signed JSON)', slack: 'Slack', mattermost: 'Mattermost', google_chat: 'Google Chat', discord: 'Discord',
  teams: 'Microsoft Teams (Workflows)', telegram: 'Telegram', ntfy: 'ntfy', pagerduty: 'PagerDuty', opsgenie: 'Opsgenie', pushover: 'Pushover', gotify: 'Gotify',
};
const kindLabel = (kind) => KIND_LABELS[kind] ?? kind;

let schemaPromise = null;
/** The kinds, each kind's config fields ({name, required, secret, description, values}) and the events, from /openapi.json. */
export function channelSchema() {
  schemaPromise ??= fetch('/api/v1/openapi.json', { credentials: 'omit', cache: 'no-store' })
    .then((res) => res.json())
    .then((doc) => schemaOf(doc.components.schemas.CreateChannel))
    .catch((err) => {
      schemaPromise = null;
      throw err;
    });
  return schemaPromise;
}

/** A field's schema may be `{anyOf: [schema, {type: 'null'}]}` (optional) or a number-or-text `anyOf`. */
const plainOf = (s) => (s.anyOf ? s.anyOf.find((x) => x.type !== 'null' && x.type !== 'integer') ?? s.anyOf[0] : s);

export function schemaOf(create) {
  const kinds = create.properties.kind.enum;
  const events = plainOf(create.properties.events).items.enum;
  const fields = {};
  for (const rule of create.allOf) {
    const kind = rule.if.properties.kind.const;
    const config = rule.then.properties.config;
    fields[kind] = Object.entries(config.properties).map(([name, s]) => {
      const plain = plainOf(s);
      return { name, required: (config.required ?? []).includes(name), secret: Boolean(s.writeOnly ?? plain.writeOnly), description: plain.description ?? s.description ?? '', values: plain.enum ?? null };
    });
  }
  return { kinds, events, fields };
}

function lastDelivery(d) {
  if (!d) return h('span', { class: 'muted' }, 'none yet');
  return h('span', { class: 'last-delivery' }, badge(d.ok ? 'success' : 'failed'), ' ', time(d.at), d.status_code != null ? ` HTTP ${d.status_code}` : '', d.error ? h('span', { class: 'muted wrap' }, ` ${d.error}`) : '');
}

const hears = (c) => (c.events === null ? 'every event' : c.events.join(', '));

export function channelsList(ctx) {
  return listPage(ctx, {
    title: 'Channels',
    newPath: ['channels', 'new'],
    newLabel: 'New channel',
    load: async () => (await api('GET', '/channels')).data,
    empty: 'No channels yet: add one to send failures to Slack, Teams, PagerDuty and more.',
    match: () => false,
    columns: [
      { label: 'Name', cell: (c) => link(c.name, 'channels', c.id) },
      { label: 'Kind', cell: (c) => kindLabel(c.kind) },
      { label: 'Hears', cell: (c) => hears(c) },
      { label: 'Last delivery', cell: (c) => lastDelivery(c.last_delivery) },
    ],
  });
}

/** "Send test": sends now and shows what the receiver said. */
function testButton(id, result, after) {
  return button('Send test', async (event) => {
    const b = event.currentTarget;
    b.disabled = true;
    fill(result, 'Sending…');
    try {
      const { data } = await api('POST', `/channels/${encodeURIComponent(id)}/test`, {});
      fill(result, data.ok
        ? h('p', { class: 'test-result ok' }, badge('success'), ` Delivered${data.status_code != null ? `: HTTP ${data.status_code}` : ''}`)
        : h('p', { class: 'test-result failed' }, badge('failed'), ` Not delivered${data.status_code != null ? `: HTTP ${data.status_code}` : ''}${data.error ? ` (${data.error})` : ''}`));
      await after();
    } catch (err) {
      fill(result, errorBox(err));
    } finally {
      b.disabled = false;
    }
  }, { class: 'primary' });
}

export async function channelDetail(ctx) {
  const id = ctx.params.id;
  const path = `/channels/${encodeURIComponent(id)}`;
  const result = h('div', { class: 'action-result', role: 'status', 'aria-live': 'polite' });
  const body = h('div');
  const draw = async (c) => {
    if (!ctx.alive()) return;
    fill(body,
      facts([
        ['Kind', kindLabel(c.kind)],
        ...Object.entries(c.config).map(([name, value]) => [name, h('code', { class: 'wrap' }, String(value))]),
        ['Hears', hears(c)],
        ['Last delivery', lastDelivery(c.last_delivery)],
        ['Id', h('code', {}, c.id)],
        ['Created', time(c.created_at)],
      ]),
      h('p', { class: 'help' }, 'Secrets (tokens, keys, webhook URLs) are never shown again: *** and their last 4 characters.'));
  };
  const first = await getData(path);
  ctx.setTitle(first.name);
  await draw(first);
  fill(ctx.main,
    pageHead(first.name,
      testButton(id, result, async () => draw(await getData(path))),
      h('a', { class: 'button', href: hashPath('channels', id, 'edit') }, 'Edit'),
      confirmButton('Delete', 'Delete this channel', async () => {
        await api('DELETE', path);
        toast('Channel deleted');
        location.hash = hashPath('channels');
      }, { class: 'danger' })),
    result, body);
}

/**
 * The form: kind, name, the kind's config fields (secrets as password boxes, never
 * filled in: an empty one on an edit keeps the stored value), and the events heard.
 */
async function channelForm(ctx, { current }) {
  const schema = await channelSchema();
  const mode = current ? 'edit' : 'create';
  ctx.setTitle(current ? `Edit ${current.name}` : 'New channel');
  const formError = h('div', { class: 'form-error', role: 'alert', hidden: true, tabindex: '-1' });
  const errors = new Map();
  const fieldBox = (name, label, control, help) => {
    const id = control.id;
    const err = h('p', { class: 'field-error', id: `${id}-err`, hidden: true });
    errors.set(name, { err, control });
    control.setAttribute('aria-describedby', `${id}-err${help ? ` ${id}-help` : ''}`);
    return h('div', { class: 'field', dataset: { field: name } }, h('label', { for: id }, label), control, help ? h('p', { class: 'help', id: `${id}-help` }, help) : null, err);
  };
  const kind = h('select', { id: 'chn-kind', name: 'kind' }, schema.kinds.map((k) => h('option', { value: k, selected: k === (current?.kind ?? 'slack') }, kindLabel(k))));
  const name = h('input', { id: 'chn-name', name: 'name', type: 'text', autocomplete: 'off', value: current?.name ?? '', required: true });
  const configBox = h('fieldset', {}, h('legend', {}, 'Settings'));
  let inputs = new Map();
  const drawConfig = () => {
    for (const key of [...errors.keys()]) if (key.startsWith('config.')) errors.delete(key);
    inputs = new Map();
    const same = current && kind.value === current.kind;
    const fields = schema.fields[kind.value] ?? [];
    fill(configBox, h('legend', {}, `${kindLabel(kind.value)} settings`), fields.map((f) => {
      const id = `chn-config-${f.name}`;
      const stored = same ? current.config[f.name] : undefined;
      const control = f.values
        ? h('select', { id }, [f.required ? null : h('option', { value: '' }, 'default'), ...f.values.map((v) => h('option', { value: v, selected: stored === v }, v))])
        : h('input', {
          id, type: f.secret ? 'password' : 'text', autocomplete: f.secret ? 'new-password' : 'off', value: f.secret ? '' : (stored ?? ''),
          placeholder: f.secret && stored ? `stored (${stored}); leave empty to keep it` : '',
        });
      inputs.set(f.name, { field: f, control, stored: f.secret ? undefined : stored });
      return fieldBox(`config.${f.name}`, `${f.name}${f.required ? ' *' : ''}`, control, f.description);
    }));
  };
  kind.addEventListener('change', drawConfig);
  drawConfig();
  const every = h('input', { type: 'checkbox', id: 'chn-every', checked: !current || current.events === null });
  const eventBoxes = schema.events.map((e) => h('input', { type: 'checkbox', id: `chn-event-${e}`, value: e, checked: current?.events ? current.events.includes(e) : true }));
  const eventsBox = h('fieldset', { class: 'events' }, h('legend', {}, 'Hears'),
    h('div', { class: 'field check' }, every, h('label', { for: 'chn-every' }, 'Every event (today\'s and any added later)')),
    h('div', { class: 'event-list' }, eventBoxes.map((b) => h('span', { class: 'inline' }, b, h('label', { for: b.id }, b.value)))));
  const showEvents = () => eventBoxes.forEach((b) => (b.disabled = every.checked));
  every.addEventListener('change', showEvents);
  showEvents();
  errors.set('events', { err: h('p', { class: 'field-error', hidden: true }), control: every });
  eventsBox.append(errors.get('events').err);

  const submit = h('button', { type: 'submit', class: 'primary' }, current ? 'Save' : 'Create channel');
  const form = h('form', { class: 'form', novalidate: true },
    formError,
    fieldBox('kind', 'Kind', kind), fieldBox('name', 'Name', name), configBox, eventsBox,
    h('div', { class: 'form-actions' }, submit, h('button', { type: 'button', class: 'quiet', onclick: () => (location.hash = current ? hashPath('channels', current.id) : hashPath('channels')) }, 'Cancel')));

  const clear = () => {
    formError.hidden = true;
    for (const { err, control } of errors.values()) {
      err.hidden = true;
      err.textContent = '';
      control.removeAttribute('aria-invalid');
    }
  };
  const show = (message, field) => {
    const slot = field ? errors.get(field) ?? errors.get(String(field).replace(/\[\d+\]$/, '')) : undefined;
    if (slot) {
      slot.err.textContent = message;
      slot.err.hidden = false;
      slot.control.setAttribute('aria-invalid', 'true');
      slot.control.focus();
    } else {
      formError.textContent = message;
      formError.hidden = false;
      formError.focus();
    }
  };
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clear();
    const kindChanged = !current || kind.value !== current.kind;
    const config = {};
    for (const [key, { control, stored }] of inputs) {
      const value = control.value.trim();
      if (value !== '' && (kindChanged || value !== stored)) config[key] = value;
      else if (value === '' && !kindChanged && stored !== undefined) config[key] = null;
    }
    const events = every.checked ? null : eventBoxes.filter((b) => b.checked).map((b) => b.value);
    const payload = {};
    if (kindChanged) payload.kind = kind.value;
    if (!current || name.value.trim() !== current.name) payload.name = name.value.trim();
    if (Object.keys(config).length || !current) payload.config = config;
    if (!current ? events !== null : JSON.stringify(events) !== JSON.stringify(current.events)) payload.events = events;
    submit.disabled = true;
    try {
      const res = current ? await api('PUT', `/channels/${encodeURIComponent(current.id)}`, payload) : await api('POST', '/channels', payload);
      toast(mode === 'edit' ? 'Saved' : 'Created');
      location.hash = hashPath('channels', res.data.id);
    } catch (err) {
      show(err instanceof ApiError ? err.message : err?.message ?? String(err), err instanceof ApiError ? err.field : null);
    } finally {
      submit.disabled = false;
    }
  });
  fill(ctx.main, pageHead(current ? `Edit ${current.name}` : 'New channel'), form);
  (current ? name : kind).focus();
}

export const channelNew = (ctx) => channelForm(ctx, { current: null });
export async function channelEdit(ctx) {
  return channelForm(ctx, { current: await getData(`/channels/${encodeURIComponent(ctx.params.id)}`) });
}
