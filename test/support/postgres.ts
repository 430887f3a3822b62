import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { chmod, mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { startEmbeddedPostgres } from '../../src/runtime/embedded-postgres.ts';

let lazyServer: Promise<string> | undefined;

/** A new, uniquely named database; drop() disconnects everyone and removes it. */
export async function createTestDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const adminUrl = process.env.JETCRON_TEST_PG_URL ?? (await startLazyServer());
  const name = `jetcron_test_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;
  await withAdmin(adminUrl, (client) => client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`));
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  let dropping: Promise<void> | undefined;
  return {
    url: url.href,
    drop() {
      dropping ??= withAdmin(adminUrl, async (client) => {
        await client.query(`DROP DATABASE IF EXISTS ${client.escapeIdentifier(name)} WITH (FORCE)`);
      });
      return dropping;
    },
  };
}

async function withAdmin<T>(adminUrl: string, use: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end();
  }
}

// A test file run directly (not through scripts/run-tests.mjs) gets its own server for the process.
function startLazyServer(): Promise<string> {
  lazyServer ??= (async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'jetcron-test-pg-'));
    await chmod(dataDir, 0o755);
    // keepAlive false: node:test waits for an empty event loop before the file's process ends.
    const server = await startEmbeddedPostgres({ dataDir, keepAlive: false });
    // Registered after the server's own exit handler, which waits for Postgres to shut down.
    process.on('exit', () => rmSync(dataDir, { recursive: true, force: true }));
    const admin = new URL(server.url);
    admin.pathname = '/postgres';
    return admin.href;
  })();
  return lazyServer;
}
