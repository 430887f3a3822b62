import { SUBJECTS } from '../../../streams/subjects.ts';
import type { EventStore } from '../store.ts';
import { parentOf, seqHintOf } from '../../lib/ids.ts';
import type { TaskCreatedEvent } from '../batch/types.ts';
import type { TaskEvent } from './types.ts';

/**
 * A task created in a commit of creates that has not changed since: its `TaskCreated`,
 * read from the commit its id names (`memberId`); null for any other id, or one no
 * commit holds. A batch's commit, and a turn's before 2026-11-26, is its subject's one
 * message; a turn's since then is on one of the organization's create subjects, read on
 * from the sequence its id names (`withSeqHint`) to the message that holds the task.
 */
export async function createdInBatch(store: EventStore, orgId: string, taskId: string): Promise<TaskCreatedEvent | null> {
  return (await createdInBatchAt(store, orgId, taskId))?.event ?? null;
}

/** `createdInBatch`, with the stream sequence of the commit that holds the create. */
export async function createdInBatchAt(store: EventStore, orgId: string, taskId: string): Promise<{ event: TaskCreatedEvent; seq: number } | null> {
  const batchId = parentOf(taskId, 'cmd');
  if (!batchId) return null;
  const recent = recentBatches(store);
  // By organization too: another organization's subjects never hold it.
  const key = `${orgId} ${batchId}`;
  const known = recent.get(key);
  if (known) {
    // Most recently used last.
    recent.delete(key);
    recent.set(key, known);
    return found(known, taskId);
  }
  // Commands on tasks of one commit at once (a bulk job's group) read and decode it
  // once: the first read is shared while it runs.
  const reading = readingOf(store);
  let read = reading.get(key);
  if (!read) {
    read = readCreates(store, orgId, batchId, taskId).finally(() => reading.delete(key));
    reading.set(key, read);
  }
  let creates = await read;
  // Shared, the read looked for another task of the commit: one it does not hold (an id
  // naming no task) is looked for on its own, as it always was.
  if (!creates?.creates.has(taskId)) creates = await readCreates(store, orgId, batchId, taskId);
  if (!creates) return null;
  recent.set(key, creates);
  if (recent.size > RECENT_BATCHES) recent.delete(recent.keys().next().value!);
  return found(creates, taskId);
}

/** A commit's creates by task id, and the commit's stream sequence. */
interface Creates {
  seq: number;
  creates: Map<string, TaskCreatedEvent>;
}

function found(c: Creates, taskId: string): { event: TaskCreatedEvent; seq: number } | null {
  const event = c.creates.get(taskId);
  return event ? { event, seq: c.seq } : null;
}

async function readCreates(store: EventStore, orgId: string, batchId: string, taskId: string): Promise<Creates | null> {
  const hint = seqHintOf(batchId);
  const stored = hint === null ? await store.lastMessage<TaskEvent>(SUBJECTS.batch(orgId, batchId)) : await findCommit(store, SUBJECTS.creates(orgId, batchId), hint, taskId);
  if (!stored) return null;
  const creates = new Map<string, TaskCreatedEvent>();
  for (const e of stored.events) if (e.type === 'TaskCreated') creates.set(e.data.task.id, e as TaskCreatedEvent);
  return { seq: stored.seq, creates };
}

const readingByStore = new WeakMap<EventStore, Map<string, Promise<Creates | null>>>();
function readingOf(store: EventStore): Map<string, Promise<Creates | null>> {
  let reading = readingByStore.get(store);
  if (!reading) readingByStore.set(store, (reading = new Map()));
  return reading;
}

/**
 * Messages read on a shared create subject at most, looking for one commit. Its hint is
 * the highest sequence its API process knew of when it opened the commit, stale by at
 * most the projector's lag, so the commit is a few messages on; the bound keeps an id
 * that names no commit (or a made-up hint) from reading a whole subject.
 */
const MAX_SCAN = 2_000;

async function findCommit(store: EventStore, subject: string, hint: number, taskId: string): Promise<{ events: TaskEvent[]; seq: number } | null> {
  if (!store.nextMessage) return null;
  let from = hint + 1;
  for (let scanned = 0; scanned < MAX_SCAN; scanned++) {
    const msg = await store.nextMessage<TaskEvent>(subject, from);
    if (!msg) return null;
    if (msg.events.some((e) => e.type === 'TaskCreated' && e.data.task.id === taskId)) return msg;
    from = msg.seq + 1;
  }
  return null;
}

/**
 * A batch's commit is written once and never changes, so the creates of the last few
 * read are kept, by task id: a command on every task of a batch (a lane cancel of 1,000)
 * reads and decodes its commit once, not once per task.
 */
const RECENT_BATCHES = 16;
const recentByStore = new WeakMap<EventStore, Map<string, Creates>>();
function recentBatches(store: EventStore): Map<string, Creates> {
  let recent = recentByStore.get(store);
  if (!recent) recentByStore.set(store, (recent = new Map()));
  return recent;
}

/** A task's last event: on its own subject, or (never changed since) its create in its batch's commit. */
export async function lastTaskEvent(store: EventStore, orgId: string, taskId: string): Promise<TaskEvent | null> {
  return (await lastTaskEventAt(store, orgId, taskId))?.event ?? null;
}

/** `lastTaskEvent` with its stream sequence: the state a decision outside the task's subject is made on (`source_seq`). */
export async function lastTaskEventAt(store: EventStore, orgId: string, taskId: string): Promise<{ event: TaskEvent; seq: number } | null> {
  const last = await store.last<TaskEvent>(SUBJECTS.task(orgId, taskId));
  return last ?? createdInBatchAt(store, orgId, taskId);
}
