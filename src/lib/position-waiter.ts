/**
 * A position that only moves forward (a stream sequence someone announces), and the
 * waits on it: each resolves true once the position reaches its target, false after
 * its bound. Read-your-writes waits on the projector's and the inbound router's.
 */
export function createPositionWaiter(start = 0) {
  let at = start;
  const waiters = new Set<{ target: number; done: (reached: boolean) => void }>();
  return {
    get at(): number {
      return at;
    },
    advance(n: number): void {
      if (n <= at) return;
      at = n;
      for (const w of waiters) if (w.target <= at) w.done(true);
    },
    waitFor(target: number, timeoutMs: number): Promise<boolean> {
      if (target <= at) return Promise.resolve(true);
      return new Promise((resolve) => {
        const w = {
          target,
          done: (reached: boolean) => {
            clearTimeout(timer);
            waiters.delete(w);
            resolve(reached);
          },
        };
        const timer = setTimeout(() => w.done(false), timeoutMs);
        waiters.add(w);
      });
    },
    get waiting(): number {
      return waiters.size;
    },
    /** Every wait ends now, unreached. */
    close(): void {
      for (const w of waiters) w.done(false);
    },
  };
}
