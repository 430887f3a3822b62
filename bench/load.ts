/** Load generation: a keep-alive undici Pool against the API, closed and open loops, bounded in count and time. */
import { Pool, type Dispatcher } from 'undici';
import { hrMs, sleep } from './harness.ts';

export interface CallResult {
  status: number;
  /** Send time (process.hrtime ms, comparable with the target's). */
  sentHr: number;
  /** Send to full response. */
  ms: number;
}

export interface SendResult extends CallResult {
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** Counts outcomes by status (or error message) and keeps a few examples of failures. */
export class Outcomes {
  readonly byKey = new Map<string, number>();
  readonly examples: string[] = [];
  add(key: string, example?: string): void {
    this.byKey.set(key, (this.byKey.get(key) ?? 0) + 1);
    if (example && this.examples.length < 5) this.examples.push(`${key}: ${example.slice(0, 300)}`);
  }
  count(key: string): number {
    return this.byKey.get(key) ?? 0;
  }
  get failures(): number {
    let n = 0;
    for (const [k, v] of this.byKey) if (k !== '201' && k !== '200') n += v;
    return n;
  }
  describe(): string {
    return [...this.byKey].sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k}×${v}`).join(', ') || 'none';
  }
}

/** A keep-alive undici Pool on one origin whose `send` never throws; no credentials (see ApiClient). */
export class HttpClient {
  readonly pool: Pool;

  /** Most requests seen waiting for a free connection in the client (sampled at each send). */
  maxQueued = 0;

  protected readonly headers: Record<string, string>;

  constructor(baseUrl: string, connections = 64, headers: Record<string, string> = { 'content-type': 'application/json' }) {
    this.headers = headers;
    this.pool = new Pool(baseUrl, { connections, pipelining: 1, keepAliveTimeout: 60_000, headersTimeout: 60_000, bodyTimeout: 60_000 });
  }

  protected request(opts: Dispatcher.RequestOptions): Promise<Dispatcher.ResponseData> {
    const pending = this.pool.request(opts);
    const queued = this.pool.stats.queued;
    if (queued > this.maxQueued) this.maxQueued = queued;
    return pending;
  }

  /**
   * Any request with extra headers; never throws (a transport error is status 0 with
   * the error in `text`). Returns the status, the response headers, the raw body and
   * the time from send to full response. Not counted in `outcomes`.
   */
  async send(method: 'GET' | 'POST' | 'PUT' | 'DELETE', path: string, opts: { body?: string; headers?: Record<string, string> } = {}): Promise<SendResult> {
    const sentHr = hrMs();
    try {
      const res = await this.request({ method, path, headers: { ...this.headers, ...opts.headers }, body: opts.body });
      const text = await res.body.text();
      return { status: res.statusCode, headers: res.headers, text, sentHr, ms: hrMs() - sentHr };
    } catch (err) {
      const e = err as { code?: string; message?: string };
      return { status: 0, headers: {}, text: `${e.code ?? 'error'}: ${e.message ?? ''}`, sentHr, ms: hrMs() - sentHr };
    }
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}

/** The jetcron API with one org's key. */
export class ApiClient extends HttpClient {
  readonly outcomes = new Outcomes();

  constructor(baseUrl: string, apiKey: string, connections = 64) {
    super(baseUrl, connections, { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' });
  }

  /** POST /api/v1/tasks; never throws (failures are counted in `outcomes`). */
  async createTask(task: Record<string, unknown>): Promise<CallResult> {
    const body = JSON.stringify(task);
    const sentHr = hrMs();
    try {
      const res = await this.request({ method: 'POST', path: '/api/v1/tasks', headers: this.headers, body });
      const text = await res.body.text();
      this.outcomes.add(String(res.statusCode), res.statusCode === 201 ? undefined : text);
      return { status: res.statusCode, sentHr, ms: hrMs() - sentHr };
    } catch (err) {
      const e = err as { code?: string; message?: string };
      this.outcomes.add(e.code ?? 'error', e.message);
      return { status: 0, sentHr, ms: hrMs() - sentHr };
    }
  }

  async get(path: string): Promise<{ status: number; body: unknown }> {
    const res = await this.pool.request({ method: 'GET', path, headers: this.headers });
    const text = await res.body.text();
    return { status: res.statusCode, body: text ? JSON.parse(text) : null };
  }
}

/**
 * `concurrency` workers take indexes 0, 1, 2… until `maxCount` are started or
 * `maxMs` has passed (whichever first); resolves when the started ones finish.
 */
export async function closedLoop(opts: {
  concurrency: number;
  maxCount: number;
  maxMs: number;
  fn: (i: number) => Promise<unknown>;
}): Promise<{ started: number; elapsedMs: number }> {
  const t0 = hrMs();
  const deadline = t0 + opts.maxMs;
  let next = 0;
  const worker = async () => {
    while (next < opts.maxCount && hrMs() < deadline) await opts.fn(next++);
  };
  await Promise.all(Array.from({ length: opts.concurrency }, worker));
  return { started: next, elapsedMs: hrMs() - t0 };
}

/**
 * Open loop: starts call i at t0 + i / rate regardless of how earlier calls are
 * doing, for `count` calls; resolves when all have finished or `maxMs` after the
 * last was started. Returns how late sends were against their plan.
 */
export async function openLoop(opts: {
  rate: number;
  count: number;
  maxMs: number;
  fn: (i: number) => Promise<unknown>;
}): Promise<{ sendLagMs: number[]; elapsedMs: number; unfinished: number }> {
  const interval = 1000 / opts.rate;
  const t0 = hrMs();
  const inFlight = new Set<Promise<unknown>>();
  const sendLagMs: number[] = [];
  for (let i = 0; i < opts.count; i++) {
    const due = t0 + i * interval;
    const wait = due - hrMs();
    if (wait > 0) await sleep(wait);
    sendLagMs.push(hrMs() - due);
    const p: Promise<unknown> = opts.fn(i).finally(() => inFlight.delete(p));
    inFlight.add(p);
  }
  const settled = Promise.all([...inFlight]).then(() => true);
  const finished = await Promise.race([settled, sleep(opts.maxMs).then(() => false)]);
  return { sendLagMs, elapsedMs: hrMs() - t0, unfinished: finished ? 0 : inFlight.size };
}
