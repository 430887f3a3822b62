import { Kvm, type KV } from '@nats-io/kv';
import { KV_BUCKETS, STREAMS } from '../../streams/definitions.ts';
import { SUBJECTS } from '../../streams/subjects.ts';
import type { EventStore } from '../events/store.ts';
import { executionCancelled, sourceGone } from '../commands/execution/ending.ts';
import { jobMsgId, type AttemptJob } from '../commands/execution/job.ts';
import { decodeJson, encodeJson } from '../lib/json.ts';
import type { Nats } from '../nats/connection.ts';
import { deleteIfStored } from '../nats/delete-message.ts';
import { isWrongLastSequence } from '../nats/jetstream-errors.ts';
import { subjectToken } from '../lib/subject-token.ts';

interface Head {
  execution_id: string;
  seq: number;
}

/** Lane names are free text; subjects and KV keys get a fixed-size digest of them. */
export function laneKey(lane: string): string {
  return subjectToken(lane);
}

/**
 * One-at-a-time lanes. A due first attempt of a lane task is appended to its lane's
 * subject in LANES (stream order = the lane's order); the lane's head, recorded in
 * KV with create-if-absent so only one process can start it, is the only one sent
 * to DISPATCH. When that execution ends for good (after its retries) the head is
 * released and the next one starts. Everything lives in JetStream, so it holds
 * across dispatcher processes and restarts.
 */
export async function createLanes(nats: Nats, store: EventStore) {
  const heads: KV = await new Kvm(nats.nc).open(KV_BUCKETS.laneHeads.name);

  const headKey = (org: string, key: string) => `${org}.${key}`;

  /**
   * Claims the lane's head for `head`. Lost to another writer: false, unless the head
   * now names this same job — our own claim whose answer was lost (a timeout, a
   * leader change) — which we go on with (publishing the job is deduplicated). Any
   * other error propagates: unknown is not "someone else has it".
   */
  async function claim(org: string, key: string, head: Head): Promise<boolean> {
    try {
      await heads.create(headKey(org, key), encodeJson(head));
      return true;
    } catch (err) {
      if (!isWrongLastSequence(err)) throw err;
      const current = await heads.get(headKey(org, key));
      return !!current && current.operation === 'PUT' && current.value.length > 0 && decodeJson<Head>(current.value).execution_id === head.execution_id;
    }
  }

  /**
   * Starts the lane's next execution unless one is running. `freed` says the caller
   * has just deleted the head itself, which saves reading it again: a hand-off is a
   * handful of round trips, and on a busy process each one waits its turn.
   */
  async function advance(org: string, key: string, freed = false): Promise<void> {
    const subject = SUBJECTS.lane(org, key);
    for (;;) {
      const current = freed ? null : await heads.get(headKey(org, key));
      freed = false;
      if (current && current.operation === 'PUT' && current.value.length) return;
      const next = await nats.jsm.direct.getMessage(STREAMS.lanes.name, { next_by_subj: subject, seq: 0 } as never);
      if (!next) return;
      const job = decodeJson<AttemptJob>(next.data);
      const head: Head = { execution_id: job.execution_id, seq: next.seq };
      // `create` succeeds on an absent or deleted key, so it is the claim in both cases.
      const [claimed, gone] = await Promise.all([claim(org, key, head), sourceGone(store, org, job.source)]);
      if (!claimed) return; // another process took the head first; it starts the execution
      if (gone) {
        // Cancelled while waiting in the lane: record it and move on to the next.
        const event = executionCancelled(org, { execution_id: job.execution_id, source: job.source, reason: `${job.source.type} deleted`, lane: null });
        await store.append(SUBJECTS.execution(org, job.execution_id), event);
        await release(org, key, job.execution_id, false);
        continue;
      }
      // The job's own trace (its lane message's header), not the one of whatever freed the lane.
      await nats.publish(SUBJECTS.dispatch(org), encodeJson(job), { msgId: jobMsgId(job), traceparent: next.header?.get('traceparent') || undefined });
      return;
    }
  }

  /** The execution ended for good: free its lane and start the next one. */
  async function release(org: string, key: string, executionId: string, thenAdvance = true): Promise<void> {
    const entry = await heads.get(headKey(org, key));
    if (!entry || entry.operation !== 'PUT' || !entry.value.length) {
      // Idle: a release cut short after freeing the head (a stop, a lost connection) and
      // replayed must still start the next one, or the lane would wait forever.
      if (thenAdvance) await advance(org, key);
      return;
    }
    const head = decodeJson<Head>(entry.value);
    if (head.execution_id !== executionId) return;
    // The queue entry goes first: a free head must never point back at a finished execution.
    await deleteIfStored(nats.jsm, STREAMS.lanes.name, head.seq);
    // Lost to another writer: the head changed, so read it again. Any other error is
    // unknown and propagates, so the release is tried again rather than the lane left held.
    const freed = await heads.delete(headKey(org, key), { previousSeq: entry.revision }).then(() => true, (err: unknown) => {
      if (isWrongLastSequence(err)) return false;
      throw err;
    });
    if (thenAdvance) await advance(org, key, freed);
  }

  return {
    async enqueue(job: AttemptJob & { lane: string }): Promise<void> {
      const key = laneKey(job.lane);
      await nats.publish(SUBJECTS.lane(job.org_id, key), encodeJson(job), { msgId: `${job.execution_id}:lane` });
      await advance(job.org_id, key);
    },
    release: (org: string, lane: string, executionId: string) => release(org, laneKey(lane), executionId),
  };
}

export type Lanes = Awaited<ReturnType<typeof createLanes>>;
