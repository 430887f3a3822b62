/**
 * Runs work items as they arrive: items with the same key one after another in
 * arrival order, different keys concurrently. `completed` is the highest position
 * below which every item has finished (a safe checkpoint). `work` owns its failures
 * (the reader wraps it in the supervisor's retry-or-skip); should it still throw,
 * the item is retried after a pause, so its key stalls rather than skipping it.
 */
export function createKeyedPipeline(opts: { maxInFlight: number; retryMs: number; log: (m: string) => void }) {
  const chains = new Map<string, Promise<void>>();
  const order: number[] = [];
  const done = new Set<number>();
  let head = 0;
  let completed = 0;
  // An item left unfinished by a stop: the checkpoint must not pass it.
  let ceiling = Infinity;
  let inFlight = 0;
  let slot: (() => void) | undefined;

  const finish = (position: number) => {
    done.add(position);
    inFlight--;
    while (head < order.length && done.has(order[head]!)) {
      completed = order[head]!;
      done.delete(completed);
      head++;
    }
    if (head > 4096) {
      order.splice(0, head);
      head = 0;
    }
    slot?.();
    slot = undefined;
  };

  return {
    get completed() {
      return Math.min(completed, ceiling);
    },
    /** `work` resolving `false` means it was abandoned unfinished (a stop). */
    async push(key: string, position: number, work: () => Promise<boolean | void>, stopped: () => boolean): Promise<void> {
      while (inFlight >= opts.maxInFlight) await new Promise<void>((r) => (slot = r));
      inFlight++;
      order.push(position);
      const run = async () => {
        for (;;) {
          try {
            if ((await work()) === false) ceiling = Math.min(ceiling, position - 1);
            return;
          } catch (err) {
            if (stopped()) {
              ceiling = Math.min(ceiling, position - 1);
              return;
            }
            opts.log(`item ${position} (${key}) failed, retrying: ${(err as Error).message}`);
            await new Promise((r) => setTimeout(r, opts.retryMs));
          }
        }
      };
      const p = (chains.get(key) ?? Promise.resolve()).then(run).finally(() => {
        if (chains.get(key) === p) chains.delete(key);
        finish(position);
      });
      chains.set(key, p);
    },
    /** Resolves when everything pushed so far has finished. */
    async drain(): Promise<void> {
      while (chains.size) await Promise.all([...chains.values()]);
    },
  };
}
