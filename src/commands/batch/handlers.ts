import { SUBJECTS } from '../../../streams/subjects.ts';
import { ConcurrencyError } from '../../events/store.ts';
import { newId } from '../../lib/ids.ts';
import { execute, type CommandDeps } from '../execute.ts';
import type { Plan } from '../organization/types.ts';
import { decideBatch, evolveBatch, type BatchInput } from './decide.ts';
import type { BatchEvent } from './types.ts';

export type { BatchInput } from './decide.ts';

export const batchSubject = (orgId: string, batchId: string) => `evt.${orgId}.batch.${batchId}`;

/** Appends each task's TaskCreated in batch order; already-appended ones are skipped. */
export async function materializeBatch(deps: CommandDeps, batch: BatchEvent): Promise<number> {
  // Publishes go out in order on one connection, so the stream keeps the batch order.
  const acks = batch.data.tasks.map((e) =>
    deps.store.append(SUBJECTS.task(e.org_id, e.data.task.id), e, 0).catch((err: unknown) => {
      if (err instanceof ConcurrencyError) return 0;
      throw err;
    }),
  );
  return Math.max(0, ...(await Promise.all(acks)));
}

/**
 * Decides every task of the batch, stores the batch atomically, then its tasks.
 * `onceBatchId` (derived from an Idempotency-Key) makes it once-only: a batch already
 * stored under that id — the same request, run before a crash — is completed and
 * answered instead of a second one being accepted.
 */
export async function createBatch(deps: CommandDeps, orgId: string, input: BatchInput, plan: Plan, onceBatchId?: string): Promise<{ event: BatchEvent; seq: number }> {
  const batchId = onceBatchId ?? newId('cmd', deps.clock.now());
  const { state } = await execute(deps, batchSubject(orgId, batchId), { type: 'AcceptBatch', orgId, plan, batchId, input }, decideBatch, evolveBatch);
  return { event: state!, seq: await materializeBatch(deps, state!) };
}
