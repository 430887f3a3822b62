/** A resource's name when none is given: its URL's host and path, at most 255 characters. */
export function nameFromUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.host}${u.pathname === '/' ? '' : u.pathname}`.slice(0, 255);
  } catch {
    return url.slice(0, 255);
  }
}
