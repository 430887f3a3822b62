// The API key lives in this tab's sessionStorage only: not in a URL, not in a cookie, gone
// when the tab closes. Every request sends it as the bearer token.
const KEY = 'jetcron.apiKey';

export function currentKey() {
  try {
    return sessionStorage.getItem(KEY);
  } catch {
    return null;
  }
}

export function keepKey(key) {
  sessionStorage.setItem(KEY, key);
}

export function forgetKey() {
  sessionStorage.removeItem(KEY);
}

/** The public part (`pk_…`) of a `pk_….sk_…` key: safe to show. */
export function publicPart(key) {
  return (key ?? '').split('.')[0] ?? '';
}

/** The shape the service accepts; anything else is refused before a request is made. */
export function looksLikeKey(key) {
  return /^pk_[A-Za-z0-9_-]+\.sk_[A-Za-z0-9_-]+$/.test(key);
}
