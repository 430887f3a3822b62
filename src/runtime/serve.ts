import { lazyScriptEngine } from '../scripts/engine.ts';
import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import type { Config, Role } from '../config.ts';
import { connectDb } from '../db/connect.ts';
import { migrate } from '../db/migrations.ts';
import { createEventStore } from '../nats/event-store.ts';
import { startTaskOwners } from '../owners/task-owners.ts';
import { createMonitorOwnerClient } from '../owners/monitor-client.ts';
import { startMonitorOwners } from '../owners/monitor-owner.ts';
import type { AttemptResult } from '../commands/execution/types.ts';
import { createOutboundClient } from '../dispatchers/outbound-client.ts';
import { createRequestHandler } from '../http/app.ts';
import type { ApiDeps } from '../http/context.ts';
import { startConsumers } from '../nats/consumer-kit.ts';
import { retryJobWorker } from '../jobs/retry-job-worker.ts';
import { createHealth } from '../http/health.ts';
import { openFailureLedger } from '../nats/failure-ledger.ts';
import { createSupervisor } from '../nats/supervisor.ts';
import { createInboundReceiver } from '../http/inbound-receiver.ts';
import { closableServer } from '../http/server-close.ts';
import { createEndpointDirectory, type EndpointDirectory } from '../inbound/endpoint-directory.ts';
import { scriptHooks } from '../inbound/pipeline.ts';
import { openSecretBox } from '../nats/secret-box.ts';
import { createRateLimiter } from '../http/rate-limit.ts';
import { createClock } from '../lib/clock.ts';
import { createMetrics } from '../lib/metrics.ts';
import { startMetricsServer } from '../http/metrics-endpoint.ts';
import { createStreamInfo } from '../nats/stream-info.ts';
import { createConsumerLag } from './consumer-lag.ts';
import { applyStreams } from '../nats/apply-streams.ts';
import { connectNats } from '../nats/connection.ts';
import { createDirectory } from '../nats/org-directory.ts';
import { startNotifier } from '../notifier/notifier.ts';
import { createChannelSender } from '../notifier/channels/send.ts';
import { createMailer, parseSmtpUrl } from '../notifier/mailer.ts';
import { startProjector } from '../projections/projector.ts';
import { createWatermark } from '../projections/watermark.ts';
import { createLiveFeeds } from '../live/feeds.ts';
import { createReadYourWrites } from '../http/read-your-writes.ts';
import { openProgressBoard, shareProgress } from '../nats/progress-board.ts';
import { answerRollCall } from '../nats/roll-call.ts';
import { startInboundRouter } from '../inbound/router.ts';
import { bootstrapFirstOrganization } from './first-organization.ts';
import { startEmbeddedNats } from './embedded-nats.ts';
import { untilStarted } from '../lib/startup-retry.ts';
import { startEmbeddedPostgres } from './embedded-postgres.ts';
import { startTracing } from '../telemetry/tracing.ts';
import type { Log } from '../lib/logger.ts';

export interface Running {
  url: string | undefined;
  natsUrl: string;
  databaseUrl: string;
  stop(): Promise<void>;
  /** A split serve: each role process and its pid (null while it is being started again). */
  processes?: () => Array<{ roles: Role[]; pid: number | null }>;
}

export type Stopper = () => Promise<void>;

export function named(name: string, fn: Stopper): Stopper {
  Object.defineProperty(fn, 'name', { value: name });
  return fn;
}

/** Stops what was started, last first; a part that does not stop in time is named, so a hung shutdown says where it hangs. */
export async function runStoppers(stoppers: Stopper[], log: (m: string) => void): Promise<void> {
  for (const s of stoppers.reverse()) {
    const slow = setTimeout(() => log(`shutdown: still waiting for ${s.name || 'a part'}`), 15_000);
    await s().catch((e: Error) => log(`shutdown: ${e.message}`));
    clearTimeout(slow);
  }
}

/** The composition root: every role the config names, in one process. */
export async function serve(config: Config, log: Log): Promise<Running> {
  const stoppers: Stopper[] = [];
  const stopAll = () => runStoppers(stoppers, log);
  try {
    return await start(config, log, stoppers, stopAll);
  } catch (err) {
    await stopAll();
    throw err;
  }
}

