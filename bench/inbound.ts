/**
 * Inbound webhooks (`/in/<slug>`, no auth): how fast the service accepts them (200
 * once the request is stored in the INBOUND stream) next to a bare Node HTTP server
 * driven by the same load generator with the same ~1 KB JSON body; the latency at
 * 80% of that rate (open loop); and receive → forward latency to an instant target,
 * every event counted (lost, duplicated), without and with the endpoint's lane.
 */
import { createHmac } from 'node:crypto';
import { Kvm } from '@nats-io/kv';
import { KV_BUCKETS, STREAMS } from '../streams/definitions.ts';
import { DeliverPolicy } from '@nats-io/jetstream';
import { connectNats, type Nats } from '../src/nats/connection.ts';
import { CHECKPOINT_KEY as NOTIFIER_CHECKPOINT } from '../src/notifier/reader.ts';
import { decodeStoredRequests } from '../src/inbound/stored-request.ts';
import { cpuPhase, sleep, startService, startTarget, type CpuReport } from './harness.ts';
import { closedLoop, HttpClient, openLoop, Outcomes, type SendResult } from './load.ts';
import { hrToWallOffset, stageTable, troubleNotes, withStack, type Benchmark, type Stack } from './stack.ts';
import { fmt, summarize, type Summary } from './stats.ts';

const CONCURRENCY = 64;
const SECONDS = 10;
const WARMUP_MS = 2_000;
/**
 * The acceptance phases' warm-up, the bare server's and the service's alike. A fresh
 * service spends its first seconds under load compiling and sizing its heaps: measured
 * in 2 s steps (a warm-up probe, 2026-11-26, twice; in git history), its CPU per request was
 * 0.20–0.21 ms in the first step, 0.12–0.13 in the second, 0.09–0.14 in the third and
 * 0.08–0.10 from the fifth on (the bare server's own settled by then too); after 2 s the
 * 10 s window still counted part of that.
 */
const ACCEPT_WARMUP_MS = 8_000;
const MAX_REQUESTS = 1_000_000;
const OPEN_FRACTION = 0.8;
const OPEN_SECONDS = 8;
/** Enough that open-loop requests never wait for a connection in the client. */
const OPEN_CONNECTIONS = 512;
const FORWARD_RATE = 200;
const FORWARD_COUNT = 2_000;
const FORWARD_WARMUP = 200;
const LANE_RATE = 20;
const LANE_COUNT = 500;
const ARRIVAL_WAIT_MS = 30_000;
const CATCH_UP_LIMIT_MS = 120_000;
const BODY_BYTES = 1024;
const GOAL_RATIO = 0.5;
/** A Stripe-verified endpoint's acceptance against an unverified one's (the same signed requests to both). */
const PRESET_GOAL = 0.9;
const PRESET_ROUNDS = 2;
const PRESET_SECONDS = 6;
const STRIPE_SECRET = 'whsec_bench_stripe_endpoint_secret';

/** `Stripe-Signature` as Stripe writes it: `t=<unix>,v1=<hex HMAC-SHA256 of "t.body">`. */
function stripeSigned(body: string): Record<string, string> {
  const t = Math.floor(Date.now() / 1000);
  return { 'Content-Type': 'application/json', 'Stripe-Signature': `t=${t},v1=${createHmac('sha256', STRIPE_SECRET).update(`${t}.${body}`).digest('hex')}` };
}

/** A ~1 KB JSON body; the target server reads `bid` back from a forwarded copy. */
export function payload(id: string): string {
  const head = `{"bid":"${id}","type":"bench.inbound","pad":"`;
  return `${head}${'x'.repeat(Math.max(0, BODY_BYTES - head.length - 2))}"}`;
}

const isOk = (r: SendResult) => r.status === 200;
const isReceived = (r: SendResult) => r.status === 200 && r.text.includes('"received"');

/** Counts `r` in `outcomes` and keeps its latency when `accepted`; returns whether it was. */
function tally(r: SendResult, accepted: (r: SendResult) => boolean, outcomes: Outcomes, ms: number[]): boolean {
  const ok = accepted(r);
  if (ok) ms.push(r.ms);
  outcomes.add(ok ? '200' : r.status === 200 ? '200 without "received"' : String(r.status), ok ? undefined : r.text);
  return ok;
}

interface Saturation {
  /** Accepted answers during the warm-up (they are stored too). */
  warmOk: number;
  sent: number;
  ms: number[];
  rate: number;
  elapsedMs: number;
  outcomes: Outcomes;
}

