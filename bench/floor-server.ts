/**
 * The acceptance floor's server (bench/acceptance-floor.ts), a forked child with an
 * event loop of its own. `bare`: a `node:http` server that reads the body and answers
 * 200 at once (the benches' yardstick, as `target-server.ts --plain`). `durable`: the
 * least a server can do and still keep the contract's promise for a ping or an inbound
 * request (stored in JetStream before its 200): each request becomes a small record,
 * the records of one event-loop turn are appended as ONE JetStream message, and every
 * request of that turn is answered when its ack returns. No validation, no lookup of a
 * monitor or an endpoint, no events: whatever jetcron does beyond this is its own work.
 *
 * argv: `bare` | `durable <nats url> <subject>`. Tells the parent `{ready, port}` over IPC.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { connectNats } from '../src/nats/connection.ts';

const [mode, natsUrl, subject] = process.argv.slice(2);
const ANSWER = '{"ok":true}';
const ANSWER_HEADERS = { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(ANSWER)) };

/** What the floor stores per request: enough to list it (which monitor or endpoint, when, the body). */
interface Stored {
  /** The path's last segment: a ping's token or an endpoint's slug. */
  k: string;
  m: string;
  at: number;
  b?: string;
}

const answer = (res: http.ServerResponse) => res.writeHead(200, ANSWER_HEADERS).end(ANSWER);
const keyOf = (url: string) => url.slice(url.lastIndexOf('/') + 1);

/** Reads the body (a ping's GET has none), then `done` with it. */
function withBody(req: http.IncomingMessage, done: (body: string | undefined) => void): void {
  if (req.method === 'GET' || req.method === 'HEAD') {
    req.resume();
    done(undefined);
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => done(chunks.length === 1 ? chunks[0]!.toString() : Buffer.concat(chunks).toString()));
}

async function durableHandler(): Promise<http.RequestListener> {
  // The project's connection: its acked publisher and its one socket write per loop turn.
  const nats = await connectNats(natsUrl!, 'floor-server');
  let turn: { records: Stored[]; answers: http.ServerResponse[] } | undefined;
  let seq = 0;
  const prefix = `${process.pid}-${Date.now()}-`;
  // One message per loop turn: setImmediate runs after this turn's I/O callbacks.
  const commit = () => {
    const t = turn!;
    turn = undefined;
    const data = Buffer.from(JSON.stringify(t.records));
    nats.publish(subject!, data, { msgId: prefix + seq++, traceparent: undefined }).then(
      () => {
        for (const res of t.answers) answer(res);
      },
      () => {
        for (const res of t.answers) res.writeHead(503).end();
      },
    );
  };
  return (req, res) =>
    withBody(req, (body) => {
      if (!turn) {
        turn = { records: [], answers: [] };
        setImmediate(commit);
      }
      turn.records.push({ k: keyOf(req.url ?? ''), m: req.method ?? 'GET', at: Date.now(), b: body });
      turn.answers.push(res);
    });
}

const handler: http.RequestListener = mode === 'durable' ? await durableHandler() : (req, res) => withBody(req, () => answer(res));
const server = http.createServer({ keepAliveTimeout: 60_000 }, handler);
server.listen(0, '127.0.0.1', () => process.send!({ ready: true, port: (server.address() as AddressInfo).port }));
process.on('disconnect', () => process.exit(0));