/** The embedded nats-server and Postgres when no URLs are configured (their stops go on `stoppers`). */
export async function startStores(config: Config, log: (m: string) => void, stoppers: Stopper[]) {
  const embedded = !config.natsUrl && !config.databaseUrl;
  // The embedded servers are chatty; only their errors reach our log.
  const serverLog = (m: string) => {
    if (/\[(ERR|FTL)\]|\b(ERROR|FATAL|PANIC):/.test(m)) log(m);
  };
  mkdirSync(config.dataDir, { recursive: true });
  let natsUrl = config.natsUrl;
  if (!natsUrl) {
    const n = await startEmbeddedNats({ dataDir: config.dataDir, log: serverLog, notice: log, dieWithParent: config.embeddedDieWithParent });
    stoppers.push(named('embedded nats-server', () => n.stop()));
    natsUrl = n.url;
    log(`embedded nats-server at ${natsUrl}`);
  }
  let databaseUrl = config.databaseUrl;
  if (!databaseUrl) {
    const pg = await startEmbeddedPostgres({ dataDir: config.dataDir, log: serverLog, notice: log, dieWithParent: config.embeddedDieWithParent });
    stoppers.push(named('embedded Postgres', () => pg.stop()));
    databaseUrl = pg.url;
    const pgUrlFile = join(config.dataDir, 'postgres.url');
    writeFileSync(pgUrlFile, databaseUrl, { mode: 0o600 });
    stoppers.push(async () => rmSync(pgUrlFile, { force: true }));
    log('embedded Postgres started');
  }
  return { embedded, natsUrl, databaseUrl };
}

