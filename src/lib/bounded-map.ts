/**
 * A map that keeps at most `max` entries: setting one more forgets the oldest set
 * (insertion order, not use: cheap, and good enough for caches whose misses only cost
 * a read).
 */
export function boundedMap<V>(max: number) {
  const known = new Map<string, V>();
  return {
    get: (k: string) => known.get(k),
    set(k: string, v: V) {
      if (!known.has(k) && known.size >= max) known.delete(known.keys().next().value!);
      known.set(k, v);
    },
    delete: (k: string) => void known.delete(k),
    get size() {
      return known.size;
    },
  };
}

export type BoundedMap<V> = ReturnType<typeof boundedMap<V>>;

/**
 * A cache that keeps at least the last `size` entries set and at most twice that, in two
 * generations: when the newer one holds `size`, the older is dropped whole. No entry is
 * evicted one by one, so it suits a cache written at every event, where a `Map` kept in
 * recency order (delete, then set again) fills with deleted slots that each eviction of
 * its oldest key walks past (V8 compacts only when the table grows): the notifier's
 * 50,000 states spent 19% of their process's time there on pings (docs/benchmarks.md).
 */
export function generationalMap<V>(size: number) {
  let newer = new Map<string, V>();
  let older = new Map<string, V>();
  return {
    get(k: string): V | undefined {
      const v = newer.get(k);
      return v !== undefined ? v : older.get(k);
    },
    has: (k: string): boolean => newer.has(k) || older.has(k),
    set(k: string, v: V): void {
      if (newer.size >= size && !newer.has(k)) {
        older = newer;
        newer = new Map();
      }
      newer.set(k, v);
    },
  };
}
