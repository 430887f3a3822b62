import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startEmbeddedNats } from '../../src/runtime/embedded-nats.ts';

/** A fresh nats-server with its own store on a random port; stop() also removes the store. */
export async function startTestNats(): Promise<{ url: string; stop(): Promise<void> }> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'jetcron-test-nats-'));
  try {
    const nats = await startEmbeddedNats({ dataDir, preferredPort: 0 });
    return {
      url: nats.url,
      async stop() {
        await nats.stop();
        await rm(dataDir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await rm(dataDir, { recursive: true, force: true });
    throw err;
  }
}
