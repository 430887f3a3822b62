import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { createLogger, logFunction } from '../src/lib/logger.ts';

function sink(isTTY = false) {
  const lines: string[] = [];
  const stream = Object.assign(new Writable({ write(chunk, _enc, done) { lines.push(...String(chunk).split('\n').filter(Boolean)); done(); } }), { isTTY });
  return { stream, lines };
}

test('JSON lines: level, time, role, pid, the message and the fields; ERROR and WARN prefixes set the level', () => {
  const { stream, lines } = sink();
  const log = logFunction(createLogger({ role: 'dispatcher', destination: stream }));
  log('attempt sent', { execution_id: 'exe_1', attempt: 2 });
  log('ERROR the projector failed');
  log('WARN slow start');
  const [a, b, c] = lines.map((l) => JSON.parse(l));
  assert.equal(a.level, 'info');
  assert.equal(a.role, 'dispatcher');
  assert.equal(a.pid, process.pid);
  assert.ok(!Number.isNaN(Date.parse(a.time)));
  assert.deepEqual([a.msg, a.execution_id, a.attempt], ['attempt sent', 'exe_1', 2]);
  assert.deepEqual([b.level, b.msg], ['error', 'the projector failed']);
  assert.deepEqual([c.level, c.msg], ['warn', 'slow start']);
});

test('fields that could hold a secret are redacted, at the top and one level down', () => {
  const { stream, lines } = sink();
  const log = logFunction(createLogger({ role: 'api', destination: stream }));
  log('oops', { api_key: 'pk_x.sk_secret', request: { headers: { authorization: 'Bearer t0k3n' }, body: 'card=4242' }, webhook_secret: 'whsec_1' });
  // Whole values: a bare "4242" can be part of the line's pid or time.
  assert.ok(!/sk_secret|t0k3n|card=4242|whsec_1/.test(lines[0]!), lines[0]);
  const line = JSON.parse(lines[0]!);
  assert.equal(line.api_key, '***');
  assert.equal(line.request.headers, '***');
  assert.equal(line.request.body, '***');
});

test('debug lines exist only at LOG_LEVEL=debug, and their fields are built only then', () => {
  const off = sink();
  const quiet = logFunction(createLogger({ role: 'api', destination: off.stream }));
  let built = 0;
  quiet.debug?.('request', () => (built++, { status: 200 }));
  assert.equal(quiet.debug, undefined);
  assert.equal(built, 0);
  const on = sink();
  const loud = logFunction(createLogger({ role: 'api', level: 'debug', destination: on.stream }));
  loud.debug?.('request', () => (built++, { status: 200 }));
  assert.equal(built, 1);
  assert.equal(JSON.parse(on.lines[0]!).level, 'debug');
});

test('on a terminal: one readable line per entry with the role, not JSON', () => {
  const { stream, lines } = sink(true);
  const log = logFunction(createLogger({ role: 'api', destination: stream }));
  log('listening', { port: 8080 });
  assert.equal(lines.length, 1);
  const plain = lines[0]!.replace(/\x1b\[[0-9;]*m/g, '');
  assert.match(plain, /INFO: \[api\] listening/);
  assert.match(plain, /"port":8080/);
  assert.throws(() => JSON.parse(lines[0]!));
});
