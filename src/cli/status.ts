import { sql } from 'kysely';
import { Kvm, type KV } from '@nats-io/kv';
import { CONSUMERS, KV_BUCKETS, KV_CHECKPOINT_READERS, STREAMS } from '../../streams/definitions.ts';
import { connectDb, type Db } from '../db/connect.ts';
import { decodeJson } from '../lib/json.ts';
import { connectNats, type Nats } from '../nats/connection.ts';
import { askFlowStats } from '../owners/flow-stats.ts';
import { rollCall, type ProcessInfo } from '../nats/roll-call.ts';
import { PROJECTOR_LEASE, PROJECTOR_NAME } from '../projections/projector.ts';
import { DEFAULT_SCHEMA } from '../replay/usage.ts';
import { statusText } from './status-text.ts';

/**
 * `jetcron status`: one read of everything that says whether the service keeps up.
 * Read-only (no stream is created, nothing written); each part is read on its own,
 * so one that fails is named in `errors` and the rest is still reported.
 */

export interface StreamStatus {
  name: string;
  messages: number;
  bytes: number;
  first_seq: number;
  /** Time of the oldest message kept; null when the stream is empty. */
  first_time: string | null;
  last_seq: number;
  last_time: string | null;
}

export interface ConsumerStatus {
  name: string;
  stream: string;
  num_pending: number;
  num_ack_pending: number;
  redelivered: number;
  waiting_pulls: number;
}

export interface ReaderStatus {
  name: string;
  stream: string;
  /** Where it keeps its position: KV `checkpoints` or Postgres `projection_checkpoints`. */
  checkpoint_in: 'kv' | 'postgres';
  /** Last sequence it has handled; null when it never ran (or its store could not be read). */
  position: number | null;
  last_seq: number | null;
  lag: number | null;
}

export interface ProjectionStatus {
  name: string;
  position: number;
  events_last_seq: number | null;
  lag: number | null;
  updated_at: string;
}

export interface LeaseStatus {
  name: string;
  holder: string;
  /** The holder's pid when it answered the roll call (a rebuild or a replay does not). */
  holder_pid: number | null;
  expires_at: string;
  expires_in_seconds: number;
}

/** Heartbeat monitors: how many in each status, why the down ones are down (read model), and their deadlines (the monitor owners', by roll call). */
export interface MonitorStatusCounts {
  total: number;
  by_status: Record<string, number>;
  down_reasons: Record<string, number>;
  /** Armed deadlines (a monitor up, or with a run open), and those past due: what the monitor owners hold. */
  deadlines_armed: number | null;
  deadlines_overdue: number | null;
}

/** Flow-control keys: how many the read models know and hold paused, what the owners hold now, the keys with most waiting. */
export interface FlowControlStatus {
  keys: number | null;
  paused: number | null;
  /** Keys an owner holds in memory now (something waits or runs, or paused). */
  held: number;
  waiting: number;
  in_flight: number;
  top: Array<{ org_id: string; key: string; waiting: number; in_flight: number; paused: boolean }>;
}

export interface StatusReport {
  checked_at: string;
  streams: StreamStatus[];
  consumers: ConsumerStatus[];
  readers: ReaderStatus[];
  projections: ProjectionStatus[] | null;
  leases: LeaseStatus[];
  monitors: MonitorStatusCounts | null;
  flow_control: FlowControlStatus | null;
  processes: ProcessInfo[];
  errors: Array<{ part: string; message: string }>;
}

const iso = (ms: number) => new Date(ms).toISOString();
const lagOf = (last: number | null, position: number | null) => (last === null || position === null ? null : Math.max(0, last - position));
const PG_TIMEOUT_MS = 5_000;

async function readStreams(nats: Nats): Promise<StreamStatus[]> {
  return Promise.all(Object.values(STREAMS).map(async ({ name }) => {
    const { state } = await nats.jsm.streams.info(name);
    const some = state.messages > 0;
    return {
      name, messages: state.messages, bytes: state.bytes, first_seq: state.first_seq,
      first_time: some ? state.first_ts : null, last_seq: state.last_seq, last_time: state.last_seq > 0 ? state.last_ts : null,
    };
  }));
}

async function readConsumers(nats: Nats): Promise<ConsumerStatus[]> {
  return Promise.all(Object.values(CONSUMERS).map(async ({ stream, durable_name }) => {
    const info = await nats.jsm.consumers.info(stream, durable_name);
    return {
      name: durable_name, stream, num_pending: info.num_pending, num_ack_pending: info.num_ack_pending,
      redelivered: info.num_redelivered, waiting_pulls: info.num_waiting,
    };
  }));
}

async function readKvCheckpoints(kv: KV): Promise<Map<string, number | null>> {
  const out = new Map<string, number | null>();
  await Promise.all(Object.keys(KV_CHECKPOINT_READERS).map(async (key) => {
    const e = await kv.get(key);
    out.set(key, e && e.operation === 'PUT' && e.value.length ? Number(e.string()) : null);
  }));
  return out;
}

