import { Worker } from 'node:worker_threads';
import { STREAMS } from '../../streams/definitions.ts';
import { isTransient } from '../lib/transient.ts';
import { inLoadTransaction, LoadRolledBack, type CommitBatch } from './load-transaction.ts';
import { fromPortable } from './portable-statements.ts';
import type { PrepareThreadConfig, PreparedMessage, WrittenMessage } from './prepare-protocol.ts';
import { batchCommitter, LostCommits, readCheckpoint, runProjection, writeAll, writeCheckpoint, type ProjectorDeps } from './projector.ts';

export interface TwoThreadOptions {
  natsUrl: string;
  /** The range's last sequence: the stream's last when the rebuild began. */
  through: number;
  /** Events per batch (and per commit). */
  maxBatch: number;
  /** Sees each preparing thread as it starts (tests stop one). */
  onThread?: (thread: Worker) => void;
  /**
   * Tables the rebuild just made, empty: a run from the start writes them in one
   * transaction that truncates them first, its COPYs with FREEZE (load-transaction.ts:
   * no WAL with `wal_level = minimal`). Without it, from a later checkpoint, or after a
   * batch failed inside that transaction, one commit a batch.
   */
  freshTables?: readonly string[];
  /** Sees each batch's last sequence once it is written (committed, or released inside the load transaction). */
  onWritten?: (seq: number) => void;
}

/** How one preparing thread's run ended. */
type Outcome =
  | { kind: 'done' }
  /** Messages through `through` need the careful path (a commit or a message failed). */
  | { kind: 'careful'; through: number }
  /** Start again from the checkpoint (Postgres lost commits, or was away for a moment). */
  | { kind: 'again'; waitMs: number }
  | { kind: 'stopped' };

/**
 * Projects the log from the checkpoint through `through` on two threads: a preparing
 * thread (prepare-thread.ts) reads, decodes and encodes each batch's statements while
 * this one writes the previous batch to Postgres, each batch in one transaction with
 * its checkpoint, as `runProjection` commits. The caller holds the projector lease;
 * `signal` aborting (the lease lost) stops both threads after the commit in flight.
 *
 * A batch whose commit fails, or a message the preparing thread cannot decode or
 * apply, goes through `runProjection`'s careful path (one commit at a time, by upserts,
 * an event at fault recorded and skipped, as the live projector does); then a new
 * preparing thread goes on from the checkpoint. A preparing thread that fails is an
 * error: the checkpoint stays at the last batch written, short of `through`.
 */
export async function projectOnTwoThreads(deps: ProjectorDeps, signal: AbortSignal, opts: TwoThreadOptions): Promise<void> {
  const commitBatch = batchCommitter(deps);
  let loading = !!opts.freshTables?.length;
  while (!signal.aborted) {
    const from = (await readCheckpoint(deps.db)) + 1;
    if (from > opts.through) return;
    // Checkpoint 0: nothing committed yet, so the fresh tables are still empty.
    const outcome = loading && from === 1
      ? await inLoadTransaction(deps, opts.freshTables!, (commit) => writeFromThread(deps, signal, commit, opts, from, true)).catch((err: unknown): Outcome => {
        if (!(err instanceof LoadRolledBack)) return againIfTransient(err);
        // Once: the batch at fault goes through the careful path after the batches before it are committed.
        deps.log(`projector: ${err.message}; all of it rolled back, projecting again one commit a batch`);
        loading = false;
        return { kind: 'again', waitMs: 0 };
      })
      : await writeFromThread(deps, signal, commitBatch, opts, from, false);
    if (outcome.kind === 'done') return writeCheckpoint(deps.db, opts.through);
    if (outcome.kind === 'careful') await runProjection(deps, signal, { through: outcome.through, maxBatch: opts.maxBatch, copyCreated: false });
    if (outcome.kind === 'again') await new Promise((r) => setTimeout(r, outcome.waitMs));
  }
}