/**
 * Closed loop: WARMUP_MS, then `seconds` at CONCURRENCY, POSTing the ~1 KB body to `path`
 * (with `headers(body)` when given); `onMeasure` runs between the two.
 */
async function saturate(
  client: HttpClient, path: string, accepted: (r: SendResult) => boolean,
  opts: { onMeasure?: () => void; headers?: (body: string) => Record<string, string>; seconds?: number; tag?: string; warmupMs?: number } = {},
): Promise<Saturation> {
  const warm = new Outcomes();
  const tag = opts.tag ?? '';
  const post = (id: string) => {
    const body = payload(`${tag}${id}`);
    return client.send('POST', path, { body, headers: opts.headers?.(body) });
  };
  await closedLoop({ concurrency: CONCURRENCY, maxCount: MAX_REQUESTS, maxMs: opts.warmupMs ?? WARMUP_MS, fn: async (i) => tally(await post(`w${i}`), accepted, warm, []) });
  opts.onMeasure?.();
  const outcomes = new Outcomes();
  const ms: number[] = [];
  const run = await closedLoop({ concurrency: CONCURRENCY, maxCount: MAX_REQUESTS, maxMs: (opts.seconds ?? SECONDS) * 1000, fn: async (i) => tally(await post(`s${i}`), accepted, outcomes, ms) });
  return { warmOk: warm.count('200'), sent: run.started, ms, rate: ms.length / (run.elapsedMs / 1000), elapsedMs: run.elapsedMs, outcomes };
}

/** CPU ms per answered request of the bare server (or the service, nats-server and Postgres) and of the load generator. */
interface CpuPerRequest {
  server: number;
  load: number;
}

/** The same loop against a forked bare `node:http` server answering 200 `{"ok":true}`; its CPU and the load generator's per request. */
async function measureRawServer(): Promise<Saturation & { cpu: CpuPerRequest }> {
  const server = await startTarget({ plain: true });
  const client = new HttpClient(server.url, CONCURRENCY);
  try {
    let end: (() => CpuReport) | undefined;
    const run = await saturate(client, '/', isOk, { warmupMs: ACCEPT_WARMUP_MS, onMeasure: () => (end = cpuPhase([
      { name: 'server', pid: () => server.pid, withDescendants: false },
      { name: 'load', pid: () => process.pid, withDescendants: false },
    ])) });
    const rows = end!().rows;
    const per = (name: string) => (1000 * rows.find((r) => r.name === name)!.cpuSeconds) / Math.max(1, run.ms.length);
    return { ...run, cpu: { server: per('server'), load: per('load') } };
  } finally {
    await client.close();
    await server.stop();
  }
}

async function createEndpoint(s: Stack, spec: { name: string; forward_urls: string[]; use_lane: boolean; verification?: Record<string, string> }): Promise<string> {
  const r = await s.api.send('POST', '/api/v1/endpoints', { body: JSON.stringify(spec) });
  if (r.status === 404) throw new Error(`POST /api/v1/endpoints answered 404: this build has no inbound endpoints (${r.text.slice(0, 120)})`);
  if (r.status !== 201) throw new Error(`POST /api/v1/endpoints answered ${r.status}: ${r.text.slice(0, 300)}`);
  const url = new URL((JSON.parse(r.text) as { data: { inbound_url: string } }).data.inbound_url);
  if (!url.pathname.startsWith('/in/')) throw new Error(`inbound_url ${url.href} is not <root>/in/<slug>`);
  return url.pathname + url.search;
}

interface CatchUp {
  /** Requests stored in INBOUND when the wait began (a message may hold several). */
  stored: number;
  /** Stored requests not yet recorded in inbound_events when the wait began. */
  backlog: number;
  /** Until every stored request is an inbound_events row (router + projector); undefined = not within CATCH_UP_LIMIT_MS. */
  recordedMs: number | undefined;
  /** Until the notifier's checkpoint passed every event in EVENTS by then. */
  readMs: number | undefined;
}

/**
 * The requests INBOUND holds, counted by reading its messages (a message of one request,
 * or a group of one loop turn's): read on from where the last count stopped.
 */
class StoredRequests {
  private count = 0;
  private through = 0;

