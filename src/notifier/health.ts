import type { EventOf } from '../commands/events.ts';
import type { EventStore } from '../commands/store.ts';
import type { FinalResult } from '../commands/destination-health.ts';
import { autoDisableAfterMs } from '../commands/organization/decide.ts';
import { countScheduleResult } from '../commands/schedule/handlers.ts';
import { countForwardResult } from '../commands/endpoint/handlers.ts';
import type { Clock } from '../lib/clock.ts';
import { generationalMap } from '../lib/bounded-map.ts';
import type { Directory } from '../nats/org-directory.ts';
import { STATE_CACHE_SIZE } from './state.ts';

type Finished = EventOf<'AttemptFinished'>;

/** The destination a final result counts for: a schedule, or one forward URL of an endpoint; null: none (a task's). */
function destinationOf(e: Finished): { key: string; url: string | null } | null {
  const { source, request } = e.data;
  if (source.type === 'schedule') return { key: `${e.org_id}.${source.id}`, url: null };
  if (source.type === 'endpoint') return { key: `${e.org_id}.${source.id} ${request.url}`, url: request.url };
  return null;
}

/**
 * Destination health's trigger (CONTRACT.md "Destination health"), run by the notifier
 * reader: every final result of a schedule's execution or an endpoint's delivery is
 * handed to its aggregate's decider (`CountResult`, `CountForwardResult`), which counts
 * it, resets the count or disables the destination. The reader reads EVENTS in order
 * from a checkpoint it moves only after handling, so a result is handed over at least
 * once; the decider passes over one it counted before (its `counted_seq`), so it
 * counts exactly once, whatever process is killed where.
 *
 * A success of a destination with no failure counted changes nothing: `clean` remembers
 * (for this lease term) the destinations known to have none, so a healthy deployment's
 * successes cost no read.
 */
export function createHealthCounter(deps: { store: EventStore; clock: Clock; directory: Directory }) {
  const clean = generationalMap<boolean>(STATE_CACHE_SIZE);

  async function onFinal(e: Finished, seq: number): Promise<void> {
    const d = e.data;
    if (!d.final || d.late) return;
    const dest = destinationOf(e);
    if (!dest) return;
    const ok = d.status === 'success';
    if (ok && clean.get(dest.key) === true) return;
    const org = await deps.directory.organization(e.org_id);
    const run = { id: d.execution_id, status: d.status, status_code: d.status_code, error_message: d.error_message, attempt: d.attempt, scheduled_for: d.scheduled_for, finished_at: d.finished_at };
    const result: FinalResult = { executionId: d.execution_id, run, seq, ok, at: d.finished_at, disableAfterMs: org ? autoDisableAfterMs(org, deps.clock.wait) : null };
    const commandDeps = { store: deps.store, clock: deps.clock };
    let failures: number;
    if (dest.url === null) {
      const { state } = await countScheduleResult(commandDeps, e.org_id, d.source.id, result);
      failures = state?.health?.consecutive_failures ?? 0;
    } else {
      const { state } = await countForwardResult(commandDeps, e.org_id, d.source.id, dest.url, result);
      failures = state?.forward_health?.find((h) => h.url === dest.url)?.consecutive_failures ?? 0;
    }
    clean.set(dest.key, failures === 0);
  }

  /** Whether a result changes nothing here, with nothing to read (the keyed reader's fast path). */
  function settled(e: Finished): boolean {
    if (!e.data.final || e.data.late) return true;
    const dest = destinationOf(e);
    return !dest || (e.data.status === 'success' && clean.get(dest.key) === true);
  }

  return { onFinal, settled };
}
