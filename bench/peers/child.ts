/**
 * The worker side of a peer queue, in a Node process of its own (forked by
 * processes.ts, so the workers do not share an event loop with the load
 * generator). Each job is one POST to the bench's target, the same HTTP job the
 * raw loop and jetcron's tasks do. The parent passes the configuration in
 * PEER_WORKER_CONFIG and talks over IPC: `{ ready }` once the workers are
 * consuming, `{ cmd: 'stop' }` → close the workers, answer `{ stopped, posts }`, exit.
 */
import { request } from 'undici';

export interface WorkerConfig {
  targetUrl: string;
}

export type WorkerMessage = { ready: true } | { stopped: true; posts: Record<string, number> } | { failed: string };

/** Job handler: POST `{"id":…}` to the target's `/hit?id=…`; throws on anything but 2xx, so the queue records a failure. */
export type Post = (id: string) => Promise<void>;

/** Resolves once the message is handed to the channel (so an exit right after does not drop it). */
function send(m: WorkerMessage): Promise<void> {
  return new Promise((resolve) => (process.send ? process.send(m, undefined, undefined, () => resolve()) : resolve()));
}

/**
 * Starts the workers with `start` (which returns how to close them) and serves the
 * parent's commands. Exits when the parent goes away.
 */
export async function serveWorker<C extends WorkerConfig>(start: (config: C, post: Post) => Promise<() => Promise<void>>): Promise<void> {
  const config = JSON.parse(process.env.PEER_WORKER_CONFIG ?? '{}') as C;
  const posts: Record<string, number> = {};
  const count = (key: string) => (posts[key] = (posts[key] ?? 0) + 1);
  const post: Post = async (id) => {
    try {
      const res = await request(`${config.targetUrl}/hit?id=${encodeURIComponent(id)}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ id }),
      });
      await res.body.dump();
      count(String(res.statusCode));
      if (res.statusCode >= 300) throw new Error(`target answered ${res.statusCode}`);
    } catch (err) {
      if (!(err as Error).message.startsWith('target answered')) count((err as { code?: string }).code ?? 'error');
      throw err;
    }
  };
  process.on('disconnect', () => process.exit(1));
  let close: (() => Promise<void>) | undefined;
  process.on('message', (m: { cmd?: string }) => {
    if (m?.cmd !== 'stop') return;
    void (async () => {
      await close?.().catch(() => {});
      await send({ stopped: true, posts });
      process.exit(0);
    })();
  });
  try {
    close = await start(config, post);
    await send({ ready: true });
  } catch (err) {
    await send({ failed: (err as Error).message });
    process.exit(1);
  }
}