/** The load transaction's own commit failed for a moment (Postgres away): from the checkpoint again, as for a batch's commit. */
function againIfTransient(err: unknown): Outcome {
  if (isTransient(err)) return { kind: 'again', waitMs: 500 };
  throw err;
}

/** One preparing thread from `from` through the range's end, its batches committed as they come. */
async function writeFromThread(
  deps: ProjectorDeps,
  signal: AbortSignal,
  commitBatch: CommitBatch,
  opts: TwoThreadOptions,
  from: number,
  /** The COPYs with FREEZE (inside the load transaction). */
  freeze: boolean,
): Promise<Outcome> {
  const config: PrepareThreadConfig = { natsUrl: opts.natsUrl, stream: STREAMS.events.name, startSeq: from, through: opts.through, maxBatch: opts.maxBatch };
  const thread = startPrepareThread(config);
  opts.onThread?.(thread);
  let committed = from - 1;
  // Commits one after another, in the order the batches came.
  let writing: Promise<void> = Promise.resolve();
  let settled = false;
  /** The thread said its last word ('end', 'cannot-prepare'): its exit is expected. */
  let finalWord = false;
  let settle!: (outcome: Outcome | Error) => void;
  const ended = new Promise<Outcome | Error>((resolve) => {
    settle = (outcome) => {
      if (settled) return;
      settled = true;
      resolve(outcome);
    };
  });
  const then = (step: () => Promise<void> | void) => {
    writing = writing.then(() => (settled ? undefined : step())).catch((err: Error) => settle(err));
  };
  const written: WrittenMessage = { type: 'written' };
  thread.on('message', (m: PreparedMessage) => {
    switch (m.type) {
      case 'log':
        return deps.log(m.message);
      case 'batch':
        return then(async () => {
          try {
            await commitBatch(writeAll(fromPortable(m.statements, { freeze })), m.last, committed);
          } catch (err) {
            if (err instanceof LostCommits) return settle({ kind: 'again', waitMs: 0 });
            if (isTransient(err)) {
              deps.log(`projector: a pipelined commit failed (${(err as Error).message}); going on from the checkpoint`);
              return settle({ kind: 'again', waitMs: 500 });
            }
            deps.log(`projector: a pipelined commit through seq ${m.last} failed (${(err as Error).message}); going on from the checkpoint one batch at a time through seq ${m.last}`);
            return settle({ kind: 'careful', through: m.last });
          }
          committed = m.last;
          opts.onWritten?.(m.last);
          thread.postMessage(written);
        });
      case 'cannot-prepare':
        finalWord = true;
        return then(() => {
          deps.log(`projector: seq ${m.seq} could not be prepared (${m.reason}); going on from the checkpoint one batch at a time through seq ${m.seq}`);
          settle({ kind: 'careful', through: m.seq });
        });
      case 'end':
        finalWord = true;
        return then(() => settle({ kind: 'done' }));
      default:
        m satisfies never;
    }
  });
  thread.on('error', (err) => settle(new Error(`the rebuild's preparing thread failed: ${err.message}`)));
  thread.on('exit', (code) => {
    if (!finalWord) settle(new Error(`the rebuild's preparing thread stopped (exit code ${code}) before the end of the log`));
  });
  const stop = () => settle({ kind: 'stopped' });
  signal.addEventListener('abort', stop, { once: true });
  if (signal.aborted) stop();
  const outcome = await ended;
  signal.removeEventListener('abort', stop);
  // The commit in flight ends first: nothing is written once this returns.
  await writing.catch(() => {});
  await thread.terminate();
  if (outcome instanceof Error) throw outcome;
  return outcome;
}

/** The preparing thread's file beside this one, as this one is (Node 24 strips the types of both). */
export function startPrepareThread(config: PrepareThreadConfig): Worker {
  const ext = import.meta.url.endsWith('.ts') ? 'ts' : 'js';
  return new Worker(new URL(`./prepare-thread.${ext}`, import.meta.url), { workerData: config });
}