  async total(nats: Nats): Promise<number> {
    const last = (await nats.jsm.streams.info(STREAMS.inbound.name)).state.last_seq;
    if (last <= this.through) return this.count;
    const consumer = await nats.js.consumers.get(STREAMS.inbound.name, { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: this.through + 1 });
    while (this.through < last) {
      const batch = await consumer.fetch({ max_messages: 1000, expires: 2_000 });
      for await (const m of batch) {
        this.count += decodeStoredRequests(m.data, m.headers).length;
        this.through = m.seq;
      }
    }
    return this.count;
  }
}

/**
 * Waits until the pipeline has caught up with what was accepted: every request stored
 * in INBOUND is an inbound_events row (its event recorded, then projected), and the
 * notifier, an EVENTS reader of the same process as the partition owners (they share
 * its read of the log), has passed every event appended by then. So no phase measures
 * the previous one's backlog.
 */
async function catchUp(s: Stack, counted: StoredRequests): Promise<CatchUp> {
  const nats = await connectNats(s.nats.url, 'bench-inbound');
  try {
    const checkpoints = await new Kvm(nats.nc).open(KV_BUCKETS.checkpoints.name);
    const stored = await counted.total(nats);
    const t0 = performance.now();
    let backlog: number | undefined;
    let recordedMs: number | undefined;
    let eventsSeq = 0;
    while (performance.now() - t0 < CATCH_UP_LIMIT_MS) {
      if (recordedMs === undefined) {
        const r = await s.db.query<{ n: string }>('SELECT count(*) AS n FROM inbound_events');
        const recorded = Number(r.rows[0]?.n ?? 0);
        backlog ??= Math.max(0, stored - recorded);
        if (recorded >= stored) {
          recordedMs = performance.now() - t0;
          eventsSeq = (await nats.jsm.streams.info(STREAMS.events.name)).state.last_seq;
        }
      }
      if (recordedMs !== undefined && Number((await checkpoints.get(NOTIFIER_CHECKPOINT))?.string() || 0) >= eventsSeq) {
        return { stored, backlog: backlog ?? 0, recordedMs, readMs: performance.now() - t0 };
      }
      await sleep(100);
    }
    return { stored, backlog: backlog ?? 0, recordedMs, readMs: undefined };
  } finally {
    await nats.close();
  }
}

function catchUpFigures(c: CatchUp): string {
  const within = (ms: number | undefined) => (ms === undefined ? `not within ${CATCH_UP_LIMIT_MS / 1000} s` : `in ${fmt.s(ms / 1000)}`);
  const rate = c.recordedMs && c.backlog > 0 ? ` (${fmt.rate(c.backlog / (c.recordedMs / 1000))})` : '';
  return `backlog ${fmt.int(c.backlog)} recorded ${within(c.recordedMs)}${rate}; notifier through EVENTS ${within(c.readMs)}`;
}

interface ForwardRun {
  accepted: number;
  latency: number[];
  /** p50 of send → arrival for the events sent in the run's first and last second: a rising queue shows here. */
  firstLastP50: [number, number];
  lost: number;
  duplicates: number;
  executionIds: number;
  executionIdRepeats: number;
  anonymous: number;
  outOfOrder: number;
  outcomes: Outcomes;
  sendLagP99: number;
  /** Per stage, from the service's timestamps (ms resolution). */
  stages: { label: string; values: number[] }[];
}

/**
 * Splits send → target arrival with the service's own timestamps: the receiver's
 * `received_at`, the router's decision (the execution's `created_at`) and the
 * dispatcher's start. `events`: bench index → inbound event id (from the 200).
 */
