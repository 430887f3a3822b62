import type { Envelope } from '../../events/envelope.ts';

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
