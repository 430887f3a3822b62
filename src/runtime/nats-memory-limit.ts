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
 * the CPU: nats-server's CPU per job was 3-4x at 32 MiB). That heap is ~20 MiB of the
 * server's own plus the file store's block write buffers, which follow the rate EVENTS is
 * written at: 33-74 MiB on 2 cores at up to ~3,900 executions/s. 64 MiB + 32 MiB per core
 * is ~1.7x the largest there, where Go collects sooner only at peaks; the rate a machine
 * reaches, and so the buffers, grow with its cores (docs/benchmarks.md, 2026-11-26).
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
