// A stored body shown three ways: as text, as pretty-printed JSON when it parses, and
// as a hex dump (the only view of a binary body).
import { button, fill, h, pre } from './dom.js';

/** base64 → bytes. */
export function base64Bytes(b64) {
  const bin = atob(b64);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  return bytes;
}

/** `offset  hex bytes  ascii`, 16 bytes a line, at most `maxBytes`. */
export function hexDump(bytes, maxBytes = 64 * 1024) {
  const lines = [];
  const n = Math.min(bytes.length, maxBytes);
  for (let off = 0; off < n; off += 16) {
    const chunk = bytes.subarray(off, Math.min(off + 16, n));
    const hex = [...chunk].map((b) => b.toString(16).padStart(2, '0')).join(' ');
    const ascii = [...chunk].map((b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : '.')).join('');
    lines.push(`${off.toString(16).padStart(8, '0')}  ${hex.padEnd(47)}  ${ascii}`);
  }
  if (bytes.length > n) lines.push(`… ${bytes.length - n} more bytes`);
  return lines.join('\n');
}

export function prettyJson(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return null;
  }
}

/**
 * `body` is text (encoding 'utf8') or base64 (encoding 'base64'). Shows the best view
 * first, with buttons for the others.
 */
export function bodyView(body, encoding = 'utf8', label = 'Body') {
  if (body === null || body === undefined || body === '') return h('p', { class: 'muted' }, `${label}: empty`);
  const binary = encoding === 'base64';
  const bytes = binary ? base64Bytes(body) : new TextEncoder().encode(body);
  const views = [];
  if (!binary) {
    const json = prettyJson(body);
    if (json !== null) views.push(['JSON', json]);
    views.push(['Text', body]);
  }
  views.push(['Hex', hexDump(bytes)]);
  const area = h('div', { class: 'body-area' });
  const tabs = h('div', { class: 'tabs', role: 'group', 'aria-label': `${label} view` });
  const show = (i) => {
    fill(area, pre(views[i][1], views[i][0] === 'Hex' ? 'hex' : ''));
    for (const [j, b] of [...tabs.children].entries()) b.setAttribute('aria-pressed', String(i === j));
  };
  views.forEach(([name], i) => tabs.appendChild(button(name, () => show(i), { 'aria-pressed': 'false', class: 'tab', dataset: { view: name.toLowerCase() } })));
  show(0);
  return h('div', { class: 'body-view' },
    h('div', { class: 'body-head' }, h('span', { class: 'muted' }, `${label}: ${bytes.length} bytes${binary ? ', binary' : ''}`), tabs),
    area);
}
