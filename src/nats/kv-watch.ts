import type { KV, KvWatchEntry } from '@nats-io/kv';

/**
 * Follows every entry of a bucket for as long as the process needs it. A watch can
 * end (its consumer lost in a leader change, a reconnect); a copy fed by one that
 * ended silently goes stale, so another is started, which delivers the current
 * values again. `onEntry` must accept an entry it has seen before.
 */
export async function watchForever(kv: KV, onEntry: (e: KvWatchEntry) => void, log: (m: string) => void, name: string): Promise<{ stop(): void }> {
  let stopped = false;
  let watch = await kv.watch();
  void (async () => {
    while (!stopped) {
      try {
        for await (const e of watch) onEntry(e);
      } catch (err) {
        log(`${name}: watch ended (${(err as Error).message})`);
      }
      if (stopped) return;
      await new Promise((r) => setTimeout(r, 500));
      if (stopped) return;
      watch = await kv.watch().catch(() => watch);
    }
  })();
  return {
    stop() {
      stopped = true;
      watch.stop();
    },
  };
}
