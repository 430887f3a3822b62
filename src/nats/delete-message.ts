import type { JetStreamManager } from '@nats-io/jetstream';
import { isNoMessage } from './jetstream-errors.ts';

/** Deletes one stored message; already gone is fine, any other error propagates (retry). */
export async function deleteIfStored(jsm: JetStreamManager, stream: string, seq: number): Promise<void> {
  try {
    await jsm.streams.deleteMessage(stream, seq, false);
  } catch (err) {
    if (!isNoMessage(err)) throw err;
  }
}
