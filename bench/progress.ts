/** Completion polling for the end-to-end benchmarks: how many are done, since when, and the wait for the rest. */
import { hrMs, sleep, type CpuReport } from './harness.ts';

/** What an end-to-end run measured (hr ms times; `t0` is the first create). */
export interface EndToEndRun<S> {
  t0: number;
  /** When the creates (or adds) ended. */
  createEnd: number;
  /** When the poll first showed all of them done; undefined if never. */
  pgCompleteAt: number | undefined;
  samples: S[];
  /** Distinct requests the target had received, every 250 ms. */
  targetSamples: { t: number; n: number }[];
  cpu: CpuReport;
  /** Done at the end (success executions, completed jobs). */
  finalSuccess: number;
  e2eSeconds: number;
  /** finalSuccess / e2eSeconds. */
  execRate: number;
}

export interface Progress<S> {
  readonly t0: number;
  /** The last count read. */
  readonly done: number;
  /** hr ms of the first poll that read at least `goal`; undefined until then. */
  readonly completeAt: number | undefined;
  /** One per poll, as `sample` made it. */
  readonly samples: S[];
  /** Seconds from t0 to completeAt, or to the last poll if the goal was never reached. */
  readonly seconds: number;
  /**
   * Waits until the count reaches `goal`, or `enough` (what was actually accepted),
   * or has not moved for `stallMs`, or `maxMs` have passed since `since` (hr ms).
   */
  drain(opts: { since: number; enough: number; stallMs: number; maxMs: number }): Promise<void>;
  /** Ends the polling (after the poll under way). */
  stop(): Promise<void>;
}

/**
 * Reads `count()` every `pollMs` from now on (a failed read keeps the last count),
 * recording `sample(t since t0, count)` each time. With `near`, only every `slowPollMs`
 * until `near()` first holds (checked every `pollMs`): a count is a query on the
 * measured system's own store (jetcron's: a scan of `executions`, ~3 ms of Postgres CPU
 * at 10,000 rows; pg-boss's: its job table), taken from the run it measures, 20 times a
 * second, while BullMQ's (a ZCARD) costs nothing. Before every request has reached the
 * target none of them can all be done, so the time of completion is read as exactly.
 */
export function pollProgress<S>(opts: {
  t0: number;
  goal: number;
  pollMs: number;
  count: () => Promise<number>;
  sample: (t: number, done: number) => S;
  near?: () => Promise<boolean>;
  slowPollMs?: number;
}): Progress<S> {
  const samples: S[] = [];
  let done = 0;
  let completeAt: number | undefined;
  let lastAt = opts.t0;
  let polling = true;
  let isNear = !opts.near;
  let countedAt = -Infinity;
  const loop = (async () => {
    while (polling) {
      const at = hrMs();
      if (!isNear) isNear = await opts.near!().catch(() => false);
      if (isNear || at - countedAt >= (opts.slowPollMs ?? 1_000)) {
        countedAt = at;
        try {
          done = await opts.count();
        } catch {
          /* keep polling */
        }
        samples.push(opts.sample(at - opts.t0, done));
        lastAt = at;
        if (completeAt === undefined && done >= opts.goal) completeAt = at;
      }
      await sleep(Math.max(0, opts.pollMs - (hrMs() - at)));
    }
  })();
  return {
    t0: opts.t0,
    get done() {
      return done;
    },
    get completeAt() {
      return completeAt;
    },
    samples,
    get seconds() {
      return ((completeAt ?? lastAt) - opts.t0) / 1000;
    },
    async drain({ since, enough, stallMs, maxMs }) {
      let lastProgress = hrMs();
      let lastSeen = done;
      while (completeAt === undefined && hrMs() - since < maxMs) {
        await sleep(opts.pollMs);
        if (done !== lastSeen) {
          lastSeen = done;
          lastProgress = hrMs();
        } else if (hrMs() - lastProgress > stallMs) {
          break;
        }
        if (done >= enough) break;
      }
    },
    async stop() {
      polling = false;
      await loop;
    },
  };
}

/** A run's end-to-end figures: `finished` of them over the time to completion (see `seconds`). */
export function endToEnd<S>(p: Progress<S>, run: Pick<EndToEndRun<S>, 'createEnd' | 'targetSamples' | 'cpu'> & { finished: number }): EndToEndRun<S> {
  const { finished, ...rest } = run;
  return { ...rest, t0: p.t0, pgCompleteAt: p.completeAt, samples: p.samples, finalSuccess: finished, e2eSeconds: p.seconds, execRate: finished / p.seconds };
}
