import { Kvm, type KV } from '@nats-io/kv';
import { KV_BUCKETS } from '../../streams/definitions.ts';
import { decodeJson, encodeJson } from '../lib/json.ts';
import type { Nats } from '../nats/connection.ts';
import { isWrongLastSequence } from '../nats/jetstream-errors.ts';
import type { TryResult } from './send.ts';

/**
 * Where one delivery stands, kept in KV `notify-sends` so that a notifier killed in the
 * middle of a send cannot send it again: `sending` is written before a try's request
 * leaves, `waiting` (a retry is due) or `ended` (its result) after it came back. A
 * delivery that finds `sending` was cut short by a crash (or a stop that gave up on
 * it): the receiver may have it already.
 */
export type SendState =
  | { state: 'sending'; try: number }
  | { state: 'waiting'; try: number }
  | { state: 'ended'; tries: number; result: TryResult };

export interface SendLedger {
  /** The state and its revision (0: none yet). */
  get(key: string): Promise<{ value: SendState | null; revision: number }>;
  /** Writes `value` over `revision` (0: create); false when another wrote first (then that one goes on). */
  put(key: string, value: SendState, revision: number): Promise<number | false>;
}

export async function openSendLedger(nats: Nats): Promise<SendLedger> {
  const kv: KV = await new Kvm(nats.nc).open(KV_BUCKETS.notifySends.name);
  return {
    async get(key) {
      const e = await kv.get(key);
      return e && e.operation === 'PUT' && e.value.length ? { value: decodeJson<SendState>(e.value), revision: e.revision } : { value: null, revision: e?.revision ?? 0 };
    },
    async put(key, value, revision) {
      try {
        return revision === 0 ? await kv.create(key, encodeJson(value)) : await kv.update(key, encodeJson(value), revision);
      } catch (err) {
        if (isWrongLastSequence(err)) return false;
        throw err;
      }
    },
  };
}

