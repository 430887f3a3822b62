// Hash routes: `#/executions/exe_…`, `#/executions?status=failed`. The hash never holds
// the key; it holds only where the user is, so links and the back button work.

/** `#/a/b?x=1` → { path: ['a', 'b'], query: URLSearchParams }. */
export function parseHash(hash) {
  const raw = hash.replace(/^#\/?/, '');
  const [pathPart = '', queryPart = ''] = raw.split('?', 2);
  const path = pathPart.split('/').filter(Boolean).map((p) => {
    try {
      return decodeURIComponent(p);
    } catch {
      return p;
    }
  });
  return { path, query: new URLSearchParams(queryPart) };
}

/**
 * Matches `path` against patterns such as ['tasks', ':id', 'edit'].
 * Returns the route and its params, or null.
 */
export function matchRoute(routes, path) {
  for (const route of routes) {
    if (route.pattern.length !== path.length) continue;
    const params = {};
    const ok = route.pattern.every((seg, i) => {
      if (seg.startsWith(':')) {
        params[seg.slice(1)] = path[i];
        return true;
      }
      return seg === path[i];
    });
    if (ok) return { route, params };
  }
  return null;
}

/** `#/path?query` from a path and query parameters, leaving out empty values. */
export function hashWith(path, params = {}) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  const s = q.toString();
  return `#/${path.map(encodeURIComponent).join('/')}${s ? `?${s}` : ''}`;
}
