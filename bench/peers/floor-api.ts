/**
 * The design floor's create API (see floor.ts), in a process of its own as jetcron's API
 * is: `POST /tasks` with a JSON body `{url, …}`, the task's spec made from it, the
 * creates of one event-loop turn stored as one acked JetStream message, and each
 * request answered 201 `{data: task}` once that message is stored. No auth, rate
 * limit, schema validation or idempotency: the least an HTTP create can do and still
 * answer only what is durable.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import { jetstream } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { taskSpec } from './floor-config.ts';

const natsUrl = process.env.FLOOR_NATS_URL!;
const nc = await connect({ servers: natsUrl });
const js = jetstream(nc);

let turn: { jobs: unknown[]; answers: { res: ServerResponse; text: string }[] } | null = null;
const commit = async () => {
  const t = turn!;
  turn = null;
  try {
    await js.publish('floor.creates', JSON.stringify({ type: 'create', jobs: t.jobs }));
    for (const a of t.answers) answer(a.res, 201, a.text);
  } catch (err) {
    for (const a of t.answers) answer(a.res, 503, JSON.stringify({ error: { message: (err as Error).message } }));
  }
};
const answer = (res: ServerResponse, status: number, text: string) => {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
};

const server = createServer((req: IncomingMessage, res: ServerResponse) => {
  if (req.method !== 'POST' || req.url !== '/tasks') return answer(res, 404, '{"error":{"message":"not found"}}');
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    let body: { url?: unknown };
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { url?: unknown };
    } catch {
      return answer(res, 400, '{"error":{"message":"invalid JSON"}}');
    }
    if (typeof body.url !== 'string') return answer(res, 422, '{"error":{"message":"url is required","field":"url"}}');
    const id = randomUUID();
    const task = { ...taskSpec(id, id), url: body.url };
    turn ??= { jobs: [], answers: [] };
    if (turn.jobs.length === 0) setImmediate(commit);
    turn.jobs.push({ id, lane: id, task });
    turn.answers.push({ res, text: JSON.stringify({ data: task }) });
  });
});
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.send?.({ port: typeof address === 'object' && address ? address.port : 0 });
});
process.on('disconnect', () => process.exit(0));