/** The read models' checkpoint, and every analyst projection's (`<schema>.jetcron_checkpoints`; named `<schema>.<name>` outside `analytics`). */
async function readProjections(db: Db): Promise<Array<{ name: string; seq: number; updated_at: Date }>> {
  const rows = await db.selectFrom('projection_checkpoints').select(['name', 'seq', 'updated_at']).orderBy('name').execute();
  const out = rows.map((r) => ({ name: r.name, seq: Number(r.seq), updated_at: r.updated_at }));
  const schemas = await sql<{ schema: string }>`SELECT table_schema AS schema FROM information_schema.tables WHERE table_name = 'jetcron_checkpoints' ORDER BY 1`.execute(db);
  for (const { schema } of schemas.rows) {
    const own = await sql<{ name: string; seq: string; updated_at: Date }>`SELECT name, seq, updated_at FROM ${sql.table(`${schema}.jetcron_checkpoints`)} ORDER BY name`.execute(db);
    for (const r of own.rows) out.push({ name: schema === DEFAULT_SCHEMA ? r.name : `${schema}.${r.name}`, seq: Number(r.seq), updated_at: r.updated_at });
  }
  return out;
}

async function readMonitors(db: Db): Promise<Omit<MonitorStatusCounts, 'deadlines_armed' | 'deadlines_overdue'>> {
  const rows = await db.selectFrom('monitors').select(['status', 'down_reason', (eb) => eb.fn.countAll<string>().as('n')]).groupBy(['status', 'down_reason']).execute();
  const out = { total: 0, by_status: {} as Record<string, number>, down_reasons: {} as Record<string, number> };
  for (const r of rows) {
    const n = Number(r.n);
    out.total += n;
    out.by_status[r.status] = (out.by_status[r.status] ?? 0) + n;
    if (r.status === 'down') out.down_reasons[r.down_reason ?? 'unknown'] = (out.down_reasons[r.down_reason ?? 'unknown'] ?? 0) + n;
  }
  return out;
}

