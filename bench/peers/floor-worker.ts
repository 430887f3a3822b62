/**
 * The design floor's worker (see floor.ts): the least a process can do per job and
 * still keep jetcron's guarantees, written as plainly as possible in one event loop,
 * as jetcron's worker process is. It reads the log from its start with one ordered
 * consumer; holds lanes in memory; sends each lane's head (signed: an HMAC-SHA256 per
 * request, as jetcron signs every request); appends the results of a turn as one commit
 * per partition, one commit in flight per partition, each guarded by the partition's
 * last sequence (the fence); starts a lane's next job only once the commit holding the
 * previous one's result is stored; and projects every create and result from the same
 * read into a Postgres row per job (set-based statements, one transaction per batch
 * read, a create and its result merged when they arrive together).
 */
import { createHmac } from 'node:crypto';
import { jetstream, type JetStreamClient } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import pg from 'pg';
import { Agent, request } from 'undici';
import { serveWorker } from './child.ts';
import { FLOOR_STREAM, type FloorWorkerConfig } from './floor-config.ts';

const SECRET = 'whsec_floor_bench_secret';

/** A create as stored: the task's whole spec, as jetcron keeps what it needs to send it again. */
interface Create {
  id: string;
  lane: string;
  task: Record<string, unknown>;
}

/** A result as recorded: the request as sent and the response, as every attempt of jetcron's is. */
interface Result {
  id: string;
  status: number;
  started_at: string;
  finished_at: string;
  request: { method: string; url: string; headers: Record<string, string> };
  response_headers: Record<string, string | string[] | undefined>;
  response_body: string;
}

type FloorRecord = { type: 'create'; jobs: Create[] } | { type: 'results'; results: Result[] };

await serveWorker<FloorWorkerConfig>(async (config) => {
  const nc = await connect({ servers: config.natsUrl });
  const js = jetstream(nc);
  const db = new pg.Pool({ connectionString: config.databaseUrl, max: 1 });
  const owner = createOwner(js, config);
  const projector = createProjector(db);

  const consumer = await js.consumers.get(FLOOR_STREAM, { deliver_policy: 'all' } as never);
  const messages = await consumer.consume({ max_messages: 2_000 });
  let batch: FloorRecord[] = [];
  let scheduled = false;
  const turn = () => {
    scheduled = false;
    const records = batch;
    batch = [];
    for (const r of records) if (r.type === 'create') owner.created(r.jobs);
    owner.pump();
    projector.apply(records);
  };
  void (async () => {
    for await (const m of messages) {
      batch.push(m.json<FloorRecord>());
      if (!scheduled) {
        scheduled = true;
        setImmediate(turn);
      }
    }
  })();
  return async () => {
    await messages.close();
    await projector.idle();
    await nc.drain();
    await db.end();
  };
});

function createOwner(js: JetStreamClient, config: FloorWorkerConfig) {
  const agent = new Agent({ connections: 128, pipelining: 1 });
  const lanes = new Map<string, Create[]>();
  const busy = new Set<string>();
  // Lanes with a job to start, oldest first (a head index: a queue of 10,000 lane-free jobs is never shifted).
  let ready: string[] = [];
  let head = 0;
  let inFlight = 0;
  const logs = Array.from({ length: config.partitions }, (_, p) => createPartitionLog(js, p));
  const partitionOf = (lane: string) => {
    let h = 0;
    for (let i = 0; i < lane.length; i++) h = (h * 31 + lane.charCodeAt(i)) | 0;
    return Math.abs(h) % config.partitions;
  };

  const send = async (job: Create) => {
    const startedAt = new Date();
    const url = `${config.targetUrl}/hit?id=${encodeURIComponent(job.id)}`;
    const body = `{"id":${JSON.stringify(job.id)}}`;
    const timestamp = String(Math.floor(startedAt.getTime() / 1000));
    // Signed as jetcron signs every request.
    const headers = {
      'content-type': 'application/json',
      'x-floor-execution-id': job.id,
      'x-floor-timestamp': timestamp,
      'x-floor-signature': `sha256=${createHmac('sha256', SECRET).update(`${timestamp}.${body}`).digest('hex')}`,
    };
    let status = 0;
    let responseHeaders: Result['response_headers'] = {};
    let responseBody = '';
    try {
      const res = await request(url, { method: 'POST', headers, body, dispatcher: agent });
      status = res.statusCode;
      responseHeaders = res.headers;
      responseBody = await res.body.text();
    } catch (err) {
      responseBody = (err as Error).message;
    }
    const result: Result = {
      id: job.id, status, started_at: startedAt.toISOString(), finished_at: new Date().toISOString(),
      request: { method: 'POST', url, headers }, response_headers: responseHeaders, response_body: responseBody,
    };
    await logs[partitionOf(job.lane)]!.append(result);
    inFlight--;
    busy.delete(job.lane);
    if (lanes.get(job.lane)?.length) ready.push(job.lane);
    pump();
  };

  function pump() {
    while (inFlight < config.concurrency && head < ready.length) {
      const lane = ready[head++]!;
      if (head === ready.length) (ready = []), (head = 0);
      const queue = lanes.get(lane);
      const job = queue?.shift();
      if (!job) continue;
      if (queue!.length === 0) lanes.delete(lane);
      busy.add(lane);
      inFlight++;
      void send(job);
    }
  }

  return {
    created(jobs: Create[]) {
      for (const job of jobs) {
        const lane = config.shape === 'free' ? job.id : job.lane;
        const queue = lanes.get(lane);
        const own = config.shape === 'free' ? { ...job, lane } : job;
        if (queue) queue.push(own);
        else {
          lanes.set(lane, [own]);
          if (!busy.has(lane)) ready.push(lane);
        }
      }
    },
    pump,
  };
}

