const RETRY_MS = 500;

/**
 * A read its caller cannot go on without: tried again every half second until it
 * answers, the first failure logged (`cannot read <what>`). Ends with the failure only
 * once `signal` has aborted.
 */
export async function readUntilDone<T>(what: string, read: () => Promise<T>, signal: AbortSignal, log: (m: string) => void): Promise<T> {
  for (let tries = 1; ; tries++) {
    try {
      return await read();
    } catch (err) {
      if (signal.aborted) throw err;
      if (tries === 1) log(`cannot read ${what} (${(err as Error).message}); trying again`);
      await new Promise((r) => setTimeout(r, RETRY_MS));
    }
  }
}
