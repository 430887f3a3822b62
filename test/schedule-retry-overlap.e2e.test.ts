import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { startTarget } from './support/target.ts';

// The spec's cron-retry rule on the partition owners: a schedule's retry that would
// land at or after its next tick is skipped, so a tick's attempts never overlap the
// next tick's. At time scale 0.01 a schedule's retries wait 1.2 s, then 2.7 s: for a
// tick every 3 s, the first retry runs and the second is skipped.

let svc: TestService;
let api: Api;

before(async () => {
  svc = await startTestService({ JETCRON_TIME_SCALE: '0.01' });
  ({ api } = await svc.createOrg('pro'));
});
after(async () => svc?.stop());

test("a schedule's retries never overlap its next tick: the retry that would is skipped, and says so", { timeout: 120_000 }, async () => {
  const target = await startTarget(() => ({ status: 500, body: 'down' }));
  try {
    const created = await api('POST', '/schedules', { url: `${target.url}/tick`, cron: '*/3 * * * * *', retry_attempts: 5 });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id = created.body.data.id as string;
    const byExecution = () => {
      const out = new Map<string, number[]>();
      for (const r of target.received) {
        const exe = String(r.headers['x-jetcron-execution-id']);
        out.set(exe, [...(out.get(exe) ?? []), r.at]);
      }
      return out;
    };
    // Three ticks whose executions have ended.
    const ended = await eventually(async () => {
      const runs = (await api('GET', `/schedules/${id}/executions?limit=20`)).body.data as Array<{ id: string; status: string; scheduled_for: string }>;
      const done = runs.filter((r) => r.status === 'failed');
      return done.length >= 3 ? done : null;
    }, 60_000, 200);
    await api('PUT', `/schedules/${id}`, { enabled: false });

    // Decided, not timed: the second retry is planned 3.9 s or more after its tick, so it
    // is always skipped (a loaded machine can only push the first one past the tick too).
    const sent = byExecution();
    for (const run of ended) {
      const detail = (await api('GET', `/executions/${run.id}`)).body.data as { attempt: number; error_message: string };
      const arrivals = sent.get(run.id) ?? [];
      assert.ok(detail.attempt <= 2, `${run.id}: ${detail.attempt} attempts of a tick every 3 s with 5 retries allowed (${arrivals.length} sent)`);
      assert.ok(arrivals.length >= 1 && arrivals.length <= 2, `${run.id}: sent ${arrivals.length} times`);
      assert.match(detail.error_message, /retry skipped: it would land after the next run/);
    }
  } finally {
    await target.close();
  }
});