/** One partition's results: group commits, one in flight, each expecting the partition's last sequence. */
function createPartitionLog(js: JetStreamClient, partition: number) {
  const subject = `floor.results.${partition}`;
  let tail = 0;
  let queue: { result: Result; resolve: () => void }[] = [];
  let writing = false;
  let scheduled = false;
  const flush = async () => {
    scheduled = false;
    if (writing) return;
    writing = true;
    while (queue.length) {
      const batch = queue;
      queue = [];
      const record: FloorRecord = { type: 'results', results: batch.map((b) => b.result) };
      const ack = await js.publish(subject, JSON.stringify(record), { expect: { lastSubjectSequence: tail } });
      tail = ack.seq;
      for (const b of batch) b.resolve();
    }
    writing = false;
  };
  return {
    append(result: Result): Promise<void> {
      return new Promise((resolve) => {
        queue.push({ result, resolve });
        if (!scheduled && !writing) {
          scheduled = true;
          setImmediate(flush);
        }
      });
    },
  };
}

function createProjector(db: pg.Pool) {
  let chain: Promise<void> = Promise.resolve();
  const write = async (records: FloorRecord[]) => {
    interface Row { lane: string; task: string; status: string; result: Result | null }
    const created = new Map<string, Row>();
    const results: Result[] = [];
    for (const r of records) {
      if (r.type === 'create') for (const j of r.jobs) created.set(j.id, { lane: j.lane, task: JSON.stringify(j.task), status: 'pending', result: null });
      else
        for (const res of r.results) {
          const row = created.get(res.id);
          // A create and its result in one read: one row written once.
          if (row) Object.assign(row, { status: res.status === 200 ? 'success' : 'failed', result: res });
          else results.push(res);
        }
    }
    const json = (v: unknown) => (v === undefined ? null : JSON.stringify(v));
    const client = await db.connect();
    try {
      await client.query("BEGIN; SET LOCAL synchronous_commit = 'off'");
      if (created.size) {
        const ids = [...created.keys()];
        const rows = [...created.values()];
        await client.query(
          `INSERT INTO floor_tasks (id, lane, doc) SELECT * FROM unnest($1::text[], $2::text[], $3::jsonb[])`,
          [ids, rows.map((r) => r.lane), rows.map((r) => r.task)],
        );
        await client.query(
          `INSERT INTO floor_executions (id, lane, status, status_code, started_at, finished_at, request, response_headers, response_body)
           SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::timestamptz[], $6::timestamptz[], $7::jsonb[], $8::jsonb[], $9::text[])`,
          [ids, rows.map((r) => r.lane), rows.map((r) => r.status), rows.map((r) => r.result?.status ?? null), rows.map((r) => r.result?.started_at ?? null),
            rows.map((r) => r.result?.finished_at ?? null), rows.map((r) => json(r.result?.request)), rows.map((r) => json(r.result?.response_headers)), rows.map((r) => r.result?.response_body ?? null)],
        );
      }
      if (results.length) {
        await client.query(
          `UPDATE floor_executions e SET status = u.status, status_code = u.code, started_at = u.started, finished_at = u.finished,
             request = u.request, response_headers = u.headers, response_body = u.body
           FROM unnest($1::text[], $2::text[], $3::int[], $4::timestamptz[], $5::timestamptz[], $6::jsonb[], $7::jsonb[], $8::text[])
             AS u(id, status, code, started, finished, request, headers, body)
           WHERE e.id = u.id`,
          [results.map((r) => r.id), results.map((r) => (r.status === 200 ? 'success' : 'failed')), results.map((r) => r.status), results.map((r) => r.started_at),
            results.map((r) => r.finished_at), results.map((r) => json(r.request)), results.map((r) => json(r.response_headers)), results.map((r) => r.response_body)],
        );
      }
      await client.query('COMMIT');
    } finally {
      client.release();
    }
  };
  // Batches read while a transaction is open go together in the next one.
  let pending: FloorRecord[] = [];
  let running = false;
  const drain = async () => {
    running = true;
    while (pending.length) {
      const records = pending;
      pending = [];
      await write(records);
    }
    running = false;
  };
  return {
    apply(records: FloorRecord[]) {
      pending.push(...records);
      if (!running) chain = drain();
    },
    idle: () => chain,
  };
}
