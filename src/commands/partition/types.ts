import type { Envelope } from '../envelope.ts';
import type { AttemptJob } from '../execution/job.ts';
import type { FlowControl } from '../flow-control/types.ts';

/**
 * A partition owner took over its partition: the first message of its turn on the
 * partition's subject, appended only if the subject's last sequence is the one it read.
 * Every commit of an owner is guarded by the sequence of its own message before, so once
 * another owner's claim is on the subject, nothing the old owner still tries to append
 * can land: it is fenced by the log, not by a clock.
 */
export type PartitionEvent = Envelope<
  'PartitionClaimed',
  {
    partition: number;
    /** The claiming process's instance id. */
    owner: string;
    /** The subject's last sequence when the claim was decided (0: none yet). */
    after_seq: number;
    /** Where the claiming owner reads EVENTS from: what its predecessor's last commit named (absent in older claims). */
    resume_from?: number;
  }
>;

/** Partition events belong to no organization. */
export const SYSTEM_ORG = '_system';

/**
 * A batch's lane task naming a flow-control key held by another partition: the lane's
 * owner hands its lane's head to the key's owner, which sends it once the key has a free
 * slot and room in its rate (the contract's "Batches"). Appended to the execution's own
 * subject, which every owner reads; the key's owner records that attempt's result there
 * too, where the lane's owner applies it (its retry, callback and the lane's next). `handoff`
 * counts the execution's hand-offs (1, 2, … across retries and host blocks): the event's id.
 */
export type HandoffEvent = Envelope<
  'ExecutionHandedToKey',
  {
    execution_id: string;
    key: string;
    /** The key's limits as the task names them, for a key its owner holds none of yet. */
    limits: Omit<FlowControl, 'key'>;
    /** The attempt to send, as the lane's owner built it. */
    job: AttemptJob;
    /** As in AttemptResult, carried forward. */
    uncounted_attempts: number;
    handoff: number;
  }
>;
