/**
 * Positions a test can await instead of sleeping to see that nothing happens: what a
 * paused endpoint's owner holds, how far the notifier and the projector
 * have read. See
 * wait.ts for the polling itself.
 */
import { Kvm } from '@nats-io/kv';
import pg from 'pg';
import { KV_BUCKETS, STREAMS } from '../../streams/definitions.ts';
import { SUBJECTS } from '../../streams/subjects.ts';
import { decodeJson } from '../../src/lib/json.ts';
import { askFlowStats } from '../../src/owners/flow-stats.ts';
import { connectNats, type Nats } from '../../src/nats/connection.ts';
import type { NotificationEvent } from '../../src/commands/notification/types.ts';
import { notificationIdFor } from '../../src/notifier/plan.ts';
import { PROJECTOR_NAME } from '../../src/projections/projector.ts';
import { eventually } from './wait.ts';

/** How many deliveries of a paused endpoint wait in its partition owner's memory: none of them can be forwarded before a resume. */
export async function heldCount(natsUrl: string, orgId: string, endpointId: string): Promise<number> {
  const nats = await connectNats(natsUrl, 'test held');
  try {
    return (await askFlowStats(nats, orgId, 8)).endpoints.get(endpointId)?.waiting ?? 0;
  } finally {
    await nats.close();
  }
}

/**
 * Waits until the notifier has handled everything in EVENTS so far and the organization
 * has no notification left to send: its reader's checkpoint (which passes only handled
 * events) has reached EVENTS' last sequence as of the call, and NOTIFY (a work queue: a
 * job leaves it once delivered or given up) holds nothing for the organization. What a
 * notification target has not received by then, it will not.
 */
export async function notifierIdle(natsUrl: string, orgId: string): Promise<void> {
  const nats = await connectNats(natsUrl, 'test notifier idle');
  try {
    const last = (await nats.jsm.streams.info(STREAMS.events.name)).state.last_seq;
    const kv = await new Kvm(nats.nc).open(KV_BUCKETS.checkpoints.name);
    await eventually(async () => Number((await kv.get('notifier'))?.string()) >= last, 30_000, 50);
    const subject = SUBJECTS.notify(orgId);
    await eventually(async () => ((await nats.jsm.streams.info(STREAMS.notify.name, { subjects_filter: subject })).state.subjects?.[subject] ?? 0) === 0, 30_000, 50);
  } finally {
    await nats.close();
  }
}

/**
 * Waits until the projector has applied everything in EVENTS so far (its checkpoint in
 * Postgres has reached EVENTS' last sequence as of the call): a read model that has not
 * changed by then will not change from what was written before.
 */
export async function projectedUpToNow(natsUrl: string, databaseUrl: string): Promise<void> {
  const nats = await connectNats(natsUrl, 'test projected');
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    const last = (await nats.jsm.streams.info(STREAMS.events.name)).state.last_seq;
    await eventually(async () => {
      const row = (await db.query<{ seq: string }>('SELECT seq FROM projection_checkpoints WHERE name = $1', [PROJECTOR_NAME])).rows[0];
      return row !== undefined && Number(row.seq) >= last;
    }, 30_000, 50);
  } finally {
    await db.end();
    await nats.close();
  }
}

/** The delivery records of one execution's notification (`evt.<org>.notify.<id>`), in log order. */
export async function notificationRecords(nats: Nats, orgId: string, executionId: string): Promise<NotificationEvent[]> {
  const subject = SUBJECTS.notification(orgId, notificationIdFor(executionId));
  const out: NotificationEvent[] = [];
  for (let seq = 1; ;) {
    const m = await nats.jsm.direct.getMessage(STREAMS.events.name, { next_by_subj: subject, seq });
    if (!m) return out;
    out.push(decodeJson<NotificationEvent>(m.data));
    seq = m.seq + 1;
  }
}