async function start(config: Config, log: Log, stoppers: Stopper[], stopAll: () => Promise<void>): Promise<Running> {
  const { embedded, natsUrl, databaseUrl } = await startStores(config, log, stoppers);

  const instanceId = `${process.pid}-${randomBytes(4).toString('hex')}`;
  // First in, so stopped last: spans of the shutdown itself are exported too.
  const tracing = startTracing({ role: [...config.roles].join(','), instanceId });
  stoppers.push(named('trace export', () => tracing.shutdown()));
  if (tracing.enabled) log('tracing: exporting spans over OTLP/HTTP (OTEL_* environment)');
  const nats = await untilStarted('connecting to NATS', () => connectNats(natsUrl, `jetcron ${[...config.roles].join(',')} ${instanceId}`), log);
  stoppers.push(named('NATS connection', () => nats.close()));
  await untilStarted('applying the stream definitions', () => applyStreams(nats, config.streamReplicas), log);
  // The API's monitor owners, once started, tell what deadlines they keep.
  let monitorDeadlines: () => { armed: number; overdue: number } | null = () => null;
  const stopAnswering = answerRollCall(nats, { instance: instanceId, roles: [...config.roles], group: config.processGroup, monitorDeadlines: () => monitorDeadlines() });
  stoppers.push(async () => stopAnswering());

  const { db } = connectDb(databaseUrl, 20);
  stoppers.push(named('Postgres pool', () => db.destroy()));
  if (config.roles.has('api') || config.roles.has('projector')) await untilStarted('migrating Postgres', () => migrate(db), log);

  const clock = createClock(config.timeScale);
  const store = createEventStore(nats);
  const directory = createDirectory(nats, store);
  stoppers.push(async () => directory.close());
  const metrics = createMetrics();
  // Last resort only: every path handles its own failures. One that slips through is
  // logged and counted, never a crash that takes the other roles down with it.
  const onUnhandled = (err: unknown) => {
    metrics.unhandledRejections.inc();
    log(`ERROR unhandled rejection: ${(err as Error)?.stack ?? String(err)}`);
  };
  process.on('unhandledRejection', onUnhandled);
  stoppers.push(async () => void process.off('unhandledRejection', onUnhandled));
  const ledger = await openFailureLedger(nats, log);
  stoppers.push(async () => ledger.close());
  const supervisor = createSupervisor({ ledger, metrics, log });
  if (config.processGroup) {
    const stopSharing = shareProgress(nats, supervisor, config.processGroup, instanceId);
    stoppers.push(named('progress sharing', async () => stopSharing()));
  }

  // Consumers this process may take over are listed (standby) in /healthz from the start.
  if (config.roles.has('projector')) supervisor.progress('projector', 'EVENTS');
  if (config.roles.has('scheduler')) supervisor.progress('inbound-router', 'INBOUND');
  if (config.roles.has('notifier')) supervisor.progress('notifier', 'EVENTS');

  // Lua hooks (endpoint hooks in the receiver and the router, on_response in the
  // dispatcher, the API's checks and test call); its
  // worker threads start on the first script.
  const scripts = lazyScriptEngine({
    timeoutMs: config.scriptTimeoutMs,
    observe: ({ hook, result, seconds }) => {
      metrics.scriptCalls.inc({ hook, result });
      if (result !== 'unavailable') metrics.scriptCallDuration.observe({ hook }, seconds);
    },
  });
  stoppers.push(named('script engine', () => scripts.close()));
  const hooks = scriptHooks(scripts);
  // Endpoints as the API, the inbound router and the bulk jobs' worker read them: one
  // directory (one subscription to the endpoint subjects, one cache) for all of this
  // process's roles, made by the first that needs it and closed after the last has stopped.
  let endpointDirectory: EndpointDirectory | undefined;
  const endpoints = (): EndpointDirectory => {
    if (!endpointDirectory) {
      const made = (endpointDirectory = createEndpointDirectory(nats, store, db));
      stoppers.push(named('endpoint directory', async () => made.close()));
    }
    return endpointDirectory;
  };
  if (config.roles.has('projector')) {
    const p = startProjector({ nats, db, owner: instanceId, log, supervisor });
    stoppers.push(named('projector', () => p.stop()));
    // Bulk retry and replay jobs advance beside the projector (one process across the
    // service, by lease): background work whose allocations stay out of the API's heap.
    if (config.retryJobs) {
      const retryJobs = startConsumers({ nats, owner: instanceId, log }, [retryJobWorker({ db, nats, store, clock, endpoints: endpoints(), hooks }, log, config.jobGroup)]);
      stoppers.push(named('retry job worker', () => retryJobs.stop()));
    }
  }
  // The scheduler role: the inbound router (filter, transform and route hooks of endpoints with a script).
  if (config.roles.has('scheduler')) {
    const router = startInboundRouter({ nats, store, clock, owner: instanceId, log, supervisor, endpoints: endpoints(), hooks });
    stoppers.push(named('inbound router', () => router.stop()));
  }
  if (config.roles.has('dispatcher')) {
    const outbound = createOutboundClient({ allowPrivateTargets: config.allowPrivateTargets });
    stoppers.push(named('outbound client', () => outbound.close()));
    const onAttemptFinished = (r: AttemptResult, exchangeMs: number | null) => {
      if (r.final) metrics.executions.inc({ source_type: r.source.type, status: r.status });
      if (exchangeMs !== null) metrics.attemptDuration.observe({ source_type: r.source.type, outcome: r.status }, exchangeMs / 1000);
    };
    const owners = await startTaskOwners({
      nats, store, directory, outbound, clock, log, owner: instanceId, partitions: config.partitions, concurrency: config.dispatchConcurrency, scripts, onAttemptFinished, supervisor,
    });
    stoppers.push(named('task partition owners', () => owners.stop()));
    const perOrg = (pick: (k: { waiting: number; in_flight: number; paused: number }) => number) =>
      () => [...owners.flowLoad()].map(([org_id, k]) => [{ org_id }, pick(k)] as [{ org_id: string }, number]);
    metrics.flowControlWaiting.readFrom(perOrg((k) => k.waiting));
    metrics.flowControlInFlight.readFrom(perOrg((k) => k.in_flight));
    metrics.flowControlPausedKeys.readFrom(perOrg((k) => k.paused));
    // Delays, retries and schedules' next ticks, held in the owners' memory.
    metrics.timersPending.readFrom(() => owners.waitingForTime());
    metrics.hostBlocksActive.readFrom(() => owners.hostBlocksActive());
  }
  // The key that seals endpoint and channel secrets: the API seals them, the notifier opens channels'.
  const secrets = config.roles.has('api') || config.roles.has('notifier') ? await openSecretBox({ nats, envKey: config.secretsKey, log }) : null;
  // `{root_url}`: with PORT=0 the port is known once the API listens (below), in this process.
  let root = config.publicUrl ?? `http://${config.host}:${config.port}`;
  if (config.roles.has('notifier')) {
    const notifyOutbound = createOutboundClient({ allowPrivateTargets: config.allowPrivateTargets, connectionsPerOrigin: 16 });
    stoppers.push(named('notifier outbound client', () => notifyOutbound.close()));
    const n = await startNotifier({
      nats, store, directory, outbound: notifyOutbound, clock, smtpUrl: config.smtpUrl, owner: instanceId, log, supervisor, secrets: secrets!, rootUrl: () => root,
      onTry: (channel, result) => metrics.notifications.inc({ channel, result }),
    });
    stoppers.push(named('notifier', () => n.stop()));
  }

  let url: string | undefined;
  if (config.roles.has('api')) {
    // Creates name a stream sequence below their commit's from the first one on (`withSeqHint`).
    await store.primeKnownSeq();
    const watermark = await createWatermark(nats, db);
    stoppers.push(async () => watermark.close());
    const reads = createReadYourWrites(nats, watermark);
    stoppers.push(async () => reads.close());
    const rateLimiter = createRateLimiter(nats, instanceId);
    stoppers.push(async () => rateLimiter.close());
    metrics.projectionSeq.readFrom(() => watermark.seq);
    metrics.apiProcesses.readFrom(() => rateLimiter.processCount());
    const apiEndpoints = endpoints();
    const board = openProgressBoard(nats, supervisor, config.processGroup, instanceId);
    stoppers.push(async () => board.close());
    const streams = createStreamInfo(nats);
    const health = createHealth({ nats, db, supervisor, board, streams, metrics, stuckMs: config.healthStuckMs });
    // Every API process reports every consumer's lag: the service's view, as /healthz is.
    const lag = createConsumerLag({ nats, db, board, streams });
    metrics.consumerLag.readFrom(() => lag.measure());
    stoppers.push(async () => health.close());
    const live = createLiveFeeds({ nats, watermark, log }, { perOrg: config.liveFeedsPerOrg, max: config.liveFeedsMax });
    metrics.liveFeeds.readFrom(() => live.count);
    // Monitor partition owners live in the API processes: a ping reaching the process that
    // owns its monitor is decided there, with no NATS round trip before its commit.
    const monitorOwners = startMonitorOwners({ nats, store, clock, owner: instanceId, log, partitions: config.partitions, restateAfter: config.monitorRestateAfter });
    stoppers.push(named('monitor partition owners', () => monitorOwners.stop()));
    monitorDeadlines = () => monitorOwners.counts();
    const monitorClient = createMonitorOwnerClient({ nats, partitions: config.partitions, local: monitorOwners.local });
    // `POST /channels/{id}/test` sends from here, as the notifier would.
    const testOutbound = createOutboundClient({ allowPrivateTargets: config.allowPrivateTargets, connectionsPerOrigin: 4 });
    stoppers.push(named('channel test outbound client', () => testOutbound.close()));
    const testMailer = config.smtpUrl ? createMailer(parseSmtpUrl(config.smtpUrl)) : null;
    stoppers.push(async () => testMailer?.close());
    const channelSender = createChannelSender({ outbound: testOutbound, mailer: testMailer, box: secrets!, directory, clock });
    const apiDeps: ApiDeps = { config, db, nats, store, clock, directory, reads, rateLimiter, metrics, endpoints: apiEndpoints, secrets: secrets!, hooks, health, scripts, live, channelSender, monitorOwners: monitorClient };
    const app = createRequestHandler(apiDeps, log, () => root);
    // Inbound URLs skip express (and pings by token, in `app`): they are the hot path and need neither an API key nor JSON.
    const receiver = createInboundReceiver({ nats, endpoints: apiEndpoints, hooks, secrets: secrets!, metrics, log, store, reads });
    const server: Server = createServer((req, res) => {
      if (!receiver.handle(req, res)) app(req, res);
    });
    const closeServer = closableServer(server);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(config.port, config.host, () => resolve());
    });
    server.keepAliveTimeout = 65_000;
    stoppers.push(named('HTTP server', closeServer));
    // Before the server's close (stoppers run last first): an open feed would hold it for 5 s.
    stoppers.push(named('live feeds', () => live.close()));
    const addr = server.address();
    const port = typeof addr === 'object' && addr ? addr.port : config.port;
    url = `http://${config.host}:${port}`;
    root = config.publicUrl ?? url;
    log(`jetcron API listening on ${url}/api/v1`);
  }

  if (config.metricsPort !== undefined) {
    const m = await startMetricsServer({ metrics, host: config.host, port: config.metricsPort });
    stoppers.push(named('metrics listener', () => m.close()));
    log(`metrics of this process (${[...config.roles].join(',')}) at ${m.url}`);
  }

  if (embedded && config.roles.has('api')) {
    await bootstrapFirstOrganization({ store, clock, dataDir: config.dataDir, db, baseUrl: `${url}/api/v1`, log });
  }
  return { url, natsUrl, databaseUrl, stop: stopAll };
}

