import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { STREAMS } from '../streams/definitions.ts';
import { applyStreams } from '../src/nats/apply-streams.ts';
import { connectNats, type Nats } from '../src/nats/connection.ts';
import { JOURNAL_DEFAULTS, journaledNotifyState, openStateJournal } from '../src/notifier/state-journal.ts';
import { openNotifyState, type NotifyStateStore, type SourceState } from '../src/notifier/state.ts';
import { startTestNats } from './support/nats.ts';

// The notifier's state across lease terms, on a real nats-server: stream NOTIFY_STATE and KV notify-state.
describe('the notifier state journal on NATS', () => {
  let server: { url: string; stop(): Promise<void> };
  let nats: Nats;
  let store: NotifyStateStore;
  const log = () => {};
  const at = '2026-01-01T00:00:00.000Z';
  const state = (failing: boolean, seq: number): SourceState => ({ failing, seq, since: at, execution_id: `exe_${seq}` });
  const term = (signal = new AbortController().signal, limits: Partial<typeof JOURNAL_DEFAULTS> = {}) =>
    journaledNotifyState(store, openStateJournal(nats, log), { ...JOURNAL_DEFAULTS, ...limits, log, signal });
  const messages = async () => (await nats.jsm.streams.info(STREAMS.notifyState.name)).state.messages;

  before(async () => {
    server = await startTestNats();
    nats = await connectNats(server.url, 'notifier state journal test');
    await applyStreams(nats, 1);
    store = await openNotifyState(nats);
  });
  after(async () => {
    await nats.close();
    await server.stop();
  });

  test('a thousand transitions of one turn are one message; the next term knows them all, and a compaction moves the failing ones to KV', async () => {
    const first = term();
    await first.ready;
    const ids = Array.from({ length: 1000 }, (_, i) => `tsk_${i}`);
    for (const id of ids) first.created('org_j', id);
    await Promise.all(ids.map((id, i) => first.put('org_j', id, state(true, i + 1))));
    assert.equal(await messages(), 1);
    // Half recover: they never need a per-key write.
    await Promise.all(ids.slice(0, 500).map((id, i) => first.put('org_j', id, state(false, 2000 + i))));
    assert.equal(await messages(), 2);
    assert.equal(await store.get('org_j', 'tsk_999'), null, 'nothing in KV yet');

    const second = term();
    await second.ready;
    assert.deepEqual(second.peek('org_j', 'tsk_0'), state(false, 2000));
    assert.deepEqual(second.peek('org_j', 'tsk_999'), state(true, 1000));
    assert.equal(second.pending, 500);

    await second.compactNow();
    assert.equal(await messages(), 0, 'the journal is truncated');
    assert.deepEqual(await store.get('org_j', 'tsk_999'), state(true, 1000));
    assert.equal(await store.get('org_j', 'tsk_0'), null, 'recovered in view: never written');

    // A third term finds the journal empty and reads the failing ones from KV.
    const third = term();
    await third.ready;
    assert.equal(third.peek('org_j', 'tsk_999'), undefined);
    assert.deepEqual(await third.get('org_j', 'tsk_999'), state(true, 1000));
    await third.put('org_j', 'tsk_999', state(false, 5000));
    await third.forget('org_j', 'tsk_998');
    await third.compactNow();
    assert.deepEqual(await store.get('org_j', 'tsk_999'), state(false, 5000), 'the KV entry overridden: not failing');
    assert.equal(await store.get('org_j', 'tsk_998'), null, 'forgotten');
  });

  test('a term that ended starts no compaction: the journal stays for the next term', async () => {
    const ended = new AbortController();
    const t = term(ended.signal);
    await t.ready;
    t.created('org_k', 'tsk_1');
    await t.put('org_k', 'tsk_1', state(true, 1));
    ended.abort();
    await t.compactNow();
    assert.equal(await messages(), 1);
    const next = term();
    await next.ready;
    assert.deepEqual(next.peek('org_k', 'tsk_1'), state(true, 1));
    await next.compactNow();
    assert.equal(await messages(), 0);
  });
});
