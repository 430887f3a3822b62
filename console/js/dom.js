// Every node is built with DOM APIs and every string goes in as text: data from the API
// (names, URLs, bodies, headers) can never become markup, whatever it contains.

/**
 * h('a', { href: '#/tasks', class: 'x', onclick: fn }, 'text', child, [more]) → element.
 * Attributes whose value is null, undefined or false are left out; `true` sets an empty one.
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs ?? {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') el.addEventListener(name.slice(2), value);
    else if (name === 'dataset') Object.assign(el.dataset, value);
    else if (name === 'value' && 'value' in el) el.value = String(value);
    else if (name === 'checked' && 'checked' in el) el.checked = Boolean(value);
    else el.setAttribute(name, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else if (child instanceof Node) el.appendChild(child);
    else el.appendChild(document.createTextNode(String(child)));
  }
}

/** Replaces an element's children. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

const SVG_NS = 'http://www.w3.org/2000/svg';
/** An SVG element; attributes only (SVG here carries no text from the API but through <title> text nodes). */
export function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs)) if (value !== null && value !== undefined) el.setAttribute(name, String(value));
  append(el, children);
  return el;
}

/** A link inside the console. `parts` are joined as path segments, each encoded. */
export function link(text, ...parts) {
  return h('a', { href: hashPath(...parts) }, text);
}

export function hashPath(...parts) {
  return `#/${parts.map((p) => encodeURIComponent(String(p))).join('/')}`;
}

export function formatTime(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return d.toLocaleString(undefined, { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit' });
}

/** A `<time>` with the local time and the ISO instant as its machine value and tooltip. */
export function time(iso) {
  if (!iso) return h('span', { class: 'muted' }, '—');
  return h('time', { datetime: iso, title: iso }, formatTime(iso));
}

export function relative(iso, nowMs = Date.now()) {
  if (!iso) return '';
  const diff = new Date(iso).getTime() - nowMs;
  const abs = Math.abs(diff);
  const units = [['d', 86_400_000], ['h', 3_600_000], ['m', 60_000], ['s', 1000]];
  const [unit, ms] = units.find(([, size]) => abs >= size) ?? ['s', 1000];
  const n = Math.round(abs / ms);
  return diff >= 0 ? `in ${n}${unit}` : `${n}${unit} ago`;
}

/** A status word as a coloured badge (the colour comes from the class, the meaning from the text). */
export function badge(status) {
  const word = status ?? 'unknown';
  return h('span', { class: `badge s-${String(word).replace(/[^a-z_]/gi, '')}` }, word);
}

export function duration(ms) {
  if (ms === null || ms === undefined) return '—';
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
}

/**
 * A table: `columns` = [{ label, cell: (row) => node|string, class? }]. Wrapped so a
 * wide table scrolls inside its box on a phone instead of widening the page.
 */
export function table(columns, rows, { caption, empty = 'Nothing yet.', label } = {}) {
  if (rows.length === 0) return h('p', { class: 'empty' }, empty);
  return h('div', { class: 'table-wrap', role: 'region', 'aria-label': label ?? caption ?? 'table', tabindex: '0' },
    h('table', {},
      caption ? h('caption', {}, caption) : null,
      h('thead', {}, h('tr', {}, columns.map((c) => h('th', { scope: 'col', class: c.class }, c.label)))),
      h('tbody', {}, rows.map((row) => h('tr', {}, columns.map((c) => h('td', { class: c.class, 'data-label': c.label }, c.cell(row))))))));
}

/** A definition list of [term, value] pairs; values that are null show as a dash. */
export function facts(pairs) {
  return h('dl', { class: 'facts' }, pairs.filter(Boolean).map(([term, value]) => [
    h('dt', {}, term),
    h('dd', {}, value === null || value === undefined || value === '' ? h('span', { class: 'muted' }, '—') : value),
  ]));
}

/** Header name → value pairs as a two-column table. */
export function headersTable(headers, caption) {
  const rows = Object.entries(headers ?? {});
  return table([
    { label: 'Header', cell: ([k]) => h('code', {}, k) },
    { label: 'Value', cell: ([, v]) => h('code', { class: 'wrap' }, Array.isArray(v) ? v.join(', ') : String(v)) },
  ], rows, { caption, empty: 'No headers.', label: caption });
}

export function pre(text, cls = '') {
  return h('pre', { class: `block ${cls}`, tabindex: '0' }, text);
}

/** A page heading with actions beside it. */
export function pageHead(title, ...actions) {
  return h('div', { class: 'page-head' }, h('h1', {}, title), h('div', { class: 'actions' }, actions));
}

export function button(text, onclick, attrs = {}) {
  return h('button', { type: 'button', ...attrs, onclick }, text);
}

/**
 * A button that asks again before acting: the first press turns it into "Confirm" and
 * "Cancel" (no window.confirm, which a keyboard user and a test both handle worse).
 */
export function confirmButton(text, confirmText, action, attrs = {}) {
  const wrap = h('span', { class: 'confirm' });
  const initial = () => fill(wrap, button(text, ask, attrs));
  const ask = () => {
    const yes = button(confirmText, async () => {
      yes.disabled = true;
      try {
        await action();
      } catch (err) {
        toast(err?.message ?? String(err), 'error');
      } finally {
        if (wrap.isConnected) initial();
      }
    }, { class: 'danger' });
    fill(wrap, yes, button('Cancel', () => {
      initial();
      wrap.querySelector('button')?.focus();
    }, { class: 'quiet' }));
    yes.focus();
  };
  initial();
  return wrap;
}

/** A short message in the page's live region. */
export function toast(message, kind = 'info') {
  const el = document.getElementById('toast');
  if (!el) return;
  el.dataset.kind = kind;
  el.textContent = message;
  el.classList.add('shown');
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => el.classList.remove('shown'), 5000);
}

export function errorBox(err) {
  return h('div', { class: 'error-box', role: 'alert' }, err?.message ?? String(err));
}

/** A value anyone may want to copy (a ping URL, an inbound URL). */
export function copyable(text, label) {
  const field = h('input', { type: 'text', readonly: true, value: text, 'aria-label': label, class: 'copy-field' });
  return h('span', { class: 'copyable' }, field, button('Copy', async () => {
    try {
      await navigator.clipboard.writeText(text);
      toast(`${label} copied`);
    } catch {
      field.select();
    }
  }, { class: 'quiet', 'aria-label': `Copy ${label}` }));
}
