// Sign-in: the key is checked against the API (GET /organization) before it is kept.
import { api, ApiError } from '../api.js';
import { fill, h } from '../dom.js';
import { keepKey, looksLikeKey } from '../session.js';

export function signInPage(main, onSignedIn) {
  const input = h('input', {
    id: 'api-key', name: 'api_key', type: 'password', required: true, autocomplete: 'off', spellcheck: 'false',
    placeholder: 'pk_….sk_…', 'aria-describedby': 'api-key-help api-key-err',
  });
  const error = h('p', { class: 'field-error', id: 'api-key-err', hidden: true });
  const submit = h('button', { type: 'submit', class: 'primary' }, 'Sign in');
  const fail = (message) => {
    error.textContent = message;
    error.hidden = false;
    input.setAttribute('aria-invalid', 'true');
    input.focus();
  };
  const form = h('form', { class: 'form sign-in', novalidate: true },
    h('div', { class: 'field' },
      h('label', { for: 'api-key' }, 'API key'),
      input,
      h('p', { class: 'help', id: 'api-key-help' },
        'The key printed by the first ', h('code', {}, 'npm start'), ' or by ', h('code', {}, 'npx jetcron key create --org ORG_ID'),
        '. It is kept in this tab only and sent as the bearer token.'),
      error),
    h('div', { class: 'form-actions' }, submit));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const key = input.value.trim();
    if (!looksLikeKey(key)) return fail('An API key looks like pk_….sk_… (both parts).');
    submit.disabled = true;
    try {
      await api('GET', '/organization', undefined, { key });
      keepKey(key);
      onSignedIn();
    } catch (err) {
      fail(err instanceof ApiError && err.status === 401 ? 'This key is not valid (unknown, revoked or mistyped).' : (err?.message ?? String(err)));
    } finally {
      submit.disabled = false;
    }
  });
  fill(main, h('section', { class: 'sign-in-page' }, h('h1', {}, 'Sign in to jetcron'), form));
  input.focus();
}
