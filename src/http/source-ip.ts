import type { IncomingMessage } from 'node:http';

const plainIp = (ip: string) => (ip.startsWith('::ffff:') ? ip.slice(7) : ip);
const isLoopback = (ip: string) => {
  const plain = plainIp(ip);
  return plain === '::1' || plain.startsWith('127.');
};

/**
 * The sender's address, for requests served outside express: like express's `req.ip`
 * with `trust proxy: loopback`, a local proxy's X-Forwarded-For is believed (the
 * nearest hop that is not loopback, else the furthest). `plain`: an IPv4-mapped
 * address loses its `::ffff:` prefix (the inbound receiver's form); without it the
 * address is as express gives it (the ping routes' form, kept since pings began).
 */
export function sourceIp(req: IncomingMessage, plain = true): string | null {
  const form = (ip: string) => (plain ? plainIp(ip) : ip);
  const remote = req.socket.remoteAddress ?? null;
  const forwarded = req.headers['x-forwarded-for'];
  if (!remote || !isLoopback(remote) || typeof forwarded !== 'string') return remote === null ? null : form(remote);
  const hops = forwarded.split(',').map((s) => s.trim()).filter((s) => plainIp(s) !== '');
  for (let i = hops.length - 1; i >= 0; i--) if (!isLoopback(hops[i]!)) return form(hops[i]!);
  return form(hops[0] ?? remote);
}
