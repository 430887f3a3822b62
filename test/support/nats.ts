import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { applyStreams } from '../../src/nats/apply-streams.ts';
import { connectNats, type Nats } from '../../src/nats/connection.ts';
import { startEmbeddedNats } from '../../src/runtime/embedded-nats.ts';

/**
 * A fresh nats-server with its own store on a random port; stop() also removes the store.
 * freeze() stops the server process (SIGSTOP) until the returned function resumes it:
 * its connections stay open and every request times out, as during a stall or an election.
 */
export async function startTestNats(): Promise<{ url: string; stop(): Promise<void>; freeze(): Promise<() => void> }> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'jetcron-test-nats-'));
  try {
    const nats = await startEmbeddedNats({ dataDir, preferredPort: 0 });
    return {
      url: nats.url,
      async freeze() {
        const pid = Number((await readFile(path.join(dataDir, 'nats.pid'), 'utf8')).trim());
        process.kill(pid, 'SIGSTOP');
        // The signal takes effect when the process is next scheduled: wait until it has.
        for (let i = 0; i < 200; i++) {
          const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
          if (/\) T /.test(stat)) break;
          await new Promise((r) => setTimeout(r, 5));
        }
        return () => process.kill(pid, 'SIGCONT');
      },
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

/** A fresh nats-server with jetcron's streams; `connect` opens connections that `stop()` closes first. */
export async function startNatsWithStreams(): Promise<{ url: string; connect(name: string): Promise<Nats>; stop(): Promise<void> }> {
  const server = await startTestNats();
  const connections: Nats[] = [];
  const connect = async (name: string) => {
    const nats = await connectNats(server.url, name);
    connections.push(nats);
    return nats;
  };
  await applyStreams(await connect('streams setup'), 1);
  return {
    url: server.url,
    connect,
    async stop() {
      for (const c of connections) await c.close();
      await server.stop();
    },
  };
}
