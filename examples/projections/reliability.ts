/**
 * What an on-call analyst asks first: which target hosts fail, when, and how long each
 * monitor was down. Two tables:
 *
 * - `host_failures`: per organization, target host and hour, the attempts that failed
 *   or timed out beside all attempts (a failure rate per host per hour);
 * - `monitor_downtime`: each monitor's periods down (start, end, why), closed when it
 *   pings again; a period still open has `ended_at` null.
 *
 *   npx jetcron replay --projection examples/projections/reliability.ts --types AttemptFinished,MonitorWentDown,MonitorPinged
 *   psql "$(npx jetcron db url)" -c "SET search_path = analytics" \
 *     -c 'SELECT host, hour, failed, attempts FROM host_failures ORDER BY failed DESC LIMIT 20' \
 *     -c "SELECT monitor_id, sum(coalesce(ended_at, now()) - started_at) AS down FROM monitor_downtime GROUP BY 1 ORDER BY 2 DESC"
 *   npx jetcron export --table host_failures --format parquet --out host_failures.parquet
 *
 * `--types` reads only the messages that hold those events: the replay skips the rest
 * of the log without decoding it.
 */
import { defineProjection, sql, type EventOf, type Transaction } from 'jetcron';

/** `host:port` of an attempt's URL; what is not a URL counts under its text. */
function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return url;
  }
}

interface HourOfHost { org: string; host: string; hour: string; attempts: number; failed: number }

/** A batch's attempts summed per organization, host and hour first: one upsert per row, not per event. */
function countAttempt(rows: Map<string, HourOfHost>, e: EventOf<'AttemptFinished'>): void {
  const row = { org: e.org_id, host: hostOf(e.data.request.url), hour: `${e.data.finished_at.slice(0, 13)}:00:00Z`, attempts: 0, failed: 0 };
  const key = `${row.org} ${row.host} ${row.hour}`;
  const sum = rows.get(key) ?? rows.set(key, row).get(key)!;
  sum.attempts++;
  if (e.data.status !== 'success') sum.failed++;
}

async function wentDown(trx: Transaction<any>, e: EventOf<'MonitorWentDown'>): Promise<void> {
  // Down again while down (a failing ping after a missed one): the open period goes on.
  await sql`INSERT INTO monitor_downtime (monitor_id, org_id, name, started_at, reason)
    SELECT ${e.data.monitor.id}, ${e.org_id}, ${e.data.monitor.name}, ${e.at}, ${e.data.reason}
    WHERE NOT EXISTS (SELECT 1 FROM monitor_downtime WHERE monitor_id = ${e.data.monitor.id} AND ended_at IS NULL)`.execute(trx);
}

async function pinged(trx: Transaction<any>, e: EventOf<'MonitorPinged'>): Promise<void> {
  if (e.data.monitor.status !== 'up') return;
  await sql`UPDATE monitor_downtime SET ended_at = ${e.at} WHERE monitor_id = ${e.data.monitor.id} AND ended_at IS NULL`.execute(trx);
}

export default defineProjection({
  name: 'reliability_v1',
  async setup(db) {
    await sql`CREATE TABLE IF NOT EXISTS host_failures (
      org_id text NOT NULL, host text NOT NULL, hour timestamptz NOT NULL, attempts integer NOT NULL, failed integer NOT NULL,
      PRIMARY KEY (org_id, host, hour)
    )`.execute(db);
    await sql`CREATE TABLE IF NOT EXISTS monitor_downtime (
      monitor_id text NOT NULL, org_id text NOT NULL, name text NOT NULL, started_at timestamptz NOT NULL, ended_at timestamptz, reason text NOT NULL,
      PRIMARY KEY (monitor_id, started_at)
    )`.execute(db);
  },
  async teardown(db) {
    await sql`DROP TABLE IF EXISTS host_failures, monitor_downtime`.execute(db);
  },
  async apply(events, trx) {
    const hours = new Map<string, HourOfHost>();
    for (const { event } of events) {
      if (event.type === 'AttemptFinished') countAttempt(hours, event);
      else if (event.type === 'MonitorWentDown') await wentDown(trx, event);
      else if (event.type === 'MonitorPinged') await pinged(trx, event);
    }
    for (const r of hours.values()) {
      await sql`INSERT INTO host_failures (org_id, host, hour, attempts, failed) VALUES (${r.org}, ${r.host}, ${r.hour}, ${r.attempts}, ${r.failed})
        ON CONFLICT (org_id, host, hour) DO UPDATE SET attempts = host_failures.attempts + EXCLUDED.attempts, failed = host_failures.failed + EXCLUDED.failed`.execute(trx);
    }
  },
});
