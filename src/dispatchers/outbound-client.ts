import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { isIP } from 'node:net';
import { Agent, type Dispatcher } from 'undici';
import { isForbiddenAddress } from './address-guard.ts';
import type { OutboundResult } from '../commands/execution/exchange.ts';

export interface OutboundRequest {
  url: string;
  method: string;
  headers: Record<string, string>;
  body?: string | Buffer | undefined;
  timeoutMs: number;
  /**
   * Asked at the last moment before the request's first byte is written (once it has
   * a socket): false drops it unsent and the send rejects with NotSent. A partition
   * owner's fence: a process frozen anywhere between planning a send and writing it
   * (a pause, a SIGSTOP, a slow connect) must not write once its lease has lapsed.
   */
  mayWrite?: (() => boolean) | undefined;
}

/** The request was dropped before any of it was written: its `mayWrite` said no. */
export class NotSent extends Error {
  constructor() {
    super('not sent: the sender may no longer write');
  }
}

export interface OutboundClient {
  send(req: OutboundRequest): Promise<OutboundResult>;
  close(): Promise<void>;
}

export interface OutboundClientOptions {
  allowPrivateTargets: boolean;
  maxResponseBytes?: number | undefined;
  connectionsPerOrigin?: number | undefined;
}

export const DEFAULT_MAX_RESPONSE_BYTES = 262_144;
const DEFAULT_CONNECTIONS_PER_ORIGIN = 128;
const MAX_TIMER_MS = 2_147_483_647;

class RefusedTargetError extends Error {
  readonly code = 'JETCRON_REFUSED_TARGET';
  constructor(address: string) {
    super(
      `target address ${address} is private, loopback, link-local or metadata; refused (set JETCRON_ALLOW_PRIVATE_TARGETS=1 to allow)`,
    );
  }
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

// Runs inside net.connect for every new connection, so the check applies to the address
// actually dialled: a DNS answer that flips to a private address (rebinding) is refused too.
function guardedLookup(hostname: string, options: LookupOptions, callback: LookupCallback): void {
  dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err) return callback(err, '');
    const first = addresses[0];
    if (first === undefined) {
      return callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }), '');
    }
    for (const a of addresses) {
      if (isForbiddenAddress(a.address)) return callback(new RefusedTargetError(a.address), '');
    }
    if (options.all) callback(null, addresses);
    else callback(null, first.address, first.family);
  });
}

// Shared abort reasons: the handler has already settled when these reach onError.
const TIMED_OUT = new Error('jetcron outbound timeout');
const TRUNCATED = new Error('jetcron response truncated');
const NOT_SENT = new Error('jetcron request not sent');

function flattenHeaders(raw: Buffer[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = (raw[i] as Buffer).toString('latin1').toLowerCase();
    if (name === '__proto__') continue;
    const value = (raw[i + 1] as Buffer).toString('utf8');
    const prev = out[name];
    out[name] = prev === undefined ? value : `${prev}, ${value}`;
  }
  return out;
}

function errorMessage(err: unknown): { code: string | undefined; message: string } {
  const e = err as { code?: unknown; message?: unknown; errors?: unknown };
  const code = typeof e?.code === 'string' ? e.code : undefined;
  let message = typeof e?.message === 'string' ? e.message : String(err);
  // Node's happy-eyeballs connect failure is an AggregateError with an empty message.
  if (message === '' && Array.isArray(e.errors)) {
    message = e.errors.map((x: { message?: unknown }) => String(x?.message ?? x)).join('; ');
  }
  if (message === '') message = code ?? 'connection failed';
  if (code !== undefined && !message.includes(code)) message = `${message} (${code})`;
  return { code, message };
}

class Exchange implements Dispatcher.DispatchHandlers {
  private abort: ((err?: Error) => void) | undefined = undefined;
  private timer: NodeJS.Timeout | undefined = undefined;
  private settled = false;
  private statusCode = 0;
  private headers: Record<string, string> = {};
  private chunks: Buffer[] = [];
  private bytes = 0;
  private readonly startMs = Date.now();

  private readonly resolve: (r: OutboundResult) => void;
  private readonly reject: (err: Error) => void;
  private readonly maxBytes: number;
  private readonly timeoutMs: number;
  private readonly mayWrite: (() => boolean) | undefined;

  constructor(resolve: (r: OutboundResult) => void, reject: (err: Error) => void, maxBytes: number, timeoutMs: number, mayWrite: (() => boolean) | undefined) {
    this.resolve = resolve;
    this.reject = reject;
    this.maxBytes = maxBytes;
    this.timeoutMs = timeoutMs;
    this.mayWrite = mayWrite;
  }

  start(): void {
    this.timer = setTimeout(onTimer, Math.min(Math.max(this.timeoutMs, 1), MAX_TIMER_MS), this);
  }

