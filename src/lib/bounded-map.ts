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
 * A map that keeps at least the last `max / 2` and at most `max` entries set, in two
 * generations: when the newer one holds `max / 2`, the older is dropped whole. Unlike
 * `boundedMap` no entry is deleted one by one, so a map written at every request (one
 * entry each) costs a `set`, with none of the skipping over deleted slots that taking
 * the oldest key of a `Map` does once many were deleted.
 */
export function generationalMap<V>(max: number) {
  let newer = new Map<string, V>();
  let older = new Map<string, V>();
  return {
    get: (k: string): V | undefined => newer.get(k) ?? older.get(k),
    set(k: string, v: V): void {
      if (newer.size >= max / 2) {
        older = newer;
        newer = new Map();
      }
      newer.set(k, v);
    },
  };
}
