import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Kvm } from '@nats-io/kv';
import { KV_BUCKETS } from '../streams/definitions.ts';
import { decodeKey, keyId, openSecretBox, SECRETS_KEY_ENTRY } from '../src/nats/secret-box.ts';
import { connectNats, type Nats } from '../src/nats/connection.ts';
import { startTestNats } from './support/nats.ts';

// Processes without JETCRON_SECRETS_KEY share one generated key through the KV bucket `config`.
describe('secret box key shared through NATS', () => {
  let server: { url: string; stop(): Promise<void> };
  const conns: Nats[] = [];
  before(async () => {
    server = await startTestNats();
    for (let i = 0; i < 4; i++) conns.push(await connectNats(server.url, `secret-box test ${i}`));
  });
  after(async () => {
    for (const c of conns) await c.close();
    await server.stop();
  });

  test('racing processes (bucket not even created yet) end with one key: one seals, the others open', async () => {
    const logs: string[][] = conns.map(() => []);
    const boxes = await Promise.all(conns.map((nats, i) => openSecretBox({ nats, log: (m) => void logs[i]!.push(m) })));
    const kids = new Set(boxes.map((b) => b.kid));
    assert.equal(kids.size, 1);
    const sealed = boxes[0]!.seal({ TOKEN: 'shh' });
    for (const box of boxes.slice(1)) assert.deepEqual(box.open(sealed), { TOKEN: 'shh' });

    // Each logged once, saying where the key is; exactly one generated it.
    for (const l of logs) {
      assert.equal(l.length, 1);
      assert.match(l[0]!, /JETCRON_SECRETS_KEY/);
    }
    assert.equal(logs.filter((l) => /generated/.test(l[0]!)).length, 1);

    const kv = await new Kvm(conns[0]!.nc).open(KV_BUCKETS.config.name);
    const stored = (await kv.get(SECRETS_KEY_ENTRY))!.string();
    assert.equal(keyId(decodeKey(stored)!), boxes[0]!.kid);
    assert.equal((await kv.status()).history, 1);
  });

  test('a later process reads the stored key; setting JETCRON_SECRETS_KEY to it keeps secrets readable', async () => {
    const first = await openSecretBox({ nats: conns[0]!, log: () => {} });
    const sealed = first.seal({ A: '1', B: '2' });
    const later = await openSecretBox({ nats: conns[3]!, log: () => {} });
    assert.deepEqual(later.open(sealed), { A: '1', B: '2' });

    const kv = await new Kvm(conns[0]!.nc).open(KV_BUCKETS.config.name);
    const stored = (await kv.get(SECRETS_KEY_ENTRY))!.string();
    const pinned = await openSecretBox({ nats: conns[1]!, envKey: stored, log: () => {} });
    assert.deepEqual(pinned.open(sealed), { A: '1', B: '2' });
  });
});
