import { SUBJECTS } from '../../streams/subjects.ts';
import { evolveMonitor, type MonitorCommand } from '../commands/monitor/decide.ts';
import type { MonitorOwners } from '../commands/monitor/owners.ts';
import type { Monitor, MonitorEvent } from '../commands/monitor/types.ts';
import { monitorPartition } from '../commands/partition/partition-of.ts';
import type { Decided } from '../commands/execute.ts';
import { ApiError } from '../lib/errors.ts';
import { newId } from '../lib/ids.ts';
import { decodeJson } from '../lib/json.ts';
import type { Nats } from '../nats/connection.ts';
import type { MonitorReplies, MonitorReply, MonitorRequest } from './monitor-wire.ts';

/** How long one ask waits for the owner's answer (its commit stored); then it asks again, the same request ids. */
const ASK_MS = 3_000;
/**
 * How long a command keeps asking (an owner killed: its lease lapses after 10 s, its
 * successor claims and reads back): past this the answer is a 503 with Retry-After.
 */
const BUDGET_MS = 30_000;
const FIRST_PAUSE_MS = 20;
const MAX_PAUSE_MS = 1_000;

interface Waiting {
  request: MonitorRequest;
  resolve: (d: Decided<Monitor, MonitorEvent>) => void;
  reject: (err: Error) => void;
}

const unavailable = () => new ApiError(503, 'The monitor is being taken over; retry', null, { 'Retry-After': '1' });

function decided(reply: Exclude<MonitorReply, { retry: string }>): Decided<Monitor, MonitorEvent> {
  if ('error' in reply) throw new ApiError(reply.error.status, reply.error.message, reply.error.field, reply.error.headers);
  const last = reply.events[reply.events.length - 1];
  return { events: reply.events, state: last ? evolveMonitor(null, last) : reply.state ?? null, seq: reply.seq };
}

/**
 * The API process's side of the monitor partition owners: the commands of one loop turn
 * go to each partition's owner in one core NATS request (one message and one answer
 * for a turn's pings, whose events the owner stores in one commit). An ask that gets no
 * answer (no owner now, a takeover, a kill -9 after the commit) is sent again with the
 * same request ids, so a command the owner already stored is answered from the log and
 * never recorded twice.
 */
export function createMonitorOwnerClient(deps: {
  nats: Nats;
  partitions: number;
  /** The partitions owned in this process (`startMonitorOwners().local`): asked in-process, no NATS round trip. */
  local?: (partition: number) => { answer(items: MonitorRequest[]): Promise<MonitorReply[]>; created(event: MonitorEvent, seq: number): void } | undefined;
}): MonitorOwners {
  const queues = new Map<number, Waiting[]>();
  let flushing = false;

  const ask = async (partition: number, waiting: Waiting[], deadline: number, pause = FIRST_PAUSE_MS): Promise<void> => {
    let again: Waiting[] = waiting;
    try {
      const items = waiting.map((w) => w.request);
      const here = deps.local?.(partition);
      const answers = here
        ? await here.answer(items)
        : decodeJson<MonitorReplies>((await deps.nats.nc.request(SUBJECTS.monitorOwner(partition), JSON.stringify({ items }), { timeout: ASK_MS })).data).answers;
      again = [];
      waiting.forEach((w, i) => {
        const reply = answers[i];
        if (!reply || 'retry' in reply) return void again.push(w);
        try {
          w.resolve(decided(reply));
        } catch (err) {
          w.reject(err as Error);
        }
      });
    } catch {
      // No owner answering now (none subscribed, or it is taking over): all of them again.
    }
    if (again.length === 0) return;
    if (Date.now() + pause > deadline) {
      for (const w of again) w.reject(unavailable());
      return;
    }
    await new Promise((r) => setTimeout(r, pause));
    return ask(partition, again, deadline, Math.min(MAX_PAUSE_MS, pause * 2));
  };

  const flush = () => {
    flushing = false;
    const deadline = Date.now() + BUDGET_MS;
    for (const [partition, waiting] of queues) void ask(partition, waiting, deadline);
    queues.clear();
  };

  return {
    created(orgId: string, event: MonitorEvent, seq: number): void {
      deps.local?.(monitorPartition(orgId, event.data.monitor.id, deps.partitions))?.created(event, seq);
    },
    run(orgId: string, id: string, command: MonitorCommand): Promise<Decided<Monitor, MonitorEvent>> {
      const request: MonitorRequest = { org_id: orgId, id, request_id: newId('evt'), command };
      const partition = monitorPartition(orgId, id, deps.partitions);
      return new Promise((resolve, reject) => {
        let queue = queues.get(partition);
        if (!queue) queues.set(partition, (queue = []));
        queue.push({ request, resolve, reject });
        // What the rest of this turn asks joins the same request.
        if (!flushing) {
          flushing = true;
          setImmediate(flush);
        }
      });
    },
  };
}
