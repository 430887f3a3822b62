/**
 * An example for `jetcron replay`: how many executions ended in each final status,
 * per organization, day and kind of source (task, schedule, endpoint).
 *
 *   npx jetcron replay --projection examples/projections/daily-outcomes.ts
 *   psql "$(npx jetcron db url)" -c 'SELECT * FROM analytics.daily_outcomes ORDER BY day'
 *
 * The file may live anywhere: it imports from the package (`jetcron`), which the CLI
 * resolves. Its tables are in the `analytics` schema (`--schema` for another).
 */
import { defineProjection, sql } from 'jetcron';

export default defineProjection({
  name: 'daily_outcomes_v1',
  async setup(db) {
    await sql`CREATE TABLE IF NOT EXISTS daily_outcomes (
      org_id text NOT NULL,
      day date NOT NULL,
      source_type text NOT NULL,
      status text NOT NULL,
      executions integer NOT NULL,
      PRIMARY KEY (org_id, day, source_type, status)
    )`.execute(db);
  },
  async teardown(db) {
    await sql`DROP TABLE IF EXISTS daily_outcomes`.execute(db);
  },
  async apply(events, trx) {
    const counts = new Map<string, { org: string; day: string; type: string; status: string; n: number }>();
    for (const { event } of events) {
      // An execution's end: its last attempt (no next one) or its cancellation.
      if (event.type === 'AttemptFinished' && event.data.next_attempt_at) continue;
      if (event.type !== 'AttemptFinished' && event.type !== 'ExecutionCancelled') continue;
      const status = event.type === 'AttemptFinished' ? event.data.status : 'cancelled';
      const row = { org: event.org_id, day: event.at.slice(0, 10), type: event.data.source.type, status, n: 0 };
      const key = `${row.org}|${row.day}|${row.type}|${row.status}`;
      (counts.get(key) ?? counts.set(key, row).get(key)!).n++;
    }
    for (const r of counts.values()) {
      await sql`INSERT INTO daily_outcomes VALUES (${r.org}, ${r.day}, ${r.type}, ${r.status}, ${r.n})
        ON CONFLICT (org_id, day, source_type, status) DO UPDATE SET executions = daily_outcomes.executions + EXCLUDED.executions`.execute(trx);
    }
  },
});
