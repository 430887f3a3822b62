/**
 * Answers of list reads kept while the read models stand still. An entry is the state
 * at one projector position (the caller checks the page's snapshot was exactly the
 * position this process knows from `jetcron.projected`) and serves only while that is
 * still the position: the next projector commit, whatever it touched,
 * makes every entry stale. A read that must include a write of its own waits for the
 * projection of that write first (read-your-writes), and so finds a newer position and
 * misses. What it buys: many clients polling the same page (consoles, dashboards, the
 * benchmark's 16 connections) while nothing changes cost one query, not one each.
 */
export class PageCache {
  private readonly entries = new Map<string, { position: number; body: string }>();

  private readonly maxEntries: number;

  constructor(maxEntries = 256) {
    this.maxEntries = maxEntries;
  }

  get(key: string, position: number): string | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.position !== position) {
      this.entries.delete(key);
      return undefined;
    }
    return entry.body;
  }

  /** `position`: the projector position the page is the state at. */
  set(key: string, position: number, body: string): void {
    this.entries.delete(key);
    this.entries.set(key, { position, body });
    // Oldest first in a Map: drop from the front.
    for (const k of this.entries.keys()) {
      if (this.entries.size <= this.maxEntries) break;
      this.entries.delete(k);
    }
  }

  get size(): number {
    return this.entries.size;
  }
}
