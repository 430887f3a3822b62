import { availableParallelism } from 'node:os';

/**
 * The Go memory limit the embedded nats-server runs with unless the environment names one.
 *
 * Without a limit the Go runtime keeps the memory it took at the server's busiest
 * moments: its RSS steps up after each new peak of the write rate and stays there while
 * its live heap does not grow (docs/benchmarks.md, soak). GOMEMLIMIT makes the runtime
 * collect and hand pages back to stay under it, so the RSS holds at about the limit.
 *
 * The limit must stay well above the live heap, or Go collects back to back (up to half
 * the CPU). That heap is ~20 MiB of the server's own plus the file store's block write
 * buffers, which follow the rate EVENTS is written at (~15 MiB per 1,000 executions/s),
 * and a core runs at most ~1,800 executions/s through every process: at most ~27 MiB of
 * buffers per core. 32 MiB per core above a 64 MiB floor keeps the limit at ~1.7× the
 * largest live heap a 2-core machine reached, where Go collects at most ~1.4× as often
 * as without a limit at that rate, and not more often at lower rates.
 */
export const NATS_MEMORY_FLOOR_MIB = 64;
export const NATS_MEMORY_PER_CORE_MIB = 32;

export function defaultNatsMemoryLimit(cores = availableParallelism()): string {
  return `${NATS_MEMORY_FLOOR_MIB + NATS_MEMORY_PER_CORE_MIB * Math.max(1, cores)}MiB`;
}

/**
 * The environment nats-server is started with: this process's, then `extra`, then the
 * default limit where neither sets GOMEMLIMIT (any value wins, `off` included, which Go
 * reads as no limit).
 */
export function natsServerEnv(base: NodeJS.ProcessEnv, extra: Record<string, string> = {}, cores?: number): NodeJS.ProcessEnv {
  const env = { ...base, ...extra };
  if (env.GOMEMLIMIT === undefined || env.GOMEMLIMIT === '') env.GOMEMLIMIT = defaultNatsMemoryLimit(cores);
  return env;
}