  fireTimeout(): void {
    if (this.settled) return;
    this.fail('timeout', `timed out after ${this.timeoutMs} ms`);
    this.abort?.(TIMED_OUT);
  }

  onConnect(abort: (err?: Error) => void): void {
    // Timed out while queued or connecting: drop the request as soon as it has a socket.
    if (this.settled) return abort(TIMED_OUT);
    // undici writes the request right after this returns, unless it was aborted here.
    if (this.mayWrite && !this.mayWrite()) {
      this.settled = true;
      clearTimeout(this.timer);
      this.reject(new NotSent());
      return abort(NOT_SENT);
    }
    this.abort = abort;
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[]): boolean {
    if (statusCode < 200 || this.settled) return true;
    this.statusCode = statusCode;
    this.headers = flattenHeaders(rawHeaders);
    return true;
  }

  onData(chunk: Buffer): boolean {
    if (this.settled) return false;
    const room = this.maxBytes - this.bytes;
    if (chunk.length <= room) {
      this.chunks.push(chunk);
      this.bytes += chunk.length;
      return true;
    }
    if (room > 0) this.chunks.push(chunk.subarray(0, room));
    this.bytes = this.maxBytes;
    this.succeed(true);
    // Abort outside the parser callback; returning false pauses it until then.
    const abort = this.abort;
    if (abort !== undefined) queueMicrotask(() => abort(TRUNCATED));
    return false;
  }

  onComplete(): void {
    if (!this.settled) this.succeed(false);
  }

  onError(err: Error): void {
    if (this.settled) return;
    if (err instanceof RefusedTargetError) return this.fail('refused_target', err.message);
    const { code, message } = errorMessage(err);
    const timedOut = code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT';
    this.fail(timedOut ? 'timeout' : 'connection', message);
  }

  private succeed(truncated: boolean): void {
    this.settled = true;
    clearTimeout(this.timer);
    const { chunks } = this;
    const bytes = chunks.length === 0 ? Buffer.alloc(0) : chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, this.bytes);
    this.chunks = [];
    this.resolve({
      kind: 'response',
      statusCode: this.statusCode,
      headers: this.headers,
      body: bytes.toString('utf8'),
      bytes,
      truncated,
      startedAt: new Date(this.startMs),
      durationMs: Date.now() - this.startMs,
    });
  }

  private fail(error: 'timeout' | 'connection' | 'refused_target' | 'invalid_url', message: string): void {
    this.settled = true;
    clearTimeout(this.timer);
    this.chunks = [];
    this.resolve({ kind: 'error', error, message, startedAt: new Date(this.startMs), durationMs: Date.now() - this.startMs });
  }
}

function onTimer(ex: Exchange): void {
  ex.fireTimeout();
}

function immediateError(error: 'refused_target' | 'invalid_url', message: string): Promise<OutboundResult> {
  return Promise.resolve({ kind: 'error', error, message, startedAt: new Date(), durationMs: 0 });
}

export function createOutboundClient(opts: OutboundClientOptions): OutboundClient {
  const allowPrivate = opts.allowPrivateTargets;
  const maxBytes = opts.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  const agent = new Agent({
    connections: opts.connectionsPerOrigin ?? DEFAULT_CONNECTIONS_PER_ORIGIN,
    pipelining: 1,
    ...(allowPrivate ? {} : { connect: { lookup: guardedLookup } }),
  });
  let closing: Promise<void> | undefined;

  function send(req: OutboundRequest): Promise<OutboundResult> {
    let url: URL;
    try {
      url = new URL(req.url);
    } catch {
      return immediateError('invalid_url', `invalid URL: ${req.url}`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      return immediateError('invalid_url', `unsupported URL scheme ${url.protocol} (only http: and https: are allowed)`);
    }
    if (!allowPrivate) {
      // net.connect skips the lookup hook for IP literals, so judge them here.
      const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
      if (isIP(host) !== 0 && isForbiddenAddress(host)) {
        return immediateError('refused_target', new RefusedTargetError(host).message);
      }
    }
    return new Promise<OutboundResult>((resolve, reject) => {
      const ex = new Exchange(resolve, reject, maxBytes, req.timeoutMs, req.mayWrite);
      ex.start();
      try {
        agent.dispatch(
          {
            origin: url.origin,
            path: url.pathname + url.search,
            method: req.method as Dispatcher.HttpMethod,
            headers: req.headers,
            body: req.body ?? null,
          },
          ex,
        );
      } catch (err) {
        ex.onError(err as Error);
      }
    });
  }

  return {
    send,
    close(): Promise<void> {
      closing ??= agent.close().catch(() => undefined);
      return closing;
    },
  };
}
