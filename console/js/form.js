// Create and edit forms built from a list of field specs. Each input has its label and
// its own error slot; the API's 422 names the field at fault (`error.field`, such as
// `cron`, `headers.X-Y` or `forward_urls[1]`) and the message is shown on that field.
import { ApiError } from './api.js';
import { h } from './dom.js';

let formCount = 0;

/**
 * Field spec: { name, label, type, options?, help?, required?, placeholder?, nullable? }
 * type: text | url | email | number | select | checkbox | tristate | textarea | json |
 *       body | headers | lines | secrets | verification | channels (with `load`: the channels to pick from)
 * An item `{ legend, fields }` groups fields in a fieldset.
 */
export function buildForm({ fields, initial = {}, mode = 'create', submitLabel = 'Save', onSubmit, onCancel }) {
  const prefix = `f${++formCount}`;
  const controls = new Map();
  const formError = h('div', { class: 'form-error', role: 'alert', hidden: true });

  const fieldNode = (spec) => {
    const control = makeControl(spec, `${prefix}-${spec.name}`, initial[spec.name]);
    controls.set(spec.name, control);
    return control.node;
  };
  const items = fields.map((item) => (item.legend
    ? h('fieldset', {}, h('legend', {}, item.legend), item.fields.map(fieldNode))
    : fieldNode(item)));

  const submit = h('button', { type: 'submit', class: 'primary' }, submitLabel);
  const form = h('form', { class: 'form', novalidate: true, 'aria-describedby': `${prefix}-error` },
    formError, items,
    h('div', { class: 'form-actions' }, submit, onCancel ? h('button', { type: 'button', class: 'quiet', onclick: onCancel }, 'Cancel') : null));
  formError.id = `${prefix}-error`;

  // Edit forms send only what changed, so an untouched field is never rewritten.
  const baseline = mode === 'edit' ? collectAll(controls, () => {}) : null;

  const clearErrors = () => {
    formError.hidden = true;
    formError.textContent = '';
    for (const c of controls.values()) c.setError(null);
  };

  /** Shows `message` on the field the API (or the form itself) names; elsewhere at the top. */
  const showError = (message, field) => {
    const top = field ? String(field).split(/[.[]/)[0] : null;
    const control = top ? controls.get(top) : undefined;
    if (control) {
      control.setError(message);
      control.focus();
      return;
    }
    formError.textContent = message;
    formError.hidden = false;
    formError.focus?.();
  };

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearErrors();
    let problem = null;
    const values = collectAll(controls, (message, field) => {
      problem ??= { message, field };
    });
    if (problem) return showError(problem.message, problem.field);
    const payload = {};
    for (const [name, value] of Object.entries(values)) {
      if (baseline) {
        if (JSON.stringify(value) !== JSON.stringify(baseline[name])) payload[name] = value;
      } else if (value !== null && value !== undefined) {
        payload[name] = value;
      }
    }
    submit.disabled = true;
    try {
      await onSubmit(payload);
    } catch (err) {
      if (err instanceof ApiError) showError(err.message, err.field);
      else showError(err?.message ?? String(err), null);
    } finally {
      submit.disabled = false;
    }
  });
  formError.tabIndex = -1;
  return form;
}

function collectAll(controls, onProblem) {
  const values = {};
  for (const [name, control] of controls) {
    const value = control.read((message) => onProblem(message, name));
    if (value !== undefined) values[name] = value;
  }
  return values;
}

