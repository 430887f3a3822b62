/**
 * Runs work one at a time per key, in arrival order; different keys run in
 * parallel. A key has an entry only while work for it is running or waiting, so
 * the map never outgrows what is in flight.
 */
export class KeyedMutex {
  // The entry of a key = the waiters behind its current holder.
  private readonly queues = new Map<string, Array<() => void>>();

  async run<T>(key: string, work: () => Promise<T>): Promise<T> {
    let waiting = this.queues.get(key);
    if (waiting) {
      const queue = waiting;
      await new Promise<void>((resume) => queue.push(resume));
    } else {
      waiting = [];
      this.queues.set(key, waiting);
    }
    try {
      return await work();
    } finally {
      // Handing over directly (the entry stays) means a newcomer cannot slip in between.
      const next = waiting.shift();
      if (next) next();
      else this.queues.delete(key);
    }
  }

  /** Keys with work running or waiting. */
  get size(): number {
    return this.queues.size;
  }
}
