/**
 * Pings decided from the monitor an API process remembers (src/commands/heads.ts),
 * against a real JetStream: writes by another API process and by the scheduler's
 * deadline check make a remembered head stale; the subject's sequence guard refuses it
 * and the ping is decided again from the log, so no write is lost and each ping is
 * decided on the state its predecessor left.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createMonitor, monitorSubject, pingMonitor, runMonitor } from '../src/commands/monitor/handlers.ts';
import { evolveMonitor } from '../src/commands/monitor/decide.ts';
import { ApiError } from '../src/lib/errors.ts';
import type { Monitor, MonitorEvent } from '../src/commands/monitor/types.ts';
import type { CommandDeps } from '../src/commands/execute.ts';
import { createClock } from '../src/lib/clock.ts';
import { newId } from '../src/lib/ids.ts';
import type { Nats } from '../src/nats/connection.ts';
import { createEventStore } from '../src/nats/event-store.ts';
import { STREAMS } from '../streams/definitions.ts';
import { startNatsWithStreams } from './support/nats.ts';

let server: Awaited<ReturnType<typeof startNatsWithStreams>>;
const connections: Nats[] = [];
before(async () => {
  server = await startNatsWithStreams();
});
after(async () => {
  for (const c of connections) await c.close();
  await server.stop();
});

const processDeps = async (name: string): Promise<CommandDeps> => {
  const nats = await server.connect(name);
  connections.push(nats);
  return { store: createEventStore(nats), clock: createClock() };
};
const received = (rid: string | null = null) => ({ method: 'GET', source_ip: null, user_agent: null, body: '', rid });

test('two API processes and the scheduler on one monitor: every write stored, each ping decided on the state before it', async () => {
  const [a, b, scheduler] = [await processDeps('api a'), await processDeps('api b'), await processDeps('scheduler')];
  const orgId = newId('org', Date.now());
  const { state: created } = await createMonitor(a, orgId, { name: 'm', schedule_type: 'interval', interval_seconds: 3600, grace_period_seconds: 0 }, { name: 'pro', limit: null, live: [] }, async () => null);
  const id = created!.id;
  const rid = '6f1c2a4e-8d3b-4c5a-9e7f-0a1b2c3d4e5f';

  // a remembers the create; b starts a run on it; a's next ping (an end) must see b's start.
  await pingMonitor(b, orgId, id, { ...received(rid), suffix: 'start' });
  const end = await pingMonitor(a, orgId, id, { ...received(rid), suffix: '0' });
  assert.notEqual((end.events[0] as Extract<MonitorEvent, { type: 'MonitorPinged' }>).data.ping.duration_ms, null, 'the end closed the start another process stored');

  // The scheduler takes it down at its deadline (a state a never wrote); a's next ping recovers it.
  const up = end.state as Monitor;
  await runMonitor(scheduler, orgId, id, { type: 'CheckDeadline', deadlineAt: up.deadline_at! });
  const last = await scheduler.store.last<MonitorEvent>(monitorSubject(orgId, id));
  assert.equal(last?.event.type, 'MonitorWentDown');
  const recovered = await pingMonitor(a, orgId, id, { ...received(), suffix: null });
  assert.equal((recovered.events[0] as Extract<MonitorEvent, { type: 'MonitorPinged' }>).data.previous_status, 'down', 'decided on the state the scheduler stored, not the remembered one');

  // Pings from both processes at once: all stored, none lost, no error.
  const both = await Promise.all(Array.from({ length: 20 }, (_, i) => pingMonitor(i % 2 ? a : b, orgId, id, { ...received(), suffix: null })));
  const seqs = both.map((r) => r.seq).sort((x, y) => x - y);
  assert.equal(new Set(seqs).size, 20);
  // Created, start, end, down, recovered, 20 pings: 25 messages on the subject.
  const info = await connections[0]!.jsm.streams.info(STREAMS.events.name, { subjects_filter: monitorSubject(orgId, id) });
  assert.equal(info.state.subjects?.[monitorSubject(orgId, id)], 25);
});
