/**
 * A map that keeps at most `max` entries, in two generations: when the newer one holds
 * `max / 2`, the older is dropped whole (so at least the last `max / 2` set are kept).
 * No entry is evicted one by one: taking a `Map`'s oldest key after many deletions walks
 * every deleted slot before it (V8 compacts only when the table grows), and those slots
 * lengthen lookups too. On 100,000-entry caches written at every ping (tokens, the
 * notifier's states) that was the largest line of their processes' profiles.
 */
export function boundedMap<V>(max: number) {
  const half = Math.max(1, Math.floor(max / 2));
  let newer = new Map<string, V>();
  let older = new Map<string, V>();
  return {
    get(k: string): V | undefined {
      const v = newer.get(k);
      return v !== undefined ? v : older.get(k);
    },
    has: (k: string): boolean => newer.has(k) || older.has(k),
    set(k: string, v: V): void {
      if (newer.size >= half && !newer.has(k)) {
        older = newer;
        newer = new Map();
      }
      newer.set(k, v);
    },
    delete(k: string): void {
      newer.delete(k);
      older.delete(k);
    },
    get size() {
      return newer.size + older.size;
    },
  };
}

export type BoundedMap<V> = ReturnType<typeof boundedMap<V>>;
