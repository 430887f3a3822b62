import type { PortableStatement } from './portable-statements.ts';

/** What a rebuild's preparing thread is given (`workerData`). */
export interface PrepareThreadConfig {
  natsUrl: string;
  stream: string;
  /** The range to read, both ends included. */
  startSeq: number;
  through: number;
  /** Events per batch (a batch is whole messages: its last may take it past this). */
  maxBatch: number;
}

/** From the preparing thread to the writing one, in stream order. */
export type PreparedMessage =
  /** The statements of messages `first`–`last`; the checkpoint goes to `last` with them. */
  | { type: 'batch'; first: number; last: number; events: number; statements: PortableStatement[] }
  /**
   * The message at `seq` did not decode or apply here: the thread stops, and every
   * message from the end of its last batch through `seq` is the careful path's (the one
   * that records and skips a poison event).
   */
  | { type: 'cannot-prepare'; seq: number; reason: string }
  /** Every message of the range was in a batch (a deleted tail needs none). */
  | { type: 'end' }
  | { type: 'log'; message: string };

/** From the writing thread: a batch was written, so the preparing thread may run one more ahead. */
export interface WrittenMessage {
  type: 'written';
}

/** Batches prepared and not yet written, at most: one being written, one waiting, one being prepared. */
export const BATCHES_AHEAD = 2;
