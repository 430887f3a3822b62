/**
 * Runs work items as they arrive: items with the same key one after another in
 * arrival order, different keys concurrently. `completed` is the highest position
 * below which every item has finished (a safe checkpoint). `work` owns its failures
 * (the reader wraps it in the supervisor's retry-or-skip); should it still throw,
 * the item is retried after a pause, so its key stalls rather than skipping it.
 */
export function createKeyedPipeline(opts: { maxInFlight: number; retryMs: number; log: (m: string) => void }) {
  const chains = new Map<string, Promise<void>>();
  // Positions in arrival order, one per item (nondecreasing; the events of one commit
  // share their message's position), and the items finished but not yet passed.
  const order: number[] = [];
  const done = new Set<number>();
  let base = 0; // ticket of order[0]
  let head = 0;
  let completed = 0;
  // An item left unfinished by a stop: the checkpoint must not pass it.
  let ceiling = Infinity;
  // A position whose items are still being pushed (a commit's events): not complete yet.
  let held = Infinity;
  let inFlight = 0;
  let slot: (() => void) | undefined;

  const finish = (ticket: number) => {
    done.add(ticket);
    inFlight--;
    while (head < order.length && done.has(base + head)) {
      done.delete(base + head);
      const position = order[head]!;
      head++;
      // A position is complete only once every item holding it is.
      const next = head < order.length ? order[head] : undefined;
      completed = Math.max(completed, next === position ? position - 1 : position);
    }
    if (head > 4096) {
      order.splice(0, head);
      base += head;
      head = 0;
    }
    slot?.();
    slot = undefined;
  };

  return {
    get completed() {
      return Math.min(completed, ceiling, held - 1);
    },
    /** Items of `position` are being pushed: it is not complete before `release`. */
    hold(position: number): void {
      held = position;
    },
    release(): void {
      held = Infinity;
    },
    /** `work` resolving `false` means it was abandoned unfinished (a stop). */
    async push(key: string, position: number, work: () => Promise<boolean | void>, stopped: () => boolean): Promise<void> {
      while (inFlight >= opts.maxInFlight) await new Promise<void>((r) => (slot = r));
      inFlight++;
      const ticket = base + order.length;
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
        finish(ticket);
      });
      chains.set(key, p);
    },
    /** Nothing of `key` is pushed and unfinished: an item of it may be decided at once, in order. */
    idle(key: string): boolean {
      return !chains.has(key);
    },
    /** An item with nothing to do: it finishes at once, in order, without a chain or a promise. */
    pass(position: number): void {
      inFlight++;
      const ticket = base + order.length;
      order.push(position);
      finish(ticket);
    },
    /** Resolves when everything pushed so far has finished. */
    async drain(): Promise<void> {
      while (chains.size) await Promise.all([...chains.values()]);
    },
  };
}