async function forwardStages(s: Stack, events: Map<number, string>, sentHr: number[], arrived: Map<number, number>): Promise<ForwardRun['stages']> {
  const ids = [...events.values()];
  const query = () =>
    s.db.query<{ id: string; r: string; c: string; st: string | null }>(
      `SELECT ie.id, extract(epoch FROM ie.received_at) * 1000 AS r, extract(epoch FROM x.created_at) * 1000 AS c, extract(epoch FROM x.started_at) * 1000 AS st
         FROM inbound_events ie JOIN executions x ON x.parent_id = ie.id
        WHERE ie.id = ANY($1) AND x.finished_at IS NOT NULL`,
      [ids],
    );
  const deadline = Date.now() + 15_000;
  let rows = (await query()).rows;
  while (rows.length < arrived.size && Date.now() < deadline) {
    await sleep(200);
    rows = (await query()).rows;
  }
  const byEvent = new Map(rows.map((x) => [x.id, x]));
  const offset = hrToWallOffset();
  const toReceiver: number[] = [];
  const toRouter: number[] = [];
  const toDispatcher: number[] = [];
  const toTarget: number[] = [];
  for (const [i, hr] of arrived) {
    const x = byEvent.get(events.get(i)!);
    if (!x) continue;
    toReceiver.push(Number(x.r) - (sentHr[i]! + offset));
    toRouter.push(Number(x.c) - Number(x.r));
    if (x.st !== null) {
      toDispatcher.push(Number(x.st) - Number(x.c));
      toTarget.push(hr + offset - Number(x.st));
    }
  }
  return [
    { label: 'bench send → received (receiver stamp)', values: toReceiver },
    { label: 'received → router decision (execution created_at)', values: toRouter },
    { label: 'router decision → dispatcher start', values: toDispatcher },
    { label: 'dispatcher start → target arrival', values: toTarget },
  ];
}

/**
 * `count` POSTs at `rate`/s (open loop) to an endpoint forwarding to the target's
 * `/body-id`; waits for every accepted one to arrive, then one more second for
 * repeats. Latency = target arrival − send (both CLOCK_MONOTONIC).
 */
async function forwardRun(s: Stack, client: HttpClient, path: string, prefix: string, rate: number, count: number): Promise<ForwardRun> {
  await s.target.reset();
  const outcomes = new Outcomes();
  const sentHr = new Array<number>(count);
  const accepted: number[] = [];
  const events = new Map<number, string>();
  const loop = await openLoop({
    rate,
    count,
    maxMs: 30_000,
    fn: async (i) => {
      const r = await client.send('POST', path, { body: payload(`${prefix}${i}`) });
      sentHr[i] = r.sentHr;
      if (!tally(r, isReceived, outcomes, [])) return;
      accepted.push(i);
      events.set(i, (JSON.parse(r.text) as { id: string }).id);
    },
  });
  const deadline = Date.now() + ARRIVAL_WAIT_MS;
  while ((await s.target.stats()).unique < accepted.length && Date.now() < deadline) await sleep(100);
  await sleep(1000);
  const st = await s.target.stats(true);
  const arrived = new Map<number, number>();
  for (const [id, hr] of st.arrivals!) if (id.startsWith(prefix)) arrived.set(Number(id.slice(prefix.length)), hr);
  let outOfOrder = 0;
  let highest = -1;
  for (const [i] of [...arrived].sort((a, b) => a[1] - b[1])) {
    if (i < highest) outOfOrder++;
    highest = Math.max(highest, i);
  }
  const latencyOf = (keep: (i: number) => boolean) => [...arrived].filter(([i]) => keep(i)).map(([i, hr]) => hr - sentHr[i]!);
  return {
    accepted: accepted.length,
    latency: latencyOf(() => true),
    firstLastP50: [summarize(latencyOf((i) => i < rate)).p50, summarize(latencyOf((i) => i >= count - rate)).p50],
    lost: accepted.filter((i) => !arrived.has(i)).length,
    duplicates: st.duplicates,
    executionIds: st.executionIds,
    executionIdRepeats: st.executionIdRepeats,
    anonymous: st.anonymous,
    outOfOrder,
    outcomes,
    sendLagP99: summarize(loop.sendLagMs).p99,
    stages: await forwardStages(s, events, sentHr, arrived),
  };
}

const p50p99 = (x: Summary) => `${fmt.ms(x.p50)} / ${fmt.ms(x.p99)}`;
const firstLast = (f: ForwardRun) => `p50 of the first / last second's events ${fmt.ms(f.firstLastP50[0])} / ${fmt.ms(f.firstLastP50[1])}`;

function forwardFigures(f: ForwardRun): string {
  return `accepted ${fmt.int(f.accepted)}, arrived ${fmt.int(f.latency.length)}; lost: ${f.lost}, duplicates: ${f.duplicates} (by body id), ${f.executionIdRepeats} (by X-Jetcron-Execution-Id, ${fmt.int(f.executionIds)} distinct)`;
}

