/**
 * Events in a two-thread rebuild's batch. The writing thread waits for the first batch
 * to be prepared, and the preparing thread for the last to be written: each end costs a
 * whole batch's time with one thread idle (at 40,000 events about a tenth of a rebuild
 * of 250,000). So the first batches are small and grow (`first`, twice that, …), and
 * near the range's end a batch ships once it holds as many events as seem to be left,
 * so the batches shrink again to `first`. Between the ends, `max`.
 */
export interface BatchLimitInput {
  /** The largest batch (the rebuild's batch size). */
  max: number;
  /** The smallest batch at either end. */
  first: number;
  /** Batches shipped so far. */
  shipped: number;
  /** Events and messages read so far; the messages still to read (sequences through the range's end). */
  eventsRead: number;
  messagesRead: number;
  messagesLeft: number;
}

/** The batch ships once it holds this many events. */
export function batchLimit(i: BatchLimitInput): number {
  const ramp = i.first * 2 ** Math.min(i.shipped, 30);
  // Events a message holds, so far: the store's shape (single events, commits) shows early.
  const left = i.messagesRead ? (i.messagesLeft * i.eventsRead) / i.messagesRead : Infinity;
  return Math.min(i.max, ramp, Math.max(i.first, left));
}
