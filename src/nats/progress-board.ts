import { SUBJECTS } from '../../streams/subjects.ts';
import { decodeJson } from '../lib/json.ts';
import type { Nats } from './connection.ts';
import { ConsumerProgress, type Supervisor } from './supervisor.ts';

const SHARE_EVERY_MS = 2_000;
/** A process not heard from for this long is gone: its consumers are no longer listed. */
const FORGET_AFTER_MS = 3 * SHARE_EVERY_MS;

type Shared = Pick<ConsumerProgress, 'consumer' | 'stream' | 'active' | 'position' | 'lastProgressAt' | 'failingSince' | 'lastError' | 'skipped' | 'oldestDueAt'>;

/**
 * Consumers run in other processes when `jetcron serve` splits its roles over
 * processes (src/runtime/process-group.ts): each process of the group shares its
 * supervisor's view every 2 s on a core subject, so `/healthz` in the group's API
 * process reports every consumer of the service. `group` is the parent's id; a
 * process started on its own (`--roles`, tests) shares nothing and sees only itself.
 */
export function shareProgress(nats: Nats, supervisor: Supervisor, group: string, instanceId: string): () => void {
  const send = () => {
    const consumers: Shared[] = supervisor.consumers().map((c) => ({
      consumer: c.consumer, stream: c.stream, active: c.active, position: c.position, lastProgressAt: c.lastProgressAt,
      failingSince: c.failingSince, lastError: c.lastError, skipped: c.skipped, oldestDueAt: c.oldestDueAt,
    }));
    if (consumers.length && !nats.nc.isClosed()) nats.nc.publish(`${SUBJECTS.progress}.${group}`, JSON.stringify({ instance: instanceId, consumers }));
  };
  const timer = setInterval(send, SHARE_EVERY_MS);
  timer.unref();
  send();
  return () => clearInterval(timer);
}

/** What other processes shared, merged with this process's own consumers: an active copy wins over a standby. */
export function openProgressBoard(nats: Nats, local: Supervisor, group: string | undefined, instanceId: string) {
  const heard = new Map<string, { at: number; consumers: Shared[] }>();
  const sub = group === undefined ? null : nats.nc.subscribe(`${SUBJECTS.progress}.${group}`, {
    callback: (_err, m) => {
      try {
        const { instance, consumers } = decodeJson<{ instance: string; consumers: Shared[] }>(m.data);
        if (instance !== instanceId && Array.isArray(consumers)) heard.set(instance, { at: Date.now(), consumers });
      } catch { /* not ours to read */ }
    },
  });
  return {
    consumers(): ConsumerProgress[] {
      const byName = new Map<string, ConsumerProgress>();
      const offer = (c: ConsumerProgress) => {
        const seen = byName.get(c.consumer);
        if (!seen || (!seen.active && c.active)) byName.set(c.consumer, c);
      };
      local.consumers().forEach(offer);
      const now = Date.now();
      for (const [instance, { at, consumers }] of heard) {
        if (now - at > FORGET_AFTER_MS) {
          heard.delete(instance);
          continue;
        }
        for (const s of consumers) offer(Object.assign(new ConsumerProgress(s.consumer, s.stream), s));
      }
      return [...byName.values()];
    },
    close: () => sub?.unsubscribe(),
  };
}

export type ProgressBoard = ReturnType<typeof openProgressBoard>;
