import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { test } from 'node:test';
import { closableServer } from '../src/http/server-close.ts';

const closed = (socket: net.Socket) => new Promise<void>((r) => (socket.destroyed ? r() : socket.once('close', () => r())));

test('closing the server drops connections that never asked anything at once, and lets a busy answer finish', async () => {
  let answer: ((text: string) => void) | undefined;
  let asked: () => void = () => {};
  const answering = new Promise<void>((r) => (asked = r));
  const server = http.createServer((_req, res) => {
    answer = (text) => res.end(text);
    asked();
  });
  const close = closableServer(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as net.AddressInfo).port;

  // One connection waits for an answer; another is open and silent (a client's spare).
  const busy = http.get({ host: '127.0.0.1', port, path: '/slow', agent: false });
  const busyAnswer = new Promise<string>((resolve, reject) => {
    busy.on('response', (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => resolve(text));
    });
    busy.on('error', reject);
  });
  await answering;
  const silent = net.connect(port, '127.0.0.1');
  await new Promise((r) => silent.once('connect', r));
  await new Promise((r) => setImmediate(r));

  const stopped = close();
  await closed(silent);
  // The silent one went first: the busy answer is still under way, and completes.
  assert.equal(busy.destroyed, false);
  answer!('done');
  assert.equal(await busyAnswer, 'done');
  await stopped;
});
