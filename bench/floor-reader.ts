/**
 * The acceptance floor's reader (bench/acceptance-floor.ts), a forked child: reads the
 * floor server's stream from its start with an ordered consumer (no acks: as jetcron's
 * projectors, its place is a checkpoint row written in the same transaction as the rows)
 * and writes one Postgres row per stored request with COPY in binary form
 * (`src/projections/copy-rows.ts`), and the key's state (a monitor's last ping and count,
 * as its row keeps them), one transaction at a time, each holding every row that arrived
 * while the previous one ran: the least a read model costs per request.
 *
 * argv: `<nats url> <stream> <database url>`. IPC: `{ready}` once the table exists;
 * answers `{id, rows, seq}` (rows written, last stream sequence written) to `{id}`.
 */
import { sql } from 'kysely';
import pg from 'pg';
import { DeliverPolicy } from '@nats-io/jetstream';
import { kyselyOn } from '../src/db/connect.ts';
import { connectNats } from '../src/nats/connection.ts';
import { copyRows } from '../src/projections/copy-rows.ts';

const [natsUrl, stream, databaseUrl] = process.argv.slice(2);
const TYPES = { id: 'text', key: 'text', method: 'text', received_at: 'timestamptz', body: 'text' };
/** At most this many rows a transaction, so one never holds the whole backlog. */
const MAX_ROWS = 10_000;

const db = kyselyOn<any>(new pg.Pool({ connectionString: databaseUrl, max: 1 }));
await sql`CREATE TABLE IF NOT EXISTS floor_requests (id text PRIMARY KEY, key text NOT NULL, method text NOT NULL, received_at timestamptz NOT NULL, body text)`.execute(db);
await sql`CREATE TABLE IF NOT EXISTS floor_keys (key text PRIMARY KEY, last_at timestamptz NOT NULL, count integer NOT NULL)`.execute(db);
await sql`CREATE TABLE IF NOT EXISTS floor_checkpoint (name text PRIMARY KEY, seq bigint NOT NULL)`.execute(db);
await sql`INSERT INTO floor_checkpoint VALUES ('floor', 0) ON CONFLICT DO NOTHING`.execute(db);

let pending: Record<string, unknown>[] = [];
let pendingSeq = 0;
let written = 0;
let writtenSeq = 0;
let writing = false;

async function write(): Promise<void> {
  writing = true;
  try {
    while (pending.length) {
      const rows = pending.splice(0, MAX_ROWS);
      const seq = pending.length ? Number((rows[rows.length - 1] as { id: string }).id.split('.')[0]) : pendingSeq;
      // The state the contract keeps per key beside the list (a monitor's last ping and
      // count of pings; an inbound endpoint's likewise): one upsert per distinct key.
      const last = new Map<string, { at: Date; n: number }>();
      for (const r of rows as { key: string; received_at: Date }[]) {
        const k = last.get(r.key);
        if (k) (k.at = r.received_at), k.n++;
        else last.set(r.key, { at: r.received_at, n: 1 });
      }
      await db.transaction().execute(async (trx) => {
        for (const copy of copyRows('floor_requests', rows, TYPES)) await copy.execute(trx);
        await sql`INSERT INTO floor_keys (key, last_at, count)
          SELECT * FROM unnest(${[...last.keys()]}::text[], ${[...last.values()].map((v) => v.at.toISOString())}::timestamptz[], ${[...last.values()].map((v) => v.n)}::int[])
          ON CONFLICT (key) DO UPDATE SET last_at = EXCLUDED.last_at, count = floor_keys.count + EXCLUDED.count`.execute(trx);
        await sql`UPDATE floor_checkpoint SET seq = ${seq} WHERE name = 'floor'`.execute(trx);
      });
      written += rows.length;
      writtenSeq = seq;
    }
  } finally {
    writing = false;
  }
}

const nats = await connectNats(natsUrl!, 'floor-reader');
const consumer = await nats.js.consumers.get(stream!, { deliver_policy: DeliverPolicy.All });
const messages = await consumer.consume({ max_messages: 256 });
process.send!({ ready: true });
process.on('message', (m: { id: number }) => process.send!({ id: m.id, rows: written, seq: writtenSeq }));
process.on('disconnect', () => process.exit(0));

for await (const msg of messages) {
  const records = msg.json<{ k: string; m: string; at: number; b?: string }[]>();
  for (let i = 0; i < records.length; i++) {
    const r = records[i]!;
    pending.push({ id: `${msg.seq}.${i}`, key: r.k, method: r.m, received_at: new Date(r.at), body: r.b ?? null });
  }
  pendingSeq = msg.seq;
  // After this turn's deliveries, so a transaction starts with every message that came together.
  if (!writing) {
    writing = true;
    setImmediate(() =>
      void write().catch((err) => {
        console.error(`floor reader: ${(err as Error).message}`);
        process.exit(1);
      }),
    );
  }
}
