import { describeError, isTransient } from './transient.ts';

const GIVE_UP_AFTER_MS = 120_000;

/**
 * A step of the start (connect, apply streams, migrate) run until it succeeds: a
 * transient failure — NATS electing a leader, Postgres still starting — is logged
 * and retried with backoff for up to two minutes instead of ending the process.
 */
export async function untilStarted<T>(what: string, step: () => Promise<T>, log: (m: string) => void): Promise<T> {
  const t0 = Date.now();
  for (let attempt = 1; ; attempt++) {
    try {
      const result = await step();
      if (attempt > 1) log(`start: ${what} succeeded after ${attempt} tries (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
      return result;
    } catch (err) {
      if (!isTransient(err) || Date.now() - t0 > GIVE_UP_AFTER_MS) throw err;
      const waitMs = Math.min(500 * 2 ** (attempt - 1), 5000);
      log(`start: ${what} failed (${describeError(err)}); retrying in ${(waitMs / 1000).toFixed(1)} s`);
      await new Promise((r) => setTimeout(r, waitMs));
    }
  }
}
