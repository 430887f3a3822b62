import { SUBJECTS } from '../../streams/subjects.ts';
import type { KeyLoad as HeldKey, OwnedTasks } from '../commands/partition/owned-tasks.ts';
import { decodeJson } from '../lib/json.ts';
import { askAll } from '../nats/ask-all.ts';
import type { Nats } from '../nats/connection.ts';

/** What a key holds in its owner's memory, the only place that knows what runs now; `org_id` only in an answer for every organization. */
export type KeyLoad = HeldKey & { org_id?: string };

interface Answer {
  partitions: number[];
  keys: KeyLoad[];
  /** The organization's endpoints with deliveries held or paused (`key`: the endpoint id); absent in an answer for every organization. */
  endpoints?: KeyLoad[];
}

/** How long `GET /flow-control` waits for the owners; a partition that has not answered by then is counted from the read models. */
const ASK_MS = 1_000;

/**
 * Answers, for the partitions this process owns, what each flow-control key of the
 * asking organization holds. Returns the stop function.
 */
export function answerFlowStats(nats: Nats, held: ReadonlyMap<number, OwnedTasks>): () => void {
  const sub = nats.nc.subscribe(SUBJECTS.flowStats, {
    callback: (_err, m) => {
      let orgId: string | null;
      try {
        orgId = decodeJson<{ org_id: string | null }>(m.data).org_id;
      } catch {
        return;
      }
      const answer: Answer = { partitions: [], keys: [], ...(orgId === null ? {} : { endpoints: [] }) };
      for (const [partition, state] of held) {
        answer.partitions.push(partition);
        answer.keys.push(...(orgId === null ? state.allFlowKeys() : state.flowKeys(orgId)));
        if (orgId !== null) answer.endpoints!.push(...state.endpointLoads(orgId));
      }
      m.respond(JSON.stringify(answer));
    },
  });
  return () => sub.unsubscribe();
}

/**
 * Asks every owner what the organization's keys hold (`orgId` null: every
 * organization's, keyed `<org> <key>`). `missing` lists the partitions no owner
 * answered for (none is running, or one is taking over). Without `partitions` the whole
 * window is waited.
 */
export async function askFlowStats(nats: Nats, orgId: string | null, partitions?: number): Promise<{ keys: Map<string, KeyLoad>; endpoints: Map<string, KeyLoad>; missing: number[] }> {
  const keys = new Map<string, KeyLoad>();
  const endpoints = new Map<string, KeyLoad>();
  const covered = new Set<number>();
  await askAll<Answer>(nats, SUBJECTS.flowStats, JSON.stringify({ org_id: orgId }), { strategy: 'timer', maxWait: ASK_MS }, (answer) => {
    for (const p of answer.partitions) covered.add(p);
    for (const k of answer.keys) keys.set(orgId === null ? `${k.org_id} ${k.key}` : k.key, k);
    for (const e of answer.endpoints ?? []) endpoints.set(e.key, e);
    return partitions !== undefined && covered.size >= partitions;
  });
  // Unknown how many (`jetcron status`): the whole window was waited out, and what answered is all there is.
  const missing = Array.from({ length: partitions ?? 0 }, (_, p) => p).filter((p) => !covered.has(p));
  return { keys, endpoints, missing };
}