function makeControl(spec, id, initialValue) {
  const errorId = `${id}-err`;
  const helpId = `${id}-help`;
  const error = h('p', { class: 'field-error', id: errorId, hidden: true });
  const help = spec.help ? h('p', { class: 'help', id: helpId }, spec.help) : null;
  const describedBy = [help ? helpId : null, errorId].filter(Boolean).join(' ');
  const common = { id, name: spec.name, 'aria-describedby': describedBy, required: spec.required ?? false, placeholder: spec.placeholder };
  let input;
  let extra = null;
  let read;

  switch (spec.type) {
    case 'checkbox': {
      input = h('input', { ...common, type: 'checkbox', checked: initialValue ?? spec.default ?? false });
      read = () => input.checked;
      break;
    }
    case 'tristate':
    case 'select': {
      const options = spec.type === 'tristate'
        ? [['', spec.inheritLabel ?? 'Organization default'], ['true', 'Yes'], ['false', 'No']]
        : spec.options;
      const current = initialValue === null || initialValue === undefined ? (spec.default ?? '') : String(initialValue);
      input = h('select', common, options.map(([value, label]) => h('option', { value, selected: value === current }, label)));
      read = () => {
        const v = input.value;
        if (spec.type === 'tristate') return v === '' ? null : v === 'true';
        return v === '' ? null : v;
      };
      break;
    }
    case 'number': {
      input = h('input', { ...common, type: 'number', inputmode: 'numeric', step: '1', value: initialValue ?? '' });
      read = (fail) => {
        const raw = input.value.trim();
        if (raw === '') return null;
        const n = Number(raw);
        if (!Number.isInteger(n)) return fail(`${spec.label} must be a whole number`);
        return n;
      };
      break;
    }
    case 'textarea':
    case 'json':
    case 'headers':
    case 'lines':
    case 'secrets':
    case 'body': {
      input = h('textarea', { ...common, rows: spec.rows ?? 4, spellcheck: 'false', value: textOf(spec.type, initialValue) });
      if (spec.type === 'body') {
        const isJson = initialValue !== null && typeof initialValue === 'object';
        const box = h('input', { type: 'checkbox', id: `${id}-json`, checked: isJson });
        extra = h('label', { class: 'inline', for: `${id}-json` }, box, ' Send as JSON (an object or array)');
        read = (fail) => {
          const raw = input.value;
          if (raw.trim() === '') return null;
          if (!box.checked) return raw;
          try {
            const parsed = JSON.parse(raw);
            if (parsed === null || typeof parsed !== 'object') return fail(`${spec.label} must be a JSON object or array`);
            return parsed;
          } catch (err) {
            return fail(`${spec.label} is not valid JSON: ${err.message}`);
          }
        };
      } else {
        read = (fail) => parseText(spec, input.value, fail);
      }
      break;
    }
    case 'verification': {
      ({ input, extra, read } = verificationInputs(spec, id, common, initialValue));
      break;
    }
    case 'channels': {
      ({ input, extra, read } = channelInputs(spec, id, common, initialValue));
      break;
    }
    default: {
      input = h('input', { ...common, type: spec.type ?? 'text', value: initialValue ?? '', autocomplete: 'off' });
      read = () => {
        const v = input.value.trim();
        return v === '' ? null : v;
      };
    }
  }

  // The required mark sits beside the label, not in it: the field's name stays its label.
  const labelEl = h('label', { for: id }, spec.label);
  const head = spec.required ? h('span', { class: 'label-row' }, labelEl, h('span', { class: 'req', 'aria-hidden': 'true' }, '*')) : labelEl;
  const node = spec.type === 'checkbox'
    ? h('div', { class: 'field check', dataset: { field: spec.name } }, input, labelEl, help, error)
    : h('div', { class: 'field', dataset: { field: spec.name } }, head, input, extra, help, error);

  return {
    node,
    read: (fail) => {
      let failed = false;
      const value = read((message) => {
        failed = true;
        fail(message);
      });
      return failed ? undefined : value;
    },
    setError(message) {
      if (message) {
        error.textContent = message;
        error.hidden = false;
        input.setAttribute('aria-invalid', 'true');
        node.classList.add('invalid');
      } else {
        error.textContent = '';
        error.hidden = true;
        input.removeAttribute('aria-invalid');
        node.classList.remove('invalid');
      }
    },
    focus: () => input.focus(),
  };
}

function textOf(type, value) {
  if (value === null || value === undefined) return '';
  switch (type) {
    case 'headers':
      return Object.entries(value).map(([k, v]) => `${k}: ${v}`).join('\n');
    case 'lines':
      return Array.isArray(value) ? value.join('\n') : String(value);
    case 'secrets':
      return '';
    case 'json':
    case 'body':
      return typeof value === 'string' ? value : JSON.stringify(value, null, 2);
    default:
      return String(value);
  }
}

function parseText(spec, raw, fail) {
  const lines = raw.split('\n').map((l) => l.trim()).filter((l) => l !== '');
  switch (spec.type) {
    case 'headers': {
      if (lines.length === 0) return spec.nullable ? null : {};
      const out = {};
      for (const line of lines) {
        const colon = line.indexOf(':');
        if (colon <= 0) return fail(`${spec.label}: write one header per line as "Name: value" ("${line}")`);
        out[line.slice(0, colon).trim()] = line.slice(colon + 1).trim();
      }
      return out;
    }
    case 'secrets': {
      // Write-only: an empty box leaves the stored secrets as they are.
      if (lines.length === 0) return undefined;
      const out = {};
      for (const line of lines) {
        const eq = line.indexOf('=');
        if (eq <= 0) return fail(`${spec.label}: write one secret per line as NAME=value`);
        out[line.slice(0, eq).trim()] = line.slice(eq + 1);
      }
      return out;
    }
    case 'lines':
      return lines;
    case 'json': {
      if (raw.trim() === '') return null;
      try {
        return JSON.parse(raw);
      } catch (err) {
        return fail(`${spec.label} is not valid JSON: ${err.message}`);
      }
    }
    default:
      return raw === '' ? null : raw;
  }
}

