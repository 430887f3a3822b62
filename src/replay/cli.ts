import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { withServices, type ServiceUrls } from '../cli/services.ts';
import { replayProjection, type Projection } from './projection.ts';

function isProjection(p: unknown): p is Projection {
  const o = p as Partial<Projection> | null;
  return !!o && typeof o.name === 'string' && typeof o.setup === 'function' && typeof o.teardown === 'function' && typeof o.apply === 'function';
}

/** `jetcron replay --projection FILE`: FILE's default export (or `projection`) is a `Projection`. */
export async function replayFromCli(opts: ServiceUrls & {
  file: string;
  fromStart: boolean;
  follow: boolean;
  log: (m: string) => void;
  print: (o: unknown) => void;
}): Promise<void> {
  const mod = (await import(pathToFileURL(resolve(opts.file)).href)) as { default?: unknown; projection?: unknown };
  const projection = mod.default ?? mod.projection;
  if (!isProjection(projection)) throw new Error(`${opts.file} must export a projection (name, setup, teardown, apply) as its default export`);
  await withServices(opts, `jetcron replay ${projection.name}`, async ({ nats, db }) => {
    const stop = new AbortController();
    const onSignal = () => stop.abort();
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
    try {
      opts.print(await replayProjection({ nats, db, log: opts.log }, projection, { fromStart: opts.fromStart, follow: opts.follow, signal: stop.signal }));
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    }
  });
}
