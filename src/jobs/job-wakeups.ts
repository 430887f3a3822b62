import { SUBJECTS } from '../../streams/subjects.ts';
import { createPositionWaiter } from '../lib/position-waiter.ts';
import type { Nats } from '../nats/connection.ts';

/** How long a wake waits for the projector to hold the accepted job before it wakes anyway. */
const PROJECTED_WAIT_MS = 5_000;

/**
 * When the bulk jobs' worker looks for running jobs again: after `pollMs`, or as soon as
 * an API process has accepted a job (`SUBJECTS.jobAccepted`, `<org> <seq>`) and the
 * projector has committed that sequence (`SUBJECTS.projected`), so the job's row and
 * set are there to read. Without it a job waited up to a whole poll before its first
 * group; the poll stays for announcements lost on the way (a reconnect).
 */
export function jobWakeups(nats: Nats, pollMs: number) {
  const projected = createPositionWaiter();
  let woken = false;
  let wake: (() => void) | undefined;
  const rouse = () => {
    woken = true;
    wake?.();
  };
  const subs = [
    nats.nc.subscribe(SUBJECTS.projected, { callback: (_err, m) => projected.advance(Number(m.string()) || 0) }),
    nats.nc.subscribe(SUBJECTS.jobAccepted, {
      callback: (_err, m) => {
        const seq = Number(m.string().split(' ').pop()) || 0;
        void projected.waitFor(seq, PROJECTED_WAIT_MS).then(rouse);
      },
    }),
  ];
  return {
    /** Resolves after `pollMs`, at a wake (one that came since the last idle counts), or when `signal` aborts. */
    idle(signal: AbortSignal): Promise<void> {
      if (woken || signal.aborted) {
        woken = false;
        return Promise.resolve();
      }
      return new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          signal.removeEventListener('abort', done);
          wake = undefined;
          woken = false;
          resolve();
        };
        const timer = setTimeout(done, pollMs);
        signal.addEventListener('abort', done, { once: true });
        wake = done;
      });
    },
    close(): void {
      for (const s of subs) s.unsubscribe();
      projected.close();
    },
  };
}

export type JobWakeups = ReturnType<typeof jobWakeups>;
