import { SUBJECTS } from '../../streams/subjects.ts';
import type { Db } from '../db/connect.ts';
import type { Nats } from '../nats/connection.ts';
import { readCheckpoint } from './projector.ts';

/**
 * How far the read models have got, for read-your-writes: a write handler waits
 * until the projector has committed the write's stream sequence, so the next GET
 * sees it. Progress arrives on a core subject; a slow poll covers lost messages.
 */
export async function createWatermark(nats: Nats, db: Db) {
  let seq = await readCheckpoint(db).catch(() => 0);
  const waiters = new Set<{ target: number; resolve: () => void }>();
  const advance = (n: number) => {
    if (n <= seq) return;
    seq = n;
    for (const w of waiters) if (w.target <= seq) (waiters.delete(w), w.resolve());
  };
  const sub = nats.nc.subscribe(SUBJECTS.projected, { callback: (_e, m) => advance(Number(m.string())) });
  const poll = setInterval(() => {
    if (waiters.size) void readCheckpoint(db).then(advance, () => {});
  }, 250);
  poll.unref();
  return {
    get seq() {
      return seq;
    },
    /** Resolves true once projected, false after `timeoutMs` (the write is durable either way). */
    waitFor(target: number, timeoutMs = 5000): Promise<boolean> {
      if (target <= seq) return Promise.resolve(true);
      return new Promise((resolve) => {
        const w = { target, resolve: () => (clearTimeout(t), resolve(true)) };
        const t = setTimeout(() => (waiters.delete(w), resolve(false)), timeoutMs);
        waiters.add(w);
      });
    },
    close() {
      clearInterval(poll);
      sub.unsubscribe();
    },
  };
}

export type Watermark = Awaited<ReturnType<typeof createWatermark>>;
