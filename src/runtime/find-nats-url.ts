import { readFileSync } from 'node:fs';
import path from 'node:path';

/** The URL a running embedded nats-server recorded in the data dir, if any. */
export function natsUrlFromDataDir(dataDir: string): string | undefined {
  try {
    const url = readFileSync(path.join(dataDir, 'nats.url'), 'utf8').trim();
    return url || undefined;
  } catch {
    return undefined;
  }
}