const PRESETS = [['', 'None'], ['standard-webhooks', 'Standard Webhooks / Svix'], ['stripe', 'Stripe'], ['github', 'GitHub'], ['shopify', 'Shopify'], ['hmac', 'Generic HMAC']];
const HMAC_ONLY = ['header', 'algorithm', 'encoding', 'prefix'];

/**
 * An inbound verification preset: its type (the field's own input), a password box for
 * the secret, never filled in (the API never returns it), and the generic HMAC's
 * header, algorithm, encoding and prefix, shown for that type only. An unchanged preset
 * with an empty secret box reads as it was, so an edit leaves it alone; a changed one
 * needs its secret again (the API's 422 on `verification.secret` says so).
 */
function verificationInputs(spec, id, common, initial) {
  const current = initial ?? {};
  const input = h('select', common, PRESETS.map(([value, label]) => h('option', { value, selected: value === (current.type ?? '') }, label)));
  const labelled = (name, label, control) => h('div', { class: 'field', dataset: { field: `${spec.name}.${name}` } }, h('label', { for: `${id}-${name}` }, label), control);
  const secret = h('input', { id: `${id}-secret`, type: 'password', autocomplete: 'new-password', value: '', placeholder: initial ? 'stored; leave empty to keep it' : '' });
  const choose = (name, options) => h('select', { id: `${id}-${name}` }, options.map((o) => h('option', { value: o, selected: o === (current[name] ?? options[0]) }, o)));
  const hmac = {
    header: h('input', { id: `${id}-header`, type: 'text', autocomplete: 'off', value: current.header ?? '', placeholder: 'X-Signature' }),
    algorithm: choose('algorithm', ['sha256', 'sha1']),
    encoding: choose('encoding', ['hex', 'base64']),
    prefix: h('input', { id: `${id}-prefix`, type: 'text', autocomplete: 'off', value: current.prefix ?? '', placeholder: 'e.g. sha256= (optional)' }),
  };
  const hmacBox = h('div', { class: 'hmac-fields' },
    labelled('header', 'Signature header', hmac.header), labelled('algorithm', 'Algorithm', hmac.algorithm),
    labelled('encoding', 'Encoding', hmac.encoding), labelled('prefix', 'Prefix', hmac.prefix));
  const secretBox = labelled('secret', 'Secret (write-only, never shown again)', secret);
  const show = () => {
    secretBox.hidden = input.value === '';
    hmacBox.hidden = input.value !== 'hmac';
  };
  input.addEventListener('change', show);
  show();
  const read = () => {
    const type = input.value;
    if (type === '') return null;
    const preset = { type };
    if (type === 'hmac') {
      for (const name of HMAC_ONLY) {
        const v = hmac[name].value.trim();
        if (v !== '') preset[name] = v;
      }
    }
    if (secret.value !== '') preset.secret = secret.value;
    return preset;
  };
  return { input, extra: h('div', { class: 'subfields' }, secretBox, hmacBox), read };
}

/**
 * A resource's `channels`: every channel of the organization (null) or the ones checked
 * (a list, maybe empty: none). The channels to pick from come from `spec.load()`, after
 * the form is drawn; until then (or should loading fail) the choice reads as it was, so
 * an edit leaves it alone.
 */
function channelInputs(spec, id, common, initial) {
  const chosen = new Set(Array.isArray(initial) ? initial : []);
  const input = h('select', common,
    h('option', { value: 'all', selected: !Array.isArray(initial) }, 'Every channel of the organization'),
    h('option', { value: 'some', selected: Array.isArray(initial) }, 'Only the channels checked below'));
  const picks = h('div', { class: 'channel-picks', role: 'group', 'aria-label': `${spec.label}: which` }, h('p', { class: 'muted' }, 'Loading channels…'));
  let boxes = null;
  const show = () => {
    picks.hidden = input.value !== 'some';
  };
  input.addEventListener('change', show);
  show();
  Promise.resolve(spec.load?.() ?? []).then((channels) => {
    boxes = channels.map((c) => ({ id: c.id, box: h('input', { type: 'checkbox', id: `${id}-${c.id}`, value: c.id, checked: chosen.has(c.id) }), c }));
    picks.replaceChildren(...(boxes.length
      ? boxes.map(({ box, c }) => h('label', { class: 'inline', for: box.id }, box, ` ${c.name} (${c.kind})`))
      : [h('p', { class: 'muted' }, 'No channels yet: checked none, this notifies no channel.')]));
  }, () => {
    picks.replaceChildren(h('p', { class: 'muted' }, 'The channels could not be loaded: the choice stays as it was.'));
  });
  const read = () => {
    if (input.value === 'all') return null;
    if (!boxes) return [...chosen];
    return boxes.filter(({ box }) => box.checked).map(({ id: channelId }) => channelId);
  };
  return { input, extra: picks, read };
}
