import type { ChildProcess } from 'node:child_process';

/**
 * Stops a child process: SIGTERM, then SIGKILL if it has not exited after `graceMs`.
 * `exited` is the caller's promise of its exit when it already holds one (an
 * 'exit' event that fired before this call would never fire again).
 */
export async function terminate(child: ChildProcess, graceMs: number, exited?: Promise<void>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const gone = exited ?? new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await gone;
  clearTimeout(timer);
}
