import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { startProgress, summaryLine, type Progress, type ProgressOut } from '../cli/progress.ts';
import { withServices, type ServiceUrls } from '../cli/services.ts';
import { replayProjection, type Projection, type ReplayProgress } from './projection.ts';

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
  /** Where the progress bar (or periodic lines) and the summary go. */
  progressTo: ProgressOut;
}): Promise<void> {
  // An analyst's file may use any TypeScript (enums, extensionless imports), which Node's
  // own type stripping refuses: tsx loads it, as it loads nothing else of the service.
  const { register } = await import('tsx/esm/api');
  register();
  const mod = (await import(pathToFileURL(resolve(opts.file)).href)) as { default?: unknown; projection?: unknown };
  const projection = mod.default ?? mod.projection;
  if (!isProjection(projection)) throw new Error(`${opts.file} must export a projection (name, setup, teardown, apply) as its default export`);
  const label = `replay ${projection.name}`;
  await withServices(opts, `jetcron replay ${projection.name}`, async ({ nats, db }) => {
    const stop = new AbortController();
    const onSignal = () => stop.abort();
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
    // The total is known once the replay has read its checkpoint and the log's end.
    let progress: Progress | undefined;
    const onProgress = ({ done, total, caughtUp }: ReplayProgress) => {
      progress ??= startProgress({ label, total, out: opts.progressTo });
      progress.update(done, total);
      if (caughtUp && opts.follow) progress.finish(done, 'caught up, following');
    };
    const log = (m: string) => (progress ? progress.aside(() => opts.log(m)) : opts.log(m));
    try {
      const result = await replayProjection({ nats, db, log }, projection, { fromStart: opts.fromStart, follow: opts.follow, signal: stop.signal, onProgress });
      if (opts.follow) opts.progressTo.write(`${summaryLine(label, result.events, result.seconds * 1000)}\n`);
      else progress?.finish(result.events);
      opts.print(result);
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    }
  });
}
