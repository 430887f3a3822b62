import type { Nats } from './connection.ts';
import { isNoMessage } from './jetstream-errors.ts';

/** Deletes one stored message; already gone is fine, any other error propagates (retry). */
export async function deleteIfStored(nats: Nats, stream: string, seq: number): Promise<void> {
  try {
    await nats.jsm.streams.deleteMessage(stream, seq, false);
  } catch (err) {
    if (!isNoMessage(err)) throw err;
  }
}
