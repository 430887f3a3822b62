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