export const inbound: Benchmark = {
  name: 'inbound',
  title: `Inbound webhooks: ~1 KB JSON POSTs to /in/<slug>, concurrency ${CONCURRENCY} for ${SECONDS} s next to a bare Node server; p99 at ${OPEN_FRACTION * 100}% of that rate; receive → forward latency at ${FORWARD_RATE}/s`,
  run(ctx) {
    return withStack(
      ctx,
      this.name,
      async (s) => {
        ctx.log('inbound: raw reference (forked node:http server, {"ok":true})');
        const raw = await measureRawServer();
        const rawLat = summarize(raw.ms);
        ctx.log(`inbound: raw reference ${raw.rate.toFixed(0)}/s; creating endpoints`);
        const collectPath = await createEndpoint(s, { name: 'bench-collect', forward_urls: [], use_lane: false }).catch((err: Error) => {
          throw new Error(`${err.message}; raw node:http reference measured ${fmt.rate(raw.rate)}, p50 / p99 ${p50p99(rawLat)}`);
        });
        const forwardPath = await createEndpoint(s, { name: 'bench-forward', forward_urls: [`${s.target.url}/body-id`], use_lane: false });
        const lanePath = await createEndpoint(s, { name: 'bench-lane', forward_urls: [`${s.target.url}/body-id`], use_lane: true });

        const counted = new StoredRequests();
        const closed = new HttpClient(s.service.url, CONCURRENCY);
        const open = new HttpClient(s.service.url, OPEN_CONNECTIONS);
        try {
          // 2. Acceptance at saturation, collect-only endpoint (nothing forwarded).
          ctx.log('inbound: acceptance at saturation (collect-only endpoint)');
          let cpuEnd: (() => CpuReport) | undefined;
          const accept = await saturate(closed, collectPath, isReceived, { onMeasure: () => (cpuEnd = s.startCpuPhase()), warmupMs: ACCEPT_WARMUP_MS });
          const cpu = cpuEnd!();
          if (!accept.ms.length) throw new Error(`no inbound request was accepted: ${accept.outcomes.describe()}; ${accept.outcomes.examples[0] ?? ''}`);
          const acceptLat = summarize(accept.ms);
          const okAfterAccept = accept.warmOk + accept.ms.length;
          ctx.log('inbound: waiting for the router to record every stored request');
          const caughtUpAccept = await catchUp(s, counted);
          const storedAfterAccept = caughtUpAccept.stored;
          // The bare server again, the service idle: the fraction is taken against the two
          // runs' mean, so a machine that got busier or quieter meanwhile moves both sides.
          ctx.log('inbound: raw reference again');
          const rawAfter = await measureRawServer();
          const rawRate = (raw.rate + rawAfter.rate) / 2;

          // 3. Open loop at 80% of the measured acceptance rate, same endpoint.
          const openRate = OPEN_FRACTION * accept.rate;
          const openCount = Math.round(openRate * OPEN_SECONDS);
          ctx.log(`inbound: open loop at ${openRate.toFixed(0)}/s for ${OPEN_SECONDS} s`);
          const openOutcomes = new Outcomes();
          const openMs: number[] = [];
          const openLoopRun = await openLoop({
            rate: openRate,
            count: openCount,
            maxMs: 30_000,
            fn: async (i) => tally(await open.send('POST', collectPath, { body: payload(`o${i}`) }), isReceived, openOutcomes, openMs),
          });
          const openLat = summarize(openMs);
          const okAfterOpen = okAfterAccept + openMs.length;
          const caughtUpOpen = await catchUp(s, counted);
          const storedAfterOpen = caughtUpOpen.stored;

          // 4. Receive → forward, without and with the endpoint's lane.
          ctx.log(`inbound: receive → forward, ${FORWARD_COUNT} at ${FORWARD_RATE}/s (use_lane false)`);
          await closedLoop({ concurrency: 8, maxCount: FORWARD_WARMUP, maxMs: 30_000, fn: (i) => open.send('POST', forwardPath, { body: payload(`w${i}`) }) });
          const warmDeadline = Date.now() + 20_000;
          while ((await s.target.stats()).unique < FORWARD_WARMUP && Date.now() < warmDeadline) await sleep(100);
          const fwd = await forwardRun(s, open, forwardPath, 'F', FORWARD_RATE, FORWARD_COUNT);
          ctx.log(`inbound: receive → forward, ${LANE_COUNT} at ${LANE_RATE}/s (use_lane true)`);
          const lane = await forwardRun(s, open, lanePath, 'L', LANE_RATE, LANE_COUNT);
          // 5. The production shape: an API process of its own takes the requests while
          // the first process (every role) routes and projects them. Same machine, so the
          // two still share its 2 cores; what they no longer share is one event loop.
          ctx.log('inbound: acceptance at saturation through a second process with --roles api');
          const apiOnly = await startService({ name: `${this.name}-api`, natsUrl: s.nats.url, databaseUrl: s.databaseUrl, env: { JETCRON_ROLES: 'api' } });
          let split: Saturation;
          try {
            const splitClient = new HttpClient(apiOnly.url, CONCURRENCY);
            try {
              split = await saturate(splitClient, collectPath, isReceived);
            } finally {
              await splitClient.close();
            }
          } finally {
            await apiOnly.stop();
          }
          const splitLat = summarize(split.ms);
          const caughtUpSplit = await catchUp(s, counted);

          // 6. The Stripe preset's cost: the same Stripe-signed requests to an unverified and
          // a Stripe-verified collect-only endpoint, alternating, each run followed by a catch-up.
          const plainPath = await createEndpoint(s, { name: 'bench-unverified', forward_urls: [], use_lane: false });
          const stripePath = await createEndpoint(s, { name: 'bench-stripe', forward_urls: [], use_lane: false, verification: { type: 'stripe', secret: STRIPE_SECRET } });
          const presetRuns: { plain: Saturation[]; stripe: Saturation[] } = { plain: [], stripe: [] };
          for (let round = 0; round < PRESET_ROUNDS; round++) {
            for (const [kind, path] of [['plain', plainPath], ['stripe', stripePath]] as const) {
              ctx.log(`inbound: ${kind === 'stripe' ? 'Stripe-verified' : 'unverified'} endpoint, round ${round + 1} of ${PRESET_ROUNDS}`);
              presetRuns[kind].push(await saturate(closed, path, isReceived, { headers: stripeSigned, seconds: PRESET_SECONDS, tag: `${kind[0]}${round}` }));
              await catchUp(s, counted);
            }
          }
          const rateOf = (runs: Saturation[]) => runs.reduce((a, r) => a + r.ms.length, 0) / (runs.reduce((a, r) => a + r.elapsedMs, 0) / 1000);
          const presetRatio = rateOf(presetRuns.stripe) / rateOf(presetRuns.plain);
          const presetOk = presetRatio >= PRESET_GOAL;
          const presetLat = (runs: Saturation[]) => p50p99(summarize(runs.flatMap((r) => r.ms)));
          const presetRates = (runs: Saturation[]) => runs.map((r) => fmt.rate(r.rate)).join(', ');

          const variants = [['use_lane false', fwd], ['use_lane true', lane]] as const;
          const fwdLat = summarize(fwd.latency);
          const laneLat = summarize(lane.latency);

          const ratio = accept.rate / rawRate;
          // CPU per answered request on each side, load generator included: on a shared machine other
          // work slows the bare server (two single-threaded processes taking turns) far more than the
          // service, so the fraction of rates alone overstates the service there; this ratio moves less.
          const perAccepted = (pattern: RegExp) => (1000 * cpu.rows.filter((r) => !r.detail && pattern.test(r.name)).reduce((a, r) => a + r.cpuSeconds, 0)) / accept.ms.length;
          const serviceCpu: CpuPerRequest = { server: perAccepted(/^(jetcron|nats-server|postgres)/), load: perAccepted(/^bench load generator/) };
          const rawCpu: CpuPerRequest = { server: (raw.cpu.server + rawAfter.cpu.server) / 2, load: (raw.cpu.load + rawAfter.cpu.load) / 2 };
          const cpuRatio = (rawCpu.server + rawCpu.load) / (serviceCpu.server + serviceCpu.load);
          const okRatio = ratio >= GOAL_RATIO;
          const durable = storedAfterAccept >= okAfterAccept && storedAfterOpen >= okAfterOpen;
          const exact = (f: ForwardRun) => f.lost === 0 && f.duplicates === 0 && f.executionIdRepeats === 0 && f.accepted > 0;
          const notes = [
            `load generator for both the raw server and the service: undici Pool, ${CONCURRENCY} keep-alive connections, closed loop, ${ACCEPT_WARMUP_MS / 1000} s warm-up then ${SECONDS} s measured (the bare server before and after the service's run, the fraction against their mean; ${WARMUP_MS / 1000} s warm-up for the other phases); body ${BODY_BYTES} bytes of JSON; only 200 answers count (for the service, 200 with status "received").`,
            'acceptance is measured on a collect-only endpoint (no forward URLs), so no forwarding competes with it; the 80% open loop uses the same endpoint. Each collect-only request is still recorded (an InboundEventReceived event, appended by the receiver for an endpoint without a script; an inbound_events row) and read by every EVENTS reader of the other roles\' process (partition owners, notifier); after each of the two runs the bench waits until inbound_events has a row per stored request and the notifier\'s checkpoint has passed every event, so no phase starts with the previous one\'s backlog ("pipeline catch-up" = that wait).',
            `receive → forward: forward URL = the bench target (answers 200 at once); arrival at the target − send time, both CLOCK_MONOTONIC; warm-up ${FORWARD_WARMUP} events first. Lane variant at ${LANE_RATE}/s, since a lane forwards one event at a time.`,
            ...[accept.outcomes, openOutcomes, fwd.outcomes, lane.outcomes].flatMap((o) => o.examples),
            ...troubleNotes(s.service),
          ];
          for (const [label, f] of variants) {
            if (f.anonymous) notes.push(`${label}: ${f.anonymous} forwarded requests had no "bid" in their body (body altered?).`);
            if (f.executionIds < f.latency.length) notes.push(`${label}: only ${f.executionIds} distinct X-Jetcron-Execution-Id for ${f.latency.length} events.`);
          }
          return {
            name: this.name,
            title: this.title,
            metrics: [
              { label: 'raw node:http server (forked, 200 {"ok":true}), before / after the service\'s run', value: `${fmt.rate(raw.rate)} / ${fmt.rate(rawAfter.rate)} (mean ${fmt.rate(rawRate)}), p50 / p99 ${p50p99(rawLat)}; ${raw.outcomes.describe()}` },
              { label: 'inbound accepted (collect-only endpoint, 200 "received")', value: `${fmt.rate(accept.rate)} (${fmt.int(accept.ms.length)} in ${fmt.s(accept.elapsedMs / 1000)})` },
              { label: 'fraction of the raw node:http server', value: fmt.frac(ratio), goal: `≥ ${GOAL_RATIO}`, ok: okRatio },
              {
                label: 'CPU ms per answered request (load generator apart): bare server / jetcron + nats-server + Postgres',
                value: `${rawCpu.server.toFixed(3)} (+ ${rawCpu.load.toFixed(3)}) / ${serviceCpu.server.toFixed(3)} (+ ${serviceCpu.load.toFixed(3)}); the fraction they imply, (bare + load) / (service + load): ${fmt.frac(cpuRatio)}`,
              },
              { label: 'fraction of the raw undici loop (reference)', value: ctx.rawRate ? fmt.frac(accept.rate / ctx.rawRate) : '–' },
              { label: 'inbound latency p50 / p99 / max', value: `${p50p99(acceptLat)} / ${fmt.ms(acceptLat.max)}` },
              { label: 'inbound outcomes', value: accept.outcomes.describe() },
              {
                label: 'requests stored in INBOUND ≥ 200 answers',
                value: `${fmt.int(storedAfterAccept)} ≥ ${fmt.int(okAfterAccept)} after saturation; ${fmt.int(storedAfterOpen)} ≥ ${fmt.int(okAfterOpen)} after the 80% run`,
                ok: durable,
              },
              { label: 'pipeline catch-up after saturation (INBOUND → inbound_events rows; notifier)', value: catchUpFigures(caughtUpAccept), ok: caughtUpAccept.readMs !== undefined },
              { label: `open loop at ${OPEN_FRACTION * 100}% (${fmt.rate(openRate)}, ${OPEN_SECONDS} s)`, value: `${fmt.int(openMs.length)} of ${fmt.int(openCount)} answered 200; ${openOutcomes.describe()}` },
              { label: `latency at ${OPEN_FRACTION * 100}%: p50 / p99 / max`, value: `${p50p99(openLat)} / ${fmt.ms(openLat.max)}` },
              { label: 'open loop send lag p99 (bench side)', value: `${fmt.ms(summarize(openLoopRun.sendLagMs).p99)}; unfinished ${openLoopRun.unfinished}` },
              { label: `pipeline catch-up after the ${OPEN_FRACTION * 100}% run`, value: catchUpFigures(caughtUpOpen), ok: caughtUpOpen.readMs !== undefined },
              { label: 'inbound accepted by an API-only process (all roles in another)', value: `${fmt.rate(split.rate)} = ${fmt.frac(split.rate / rawRate)} of raw; p50 / p99 ${p50p99(splitLat)}; ${split.outcomes.describe()}` },
              { label: 'pipeline catch-up after the API-only run', value: catchUpFigures(caughtUpSplit), ok: caughtUpSplit.readMs !== undefined },
              { label: `receive → forward p50 / p99, use_lane false (${FORWARD_RATE}/s)`, value: `${p50p99(fwdLat)}; ${firstLast(fwd)}` },
              { label: 'use_lane false: events', value: forwardFigures(fwd), ok: exact(fwd) },
              { label: `receive → forward p50 / p99, use_lane true (${LANE_RATE}/s)`, value: `${p50p99(laneLat)}; ${firstLast(lane)}` },
              { label: 'use_lane true: events', value: `${forwardFigures(lane)}; out of order: ${lane.outOfOrder}`, ok: exact(lane) && lane.outOfOrder === 0 },
              { label: 'forward send lag p99 (bench side), lane off / on', value: `${fmt.ms(fwd.sendLagP99)} / ${fmt.ms(lane.sendLagP99)}` },
              { label: `unverified endpoint, Stripe-signed requests (${PRESET_ROUNDS} × ${PRESET_SECONDS} s)`, value: `${fmt.rate(rateOf(presetRuns.plain))} (runs: ${presetRates(presetRuns.plain)}); p50 / p99 ${presetLat(presetRuns.plain)}; ${presetRuns.plain.map((r) => r.outcomes.describe()).join('; ')}` },
              { label: `Stripe-verified endpoint (verification: stripe), same requests`, value: `${fmt.rate(rateOf(presetRuns.stripe))} (runs: ${presetRates(presetRuns.stripe)}); p50 / p99 ${presetLat(presetRuns.stripe)}; ${presetRuns.stripe.map((r) => r.outcomes.describe()).join('; ')}` },
              { label: 'Stripe-verified / unverified acceptance', value: fmt.frac(presetRatio), goal: `≥ ${PRESET_GOAL}`, ok: presetOk },
            ],
            headline: [
              { label: 'inbound accepted/s (fraction of raw node:http)', value: `${fmt.rate(accept.rate)} (${fmt.frac(ratio)} of ${fmt.rate(rawRate)})`, goal: `≥ ${GOAL_RATIO}`, ok: okRatio },
              { label: `inbound p99 at ${OPEN_FRACTION * 100}% of that rate`, value: fmt.ms(openLat.p99) },
              { label: 'inbound accepted/s, API role in its own process', value: `${fmt.rate(split.rate)} (${fmt.frac(split.rate / rawRate)} of raw)` },
              { label: 'receive → forward p50 / p99 (no lane)', value: p50p99(fwdLat) },
              { label: 'Stripe-verified endpoint accepted/s (fraction of unverified)', value: `${fmt.rate(rateOf(presetRuns.stripe))} (${fmt.frac(presetRatio)})`, goal: `≥ ${PRESET_GOAL}`, ok: presetOk },
              { label: 'forwarded exactly once (no lane / lane)', value: `lost: ${fwd.lost + lane.lost}, duplicates: ${fwd.duplicates + lane.duplicates + fwd.executionIdRepeats + lane.executionIdRepeats}`, ok: exact(fwd) && exact(lane) },
            ],
            tables: [
              {
                title: 'Latency (bench send → answer, or → arrival at the forward target)',
                table: stageTable([
                  { label: `raw node:http server, concurrency ${CONCURRENCY}`, values: raw.ms },
                  { label: `inbound accept, concurrency ${CONCURRENCY}`, values: accept.ms },
                  { label: `inbound accept, open loop at ${fmt.rate(openRate)}`, values: openMs },
                  { label: `receive → forward, use_lane false, ${FORWARD_RATE}/s`, values: fwd.latency },
                  { label: `receive → forward, use_lane true, ${LANE_RATE}/s`, values: lane.latency },
                ]),
              },
              ...variants.map(([label, f]) => ({
                title: `Receive → forward, ${label}: where the time goes (service timestamps from Postgres, ms resolution)`,
                table: stageTable([...f.stages, { label: 'total: send → target arrival', values: f.latency }]),
              })),
            ],
            cpu: { phase: `${SECONDS} s inbound acceptance at saturation`, report: cpu, units: { count: accept.sent, what: 'request' } },
            notes,
          };
        } finally {
          await closed.close();
          await open.close();
        }
      },
      { plan: 'pro' },
    );
  },
};
