import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import express from 'express';
import { errorMiddleware } from '../src/http/errors.ts';
import { ApiError } from '../src/lib/errors.ts';

// The error middleware on a real express app and socket: which failures become which answers.
let base = '';
let close: () => void;
const logged: string[] = [];
before(async () => {
  const app = express();
  const fail = (err: unknown) => (_req: express.Request, _res: express.Response, next: express.NextFunction) => next(err);
  const natsTimeout = Object.assign(new Error('TIMEOUT'), { name: 'TimeoutError' });
  app.get('/nats-timeout', fail(natsTimeout));
  app.get('/no-stream', fail(new Error('no JetStream stream stored the message (status 503)')));
  app.get('/pg-down', fail(Object.assign(new Error('the database system is shutting down'), { code: '57P03' })));
  app.get('/bug', fail(new TypeError("Cannot read properties of undefined (reading 'id')")));
  app.get('/api-error', fail(new ApiError(422, 'bad', 'url')));
  app.use(errorMiddleware((m) => logged.push(m)));
  const server = app.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  close = () => server.close();
});
after(() => close());

test('a store that cannot answer now is 503 with Retry-After, never 500', async () => {
  for (const path of ['/nats-timeout', '/no-stream', '/pg-down']) {
    const res = await fetch(base + path);
    assert.equal(res.status, 503, path);
    assert.equal(res.headers.get('retry-after'), '1', path);
    const body = await res.json() as any;
    assert.equal(body.error.field, null);
    assert.doesNotMatch(body.error.message, /JetStream|database|TIMEOUT/, 'a 5xx body reveals nothing');
  }
});

test('a bug is still a 500 that reveals nothing, and is logged with its stack', async () => {
  const res = await fetch(`${base}/bug`);
  assert.equal(res.status, 500);
  assert.equal(res.headers.get('retry-after'), null);
  assert.deepEqual(await res.json(), { error: { message: 'Internal server error', field: null } });
  assert.ok(logged.some((l) => l.includes('TypeError')));
  const api = await fetch(`${base}/api-error`);
  assert.equal(api.status, 422);
  assert.deepEqual(await api.json(), { error: { message: 'bad', field: 'url' } });
});
