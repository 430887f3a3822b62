import { SUBJECTS } from '../../../streams/subjects.ts';
import { ConcurrencyError } from '../../events/store.ts';
import { newId } from '../../lib/ids.ts';
import { execute, type CommandDeps } from '../execute.ts';
import type { Plan } from '../organization/types.ts';
import { decideBatch, evolveBatch, type BatchInput } from './decide.ts';
import type { BatchEvent } from './types.ts';

export type { BatchInput } from './decide.ts';

/**
 * A `BatchAccepted` written before batches were commits carries its tasks: each is
 * appended to its own subject, in batch order; those already appended are skipped.
 */
export async function materializeBatch(deps: CommandDeps, batch: BatchEvent): Promise<number> {
  // Publishes go out in order on one connection, so the stream keeps the batch order.
  const acks = (batch.data.tasks ?? []).map((e) =>
    deps.store.append(SUBJECTS.task(e.org_id, e.data.task.id), e, 0).catch((err: unknown) => {
      if (err instanceof ConcurrencyError) return 0;
      throw err;
    }),
  );
  return Math.max(0, ...(await Promise.all(acks)));
}

/**
 * Decides every task of the batch and stores them with the batch in one commit on
 * the batch's subject: accepted all together or not at all. `onceBatchId` (derived
 * from an Idempotency-Key) makes it once-only: a batch already stored under that id —
 * the same request, run before a crash — is the answer, and nothing is appended.
 */
export async function createBatch(deps: CommandDeps, orgId: string, input: BatchInput, plan: Plan, onceBatchId?: string): Promise<{ event: BatchEvent; seq: number }> {
  const batchId = onceBatchId ?? newId('cmd', deps.clock.now());
  const { state, seq } = await execute(deps, SUBJECTS.batch(orgId, batchId), { type: 'AcceptBatch', orgId, plan, batchId, input }, decideBatch, evolveBatch, { commit: true });
  return { event: state!, seq };
}