/** `clock`: the time each entry is read at; a lease renewed after the report began is measured from then, never past its TTL. */
async function readLeases(kv: KV, clock: () => number): Promise<Array<Omit<LeaseStatus, 'holder_pid'>>> {
  const out = [];
  // A key renewed while it is listed can come twice: each lease once.
  const keys = new Set<string>();
  for await (const key of await kv.keys()) keys.add(key);
  for (const key of keys) {
    const e = await kv.get(key);
    if (!e || e.operation !== 'PUT') continue;
    const expires = e.created.getTime() + KV_BUCKETS.leases.ttlMs;
    out.push({ name: key, holder: e.string(), expires_at: iso(expires), expires_in_seconds: Math.max(0, Math.round((expires - clock()) / 100) / 10) });
  }
  // The projector first, then the readers, then partitions in number order.
  const rank = (n: string) => (n === PROJECTOR_LEASE ? 0 : /\.\d+$/.test(n) ? 2 : 1);
  return out.sort((a, b) => rank(a.name) - rank(b.name) || a.name.localeCompare(b.name, 'en', { numeric: true }));
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms / 1000} s`)), ms);
  })]).finally(() => clearTimeout(timer));
}

export async function readStatus(deps: {
  nats: Nats;
  /** Postgres, or why there is none to read. */
  db: Db | { missing: string };
  rollCallMs: number;
  now?: () => number;
}): Promise<StatusReport> {
  const now = (deps.now ?? Date.now)();
  const errors: StatusReport['errors'] = [];
  const part = async <T>(name: string, read: () => Promise<T>, fallback: T): Promise<T> => {
    try {
      return await read();
    } catch (err) {
      errors.push({ part: name, message: (err as Error).message });
      return fallback;
    }
  };
  const { db } = deps;
  const kvm = new Kvm(deps.nats.nc);
  const [streams, consumers, kvCheckpoints, projectionRows, monitorRows, leases, processes, flowRows, flowHeld] = await Promise.all([
    part('streams', () => readStreams(deps.nats), []),
    part('consumers', () => readConsumers(deps.nats), []),
    part('checkpoints', async () => readKvCheckpoints(await kvm.open(KV_BUCKETS.checkpoints.name)), null),
    'missing' in db
      ? part('projections', () => Promise.reject(new Error(db.missing)), null)
      : part('projections', () => withTimeout(readProjections(db), PG_TIMEOUT_MS, 'Postgres'), null),
    'missing' in db ? null : part('monitors', () => withTimeout(readMonitors(db), PG_TIMEOUT_MS, 'Postgres'), null),
    part('leases', async () => readLeases(await kvm.open(KV_BUCKETS.leases.name), deps.now ?? Date.now), []),
    part('processes', () => rollCall(deps.nats, deps.rollCallMs), []),
    'missing' in db ? null : part('flow control', () => withTimeout(readFlowKeys(db), PG_TIMEOUT_MS, 'Postgres'), null),
    part('flow control owners', async () => [...(await askFlowStats(deps.nats, null)).keys.values()], null),
  ]);
  const stream = (name: string) => streams.find((s) => s.name === name);
  const kept = processes.flatMap((p) => (p.monitor_deadlines ? [p.monitor_deadlines] : []));
  const deadlines = (which: 'armed' | 'overdue') =>
    !kept.length ? null : kept.reduce((n, k) => n + k[which], 0);
  const lastSeq = (name: string) => stream(name)?.last_seq ?? null;
  const eventsLast = lastSeq(STREAMS.events.name);
  const projectorAt = projectionRows ? projectionRows.find((r) => r.name === PROJECTOR_NAME)?.seq ?? null : null;
  const readers: ReaderStatus[] = [
    { name: 'projector', stream: STREAMS.events.name, checkpoint_in: 'postgres' as const, position: projectorAt },
    ...Object.entries(KV_CHECKPOINT_READERS).map(([name, s]) => ({ name, stream: s, checkpoint_in: 'kv' as const, position: kvCheckpoints?.get(name) ?? null })),
  ].map((r) => ({ ...r, last_seq: lastSeq(r.stream), lag: lagOf(lastSeq(r.stream), r.position) }));
  const pidOf = new Map(processes.map((p) => [p.instance, p.pid]));
  return {
    checked_at: iso(now),
    streams,
    consumers,
    readers,
    projections: projectionRows?.map((r) => ({
      name: r.name, position: r.seq, events_last_seq: eventsLast, lag: lagOf(eventsLast, r.seq), updated_at: r.updated_at.toISOString(),
    })) ?? null,
    leases: leases.map((l) => ({ ...l, holder_pid: pidOf.get(l.holder) ?? null })),
    monitors: monitorRows && {
      ...monitorRows,
      deadlines_armed: deadlines('armed'),
      deadlines_overdue: deadlines('overdue'),
    },
    flow_control: flowRows === null && flowHeld === null ? null : {
      keys: flowRows?.keys ?? null,
      paused: flowRows?.paused ?? null,
      held: flowHeld?.length ?? 0,
      waiting: (flowHeld ?? []).reduce((n, k) => n + k.waiting, 0),
      in_flight: (flowHeld ?? []).reduce((n, k) => n + k.in_flight, 0),
      top: [...(flowHeld ?? [])].sort((a, b) => b.waiting - a.waiting || b.in_flight - a.in_flight).slice(0, FLOW_TOP)
        .map((k) => ({ org_id: k.org_id ?? '', key: k.key, waiting: k.waiting, in_flight: k.in_flight, paused: k.paused })),
    },
    processes,
    errors,
  };
}

/** The keys with most waiting that status lists (the rest are counted). */
const FLOW_TOP = 5;

async function readFlowKeys(db: Db): Promise<{ keys: number; paused: number }> {
  const row = await db.selectFrom('flow_control_keys')
    .select((eb) => [eb.fn.countAll<string>().as('keys'), eb.fn.count<string>('key').filterWhere('paused', '=', true).as('paused')])
    .executeTakeFirstOrThrow();
  return { keys: Number(row.keys), paused: Number(row.paused) };
}

/** How long processes have to answer the roll call: their count is unknown, so status waits this long. */
const ROLL_CALL_MS = 1_500;

/**
 * The command: prints the report (a JSON line or tables) and answers with the exit
 * code: 0 all read, 1 NATS unreachable (nothing printed on stdout), 3 some part not read.
 */
export async function statusCommand(opts: {
  natsUrl: string;
  databaseUrl: string | undefined;
  json: boolean;
  out: (text: string) => void;
  err: (text: string) => void;
}): Promise<number> {
  let nats: Nats;
  try {
    nats = await connectNats(opts.natsUrl, 'jetcron status');
  } catch (err) {
    opts.err(`jetcron: cannot reach NATS at ${opts.natsUrl} (${(err as Error).message}); is the service running? NATS_URL, or --data-dir of a running embedded service, says where it is\n`);
    return 1;
  }
  const pg = opts.databaseUrl ? connectDb(opts.databaseUrl, 1).db : undefined;
  try {
    const report = await readStatus({
      nats,
      db: pg ?? { missing: 'no Postgres URL: set DATABASE_URL, or give --data-dir of a running embedded service' },
      rollCallMs: ROLL_CALL_MS,
    });
    opts.out(opts.json ? `${JSON.stringify(report)}\n` : statusText(report));
    return report.errors.length ? 3 : 0;
  } finally {
    await pg?.destroy().catch(() => {});
    await nats.close();
  }
}
