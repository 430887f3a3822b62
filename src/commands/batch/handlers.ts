import { SUBJECTS } from '../../../streams/subjects.ts';
import { ConcurrencyError } from '../store.ts';
import { newId, withSeqHint } from '../../lib/ids.ts';
import { appendCommit, commandMeta, execute, fold, type CommandDeps } from '../execute.ts';
import type { Plan } from '../organization/types.ts';
import { decideBatch, evolveBatch, type BatchInput } from './decide.ts';
import type { BatchEvent } from './types.ts';

export type { BatchInput } from './decide.ts';

/**
 * Decides every task of the batch and stores them with the batch in one commit:
 * accepted all together or not at all. A batch under a fresh id goes on one of the
 * organization's create subjects (`SUBJECTS.creates`; its id names a sequence to find it
 * from, `withSeqHint`): a new id has no state to load. `onceBatchId` (derived from an
 * Idempotency-Key) makes it once-only on a subject of its own: a batch already stored
 * under that id — the same request, run before a crash — is the answer, and nothing is
 * appended.
 */
export async function createBatch(deps: CommandDeps, orgId: string, input: BatchInput, plan: Plan, onceBatchId?: string): Promise<{ event: BatchEvent; seq: number }> {
  const command = (batchId: string) => ({ type: 'AcceptBatch' as const, orgId, plan, batchId, input });
  if (onceBatchId === undefined) {
    const meta = commandMeta(deps.clock);
    const batchId = withSeqHint(newId('cmd', meta.nowMs), deps.store.knownSeq?.() ?? 0);
    const events = decideBatch(command(batchId), null, meta);
    const seq = await appendCommit(deps.store, SUBJECTS.creates(orgId, batchId), events, undefined);
    return { event: fold(evolveBatch, null, events)!, seq };
  }
  const { state, seq } = await execute(deps, SUBJECTS.batch(orgId, onceBatchId), command(onceBatchId), decideBatch, evolveBatch, { commit: true });
  return { event: state!, seq };
}
