import { startProgress, summaryLine, type Progress, type ProgressOut } from './progress.ts';
import { checkFlags, UsageError } from './args.ts';
import { withServices, type ServiceUrls } from './services.ts';
import { EVENT_TYPES } from '../commands/catalogue.ts';
import type { EventType } from '../commands/events.ts';
import { parseDuration } from '../lib/duration.ts';
import { instantProblem } from '../lib/input-checks.ts';
import { loadProjection } from '../replay/load.ts';
import { DEFAULT_SCHEMA } from '../replay/usage.ts';
import { replayProjection, SCHEMA_NAME, type ReplayOptions, type ReplayProgress } from '../replay/projection.ts';
import type { Selection } from '../replay/selection.ts';


const VALUED = ['projection', 'since', 'from-seq', 'types', 'org', 'schema', 'data-dir'] as const;
const BOOLEANS = ['from-start', 'follow', 'strict'] as const;
const ORG_ID = /^[A-Za-z0-9_-]{1,100}$/;

/** A time: ISO 8601, or a duration meaning that long ago (`2h`). */
function sinceOf(text: string, now: number): Date {
  const ago = parseDuration(text);
  if (ago !== undefined) return new Date(now - ago);
  const problem = instantProblem(text);
  if (problem || !/^\d{4}-\d{2}-\d{2}/.test(text)) throw new UsageError(`--since must be an ISO 8601 time or a duration such as 2h (got "${text}")`);
  return new Date(text);
}

export interface ReplayCommand extends Omit<ReplayOptions, 'signal' | 'onProgress'> {
  file: string;
}

/** The replay's flags, each checked: a wrong one is a UsageError (exit 2), never ignored. */
export function replayCommand(words: string[], flags: Map<string, string>, now = Date.now()): ReplayCommand {
  if (words.length > 1) throw new UsageError(`replay takes no word "${words[1]}"`);
  checkFlags('replay', flags, VALUED, BOOLEANS);
  const file = flags.get('projection');
  if (!file) throw new UsageError('--projection FILE is required');
  const selection: Selection = {};
  const fromSeq = flags.get('from-seq');
  if (fromSeq !== undefined) {
    const n = Number(fromSeq);
    if (!/^\d+$/.test(fromSeq) || !Number.isSafeInteger(n) || n < 1) throw new UsageError(`--from-seq must be a positive whole number (got "${fromSeq}")`);
    selection.fromSeq = n;
  }
  const since = flags.get('since');
  if (since !== undefined) selection.since = sinceOf(since, now);
  if (fromSeq !== undefined && since !== undefined) throw new UsageError('--since and --from-seq both say where to start: give one');
  const types = flags.get('types');
  if (types !== undefined) {
    const names = types.split(',').map((t) => t.trim()).filter(Boolean);
    const unknown = names.filter((t) => !(EVENT_TYPES as string[]).includes(t));
    if (!names.length || unknown.length) throw new UsageError(`--types: ${unknown.length ? `unknown event type ${unknown.join(', ')}` : 'no type given'} (the types: npx jetcron events schema)`);
    selection.types = [...new Set(names)] as EventType[];
  }
  const org = flags.get('org');
  if (org !== undefined) {
    if (!ORG_ID.test(org)) throw new UsageError(`--org must be an organization id such as org_… (got "${org}")`);
    selection.org = org;
  }
  const schema = flags.get('schema') ?? DEFAULT_SCHEMA;
  if (!SCHEMA_NAME.test(schema) || schema === 'public') throw new UsageError(`--schema must be lower-case letters, digits and _, and not public (got "${schema}")`);
  return { file, selection, schema, fromStart: flags.has('from-start'), follow: flags.has('follow'), strict: flags.has('strict') };
}

/**
 * `jetcron replay`: prints progress on stderr and, last on stdout, one JSON line
 * `{projection, events, skipped, last_seq, seconds}`. Exit 0 only when nothing was
 * skipped; a strict replay that stopped names the event and exits 1.
 */
export async function replayFromCli(opts: ServiceUrls & ReplayCommand & {
  log: (m: string) => void;
  print: (o: unknown) => void;
  /** Where the progress bar (or periodic lines) and the summary go. */
  progressTo: ProgressOut;
}): Promise<number> {
  const projection = await loadProjection(opts.file);
  const label = `replay ${projection.name}`;
  return withServices(opts, `jetcron replay ${projection.name}`, async ({ nats, db, databaseUrl }) => {
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
      const result = await replayProjection({ nats, db, databaseUrl, log }, projection, { ...opts, signal: stop.signal, onProgress });
      if (opts.follow) opts.progressTo.write(`${summaryLine(label, result.events, result.seconds * 1000)}\n`);
      else progress?.finish(result.events);
      if (result.stopped_at) {
        const s = result.stopped_at;
        opts.log(`replay ${projection.name}: --strict: stopped at seq ${s.seq} #${s.index}, ${s.type} ${s.id}: ${s.error}`);
      } else if (result.skipped) {
        opts.log(`replay ${projection.name}: ${result.skipped} event(s) skipped (npx jetcron projections failures --consumer replay.${opts.schema ?? DEFAULT_SCHEMA}.${projection.name}); the next replay tries them again`);
      }
      opts.print(result);
      return result.stopped_at || result.skipped ? 1 : 0;
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    }
  });
}
