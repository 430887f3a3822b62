/**
 * Monitor partition owners across real processes (JETCRON_MONITOR_OWNERS, on by default): two API
 * processes, both able to own the monitors' partitions, pinged over HTTP all along while
 * the one that owns them is killed (kill -9) or frozen past its lease (SIGSTOP, then
 * SIGCONT). Every ping answered 200 is in the log, and no ping is recorded twice: the
 * other process takes the partitions over, asking again under the same request ids.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { eventsOf } from '../src/commands/commit.ts';
import type { MonitorEvent } from '../src/commands/monitor/types.ts';
import { connectNats } from '../src/nats/connection.ts';
import { createOrgWithKey, readEvents, spawnJetcron, type JetcronProcess } from './support/jetcron-process.ts';
import { endProcesses } from './support/owner-processes.ts';
import { apiClient, eventually, startTestService, type TestService } from './support/service.ts';

const OWNERS = { JETCRON_MONITOR_OWNERS: '1' };
let svc: TestService;
const procs: JetcronProcess[] = [];

before(async () => {
  // The projector, scheduler and notifier here; the API processes (and so the owners) are children.
  svc = await startTestService({ JETCRON_ROLES: 'projector,scheduler,notifier', ...OWNERS });
});
after(async () => {
  await endProcesses(procs);
  await svc.stop();
});

const apiProcess = async (label: string) => {
  const p = await spawnJetcron({ roles: 'api', natsUrl: svc.natsUrl, databaseUrl: svc.databaseUrl, label, env: OWNERS });
  procs.push(p);
  return p;
};

/** Pings the monitors through both processes, 8 at a time, each with its own body, until stopped; what each answered. */
function pingAll(prefix: string, targets: () => string[], tokens: string[]) {
  const answered = new Map<string, number>();
  let n = 0;
  let stopping = false;
  const worker = async () => {
    while (!stopping) {
      const i = n++;
      const bases = targets();
      const body = `${prefix}-${i}`;
      try {
        const res = await fetch(`${bases[i % bases.length]}/ping/${tokens[i % tokens.length]}`, { method: 'POST', body, signal: AbortSignal.timeout(60_000) });
        answered.set(body, res.status);
        await res.arrayBuffer();
      } catch {
        answered.set(body, 0); // the process was killed under it: no answer
        await new Promise((r) => setTimeout(r, 20));
      }
    }
  };
  const workers = Array.from({ length: 8 }, worker);
  return {
    answered,
    ok: () => [...answered.values()].filter((s) => s === 200).length,
    async stop() {
      stopping = true;
      await Promise.all(workers);
    },
  };
}

/** How many times each ping body is stored in the log, wherever (monitor subjects, partition commits). */
async function storedBodies(): Promise<Map<string, number>> {
  const nats = await connectNats(svc.natsUrl, 'test reader');
  try {
    const counts = new Map<string, number>();
    for (const m of [...(await readEvents(nats, 'evt.monitor-partition.>')), ...(await readEvents(nats, 'evt.*.monitor.*'))]) {
      for (const e of eventsOf<MonitorEvent>(m.event)) {
        const ping = e.type === 'MonitorPinged' || e.type === 'MonitorWentDown' ? e.data.ping : undefined;
        if (ping?.body) counts.set(ping.body, (counts.get(ping.body) ?? 0) + 1);
      }
    }
    return counts;
  } finally {
    await nats.close();
  }
}

async function monitors(url: string, apiKey: string, count: number): Promise<string[]> {
  const api = apiClient(() => url, apiKey);
  const tokens: string[] = [];
  for (let i = 0; i < count; i++) {
    const res = await api('POST', '/monitors', { name: `m${i}`, schedule_type: 'interval', interval_seconds: 3600, grace_period_seconds: 60 });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    tokens.push(String(res.body.data.ping_url).split('/ping/')[1]!);
  }
  return tokens;
}

function checkOnce(answered: Map<string, number>, stored: Map<string, number>): void {
  for (const [body, n] of stored) assert.equal(n, 1, `${body} recorded ${n} times`);
  for (const [body, status] of answered) if (status === 200) assert.equal(stored.get(body), 1, `${body} answered 200 and not stored`);
  for (const [body, status] of answered) assert.ok([200, 0].includes(status), `${body} answered ${status}`);
}

test('the owning API process killed (kill -9) under pings: the other takes its partitions over; every 200 stored, none twice', { timeout: 180_000 }, async () => {
  const org = await createOrgWithKey(svc.natsUrl);
  const a = await apiProcess('api-a');
  await eventually(() => a.lines.some((l) => /monitor owner of partition 7: live/.test(l)), 30_000, 50);
  const b = await apiProcess('api-b');
  const tokens = await monitors(a.url!, org.apiKey, 8);
  let bases = [a.url!, b.url!];
  const load = pingAll('kill', () => bases, tokens);
  await eventually(() => load.ok() >= 200, 60_000, 20);
  await a.kill9();
  bases = [b.url!];
  const before = load.ok();
  // B answers again once it owns the partitions (A's leases lapse first).
  await eventually(() => load.ok() >= before + 200, 90_000, 50);
  await load.stop();
  assert.ok(b.lines.some((l) => /monitor owner of partition \d+: claimed/.test(l)), 'B claimed partitions');
  checkOnce(load.answered, await storedBodies());
});

test('the owning API process frozen past its lease (SIGSTOP), then resumed: fenced; every 200 stored, none twice', { timeout: 180_000 }, async () => {
  const org = await createOrgWithKey(svc.natsUrl);
  const c = await apiProcess('api-c');
  const d = await apiProcess('api-d');
  // C or D owns each partition (the first test's B may own some too): freeze whichever owns the most.
  const tokens = await monitors(c.url!, org.apiKey, 8);
  const load = pingAll('freeze', () => [d.url!], tokens);
  await eventually(() => load.ok() >= 100, 60_000, 20);
  const owner = [c, d, ...procs].find((p) => p !== d && !p.exited() && p.lines.some((l) => /monitor owner of partition \d+: live/.test(l)));
  assert.ok(owner, 'an owner other than the process pinged');
  process.kill(owner.pid, 'SIGSTOP');
  const frozenAt = load.ok();
  await eventually(() => load.ok() >= frozenAt + 200, 90_000, 50);
  process.kill(owner.pid, 'SIGCONT');
  // It notices on waking: its lease has lapsed, or its next commit is fenced.
  await eventually(() => owner.lines.some((l) => /lease has lapsed|claimed the partition|lease monitor-owner\.\d+: lost/.test(l)), 60_000, 100);
  const resumedAt = load.ok();
  await eventually(() => load.ok() >= resumedAt + 100, 60_000, 50);
  await load.stop();
  checkOnce(load.answered, await storedBodies());
});
