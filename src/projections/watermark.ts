import { SUBJECTS } from '../../streams/subjects.ts';
import type { Db } from '../db/connect.ts';
import type { Nats } from '../nats/connection.ts';
import { readCheckpoint } from './projector.ts';
import { createPositionWaiter } from '../lib/position-waiter.ts';

/**
 * How far the read models have got, for read-your-writes: a write handler waits
 * until the projector has committed the write's stream sequence, so the next GET
 * sees it. Progress arrives on a core subject; a slow poll covers lost messages.
 */
export async function createWatermark(nats: Nats, db: Db) {
  const position = createPositionWaiter(await readCheckpoint(db).catch(() => 0));
  const advance = (n: number) => position.advance(n);
  const sub = nats.nc.subscribe(SUBJECTS.projected, { callback: (_e, m) => advance(Number(m.string())) });
  const poll = setInterval(() => {
    if (position.waiting) void readCheckpoint(db).then(advance, () => {});
  }, 250);
  poll.unref();
  return {
    get seq() {
      return position.at;
    },
    /** Resolves true once projected, false after `timeoutMs` (the write is durable either way). */
    waitFor(target: number, timeoutMs = 5000): Promise<boolean> {
      return position.waitFor(target, timeoutMs);
    },
    close() {
      clearInterval(poll);
      sub.unsubscribe();
      position.close();
    },
  };
}

export type Watermark = Awaited<ReturnType<typeof createWatermark>>;
