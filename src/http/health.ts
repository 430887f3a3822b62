import type { Request, Response } from 'express';
import { sql } from 'kysely';
import { CONSUMERS } from '../../streams/definitions.ts';
import type { Db } from '../db/connect.ts';
import type { Metrics } from '../lib/metrics.ts';
import type { Nats } from '../nats/connection.ts';
import type { ConsumerProgress, Supervisor } from '../nats/supervisor.ts';
import type { ProgressBoard } from '../nats/progress-board.ts';
import { within, type StreamInfo } from '../nats/stream-info.ts';

/**
 * `/healthz`: 200 only when both stores answer and every consumer of the service (this
 * process's, and those other processes share) is making progress; 503 when a store is unreachable or a consumer is stuck (failing
 * on one item, or behind the log without moving) for longer than `stuckMs`. The body
 * names each consumer with its state and lag, so an operator sees which one and why.
 */

type ConsumerState = 'ok' | 'standby' | 'retrying' | 'stuck';

interface ConsumerReport {
  state: ConsumerState;
  /** Log readers: stream sequences behind the stream's end. */
  lag?: number;
  /** Work queues: jobs waiting or in flight. */
  backlog?: number;
  position?: number;
  skipped?: number;
  error?: string;
  failing_for_ms?: number;
}

export interface HealthReport {
  status: 'ok' | 'degraded';
  stores: { nats: 'ok' | 'unreachable'; postgres: 'ok' | 'unreachable' };
  consumers: Record<string, ConsumerReport>;
  failures_recorded: number;
}

const WORK_QUEUES: Record<string, string> = {
  [CONSUMERS.notifiers.durable_name]: CONSUMERS.notifiers.stream,
};
const BACKGROUND_EVERY_MS = 5000;

export function createHealth(deps: { nats: Nats; db: Db; supervisor: Supervisor; board: ProgressBoard; streams: StreamInfo; metrics: Metrics; stuckMs: number }) {
  // Where each consumer was when it was first seen behind: unchanged for stuckMs = stuck.
  const behind = new Map<string, { position: number; since: number }>();
  let last: HealthReport | undefined;

  async function consumerReport(c: ConsumerProgress, now: number): Promise<ConsumerReport> {
    if (!c.active) {
      behind.delete(c.consumer);
      return { state: 'standby' };
    }
    const r: ConsumerReport = { state: 'ok', position: c.position };
    if (c.skipped) r.skipped = c.skipped;
    let stalled = false;
    const queue = WORK_QUEUES[c.consumer];
    if (queue) {
      const backlog = await deps.streams.backlog(queue, c.consumer).catch(() => null);
      if (backlog !== null) r.backlog = backlog;
      delete r.position;
    } else if (c.stream) {
      const end = await deps.streams.lastSeq(c.stream).catch(() => null);
      if (end !== null) {
        r.lag = Math.max(0, end - c.position);
        const seen = behind.get(c.consumer);
        if (r.lag === 0) behind.delete(c.consumer);
        else if (!seen || seen.position !== c.position) behind.set(c.consumer, { position: c.position, since: now });
        else stalled = now - seen.since > deps.stuckMs;
      }
    }
    if (c.failingSince !== null) {
      r.state = 'retrying';
      r.error = c.lastError ?? undefined;
      r.failing_for_ms = now - c.failingSince;
      if (r.failing_for_ms > deps.stuckMs) stalled = true;
    }
    if (stalled) r.state = 'stuck';
    return r;
  }

  async function evaluate(): Promise<HealthReport> {
    const now = Date.now();
    const [natsOk, pgOk] = await Promise.all([
      within(deps.nats.nc.flush()).then(() => !deps.nats.nc.isClosed(), () => false),
      within(sql`SELECT 1`.execute(deps.db)).then(() => true, () => false),
    ]);
    const consumers: Record<string, ConsumerReport> = {};
    for (const c of deps.board.consumers().sort((a, b) => a.consumer.localeCompare(b.consumer))) {
      consumers[c.consumer] = await consumerReport(c, now);
    }
    const ok = natsOk && pgOk && Object.values(consumers).every((c) => c.state !== 'stuck');
    last = {
      status: ok ? 'ok' : 'degraded',
      stores: { nats: natsOk ? 'ok' : 'unreachable', postgres: pgOk ? 'ok' : 'unreachable' },
      consumers,
      failures_recorded: deps.supervisor.ledger.list().length,
    };
    return last;
  }

  deps.metrics.consumerStuck.readFrom(() => Object.entries(last?.consumers ?? {}).map(([consumer, r]) => [{ consumer }, r.state === 'stuck' ? 1 : 0]));

  // Checked in the background too, so "behind and not moving" is measured even when no one asks.
  const ticker = setInterval(() => void evaluate().catch(() => {}), BACKGROUND_EVERY_MS);
  ticker.unref();

  return {
    evaluate,
    handler: (_req: Request, res: Response) => {
      evaluate().then(
        (report) => void res.status(report.status === 'ok' ? 200 : 503).json(report),
        () => void res.status(503).json({ status: 'degraded' }),
      );
    },
    close: () => clearInterval(ticker),
  };
}

export type Health = ReturnType<typeof createHealth>;
