/**
 * Runs work items as they arrive: items with the same key one after another in
 * arrival order, different keys concurrently. `completed` is the highest position
 * below which every item has finished (a safe checkpoint). A failing item is
 * retried after a pause, so its key stalls rather than skipping it.
 */
export function createKeyedPipeline(opts: { maxInFlight: number; retryMs: number; log: (m: string) => void }) {
  const chains = new Map<string, Promise<void>>();
  const order: number[] = [];
  const done = new Set<number>();
  let head = 0;
  let completed = 0;
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
      return completed;
    },
    async push(key: string, position: number, work: () => Promise<void>, stopped: () => boolean): Promise<void> {
      while (inFlight >= opts.maxInFlight) await new Promise<void>((r) => (slot = r));
      inFlight++;
      order.push(position);
      const run = async () => {
        for (;;) {
          try {
            return await work();
          } catch (err) {
            if (stopped()) return;
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
