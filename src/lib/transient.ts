/**
 * Tells a failure that may pass on its own (a store unreachable, a timeout, a lock)
 * from one that will happen again for the same input (bad data, a bug). Consumers
 * retry the first kind forever and give up on the second after a few tries, so the
 * classification errs towards "transient" only for errors known to be.
 */

// SQLSTATE classes and codes of a Postgres that is unreachable, restarting, busy or
// refusing sessions (a database closed to connections, credentials being rotated):
// none of them says anything about the event being applied.
const PG_TRANSIENT_CLASSES = ['08', '28', '53', '57', '58'];
const PG_TRANSIENT_CODES = new Set(['40001', '40P01', '55P03', '55006', '55000', '3D000'])

const NODE_TRANSIENT_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH',
  'ENOTFOUND', 'EAI_AGAIN', 'EADDRNOTAVAIL',
]);

// nats.js names (v3): the request timed out, nobody answered, the connection is gone or draining;
// and ours: a guarded append that lost to a concurrent writer passes once it re-reads.
/** Ours: the script engine had no worker for a call (src/scripts/engine.ts, src/inbound/pipeline.ts); try again. */
const OWN_TRANSIENT_NAMES = new Set(['ScriptsUnavailableError', 'ScriptEngineUnavailableError']);
const NATS_TRANSIENT_NAMES = new Set([
  'ConcurrencyError',
  'TimeoutError', 'NoRespondersError', 'ClosedConnectionError', 'ConnectionError', 'DrainingConnectionError', 'RequestError',
]);

const TRANSIENT_MESSAGES = [
  /connection (terminated|ended|closed|refused|reset)/i,
  /timeout exceeded when trying to connect/i,
  /Client has encountered a connection error/i,
  /Connection terminated/i,
  /no responders/i,
  /\btimeout\b/i,
  /status 503/i,
  /no JetStream ack within|publisher closed|JetStream refused the message: (stream|cluster|leader)|temporarily unavailable/i,
  /JetStream (not enabled|unavailable|is not ready)/i,
  /cluster not ready|leader|no suitable peers|insufficient resources/i,
];

export function isTransient(err: unknown, depth = 0): boolean {
  if (!err || typeof err !== 'object' || depth > 4) return false;
  const e = err as { code?: unknown; name?: unknown; message?: unknown; cause?: unknown; errors?: unknown };
  const code = typeof e.code === 'string' ? e.code : '';
  if (/^[0-9A-Z]{5}$/.test(code) && (PG_TRANSIENT_CLASSES.includes(code.slice(0, 2)) || PG_TRANSIENT_CODES.has(code))) return true;
  if (NODE_TRANSIENT_CODES.has(code)) return true;
  if (typeof e.name === 'string' && (NATS_TRANSIENT_NAMES.has(e.name) || OWN_TRANSIENT_NAMES.has(e.name))) return true;
  const message = typeof e.message === 'string' ? e.message : '';
  if (TRANSIENT_MESSAGES.some((re) => re.test(message))) return true;
  if (Array.isArray(e.errors) && e.errors.some((inner) => isTransient(inner, depth + 1))) return true;
  return isTransient(e.cause, depth + 1);
}

/** One line for logs and failure records: the message and, for Postgres, its SQLSTATE. */
export function describeError(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const code = (err as { code?: unknown }).code;
  const text = `${err.name === 'Error' ? '' : `${err.name}: `}${err.message}`;
  return (typeof code === 'string' && code ? `${text} (${code})` : text).slice(0, 2000);
}
