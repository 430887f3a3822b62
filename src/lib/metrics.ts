import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics, type Metric } from 'prom-client';

/**
 * Every metric jetcron exports, on prom-client: one registry per `serve` (so per
 * process), rendered at `GET /metrics`. docs/operations.md describes each one.
 * Counters and histograms are defined here with their label names; gauges whose
 * value lives in some part of the service are registered by that part with
 * `readFrom` (read when scraped), so a process shows only the gauges of what it runs.
 */

type Labels<L extends string> = Partial<Record<L, string | number>>;
export type GaugeSamples<L extends string> = Iterable<[Labels<L>, number]>;

const SECONDS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/** An outbound exchange may take up to a task's `timeout_ms` (at most 300 s). */
const EXCHANGE_SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
/** A heartbeat run (a `/start` to its end) lasts from a second to a day or so (max_duration_seconds is at most 86,400). */
const RUN_SECONDS = [0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400];
/** A script call is cut at 100 ms (a worker that does not stop is ended 50 ms later). */
const SCRIPT_SECONDS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.15];

let processRegistry: Registry | undefined;

/**
 * prom-client's process metrics (CPU, memory, event loop, GC, handles), collected once
 * per process: they describe the process, and each collector keeps its own observers.
 */
function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry, prefix: 'jetcron_' });
  }
  return processRegistry;
}

export function createMetrics(opts: { processMetrics?: boolean } = {}) {
  const registry = new Registry();
  // getMetricsAsArray's type says MetricObject; they are the metrics themselves (Registry.merge relies on it too).
  if (opts.processMetrics !== false) for (const m of processMetrics().getMetricsAsArray()) registry.registerMetric(m as unknown as Metric);
  const registers = [registry];

  const counter = <L extends string = never>(name: string, help: string, labelNames: readonly L[] = []) =>
    new Counter<L>({ name, help, labelNames, registers });
  const histogram = <L extends string = never>(name: string, help: string, buckets: number[], labelNames: readonly L[] = []) =>
    new Histogram<L>({ name, help, labelNames, buckets, registers });
  const labeledGauge = <L extends string>(name: string, help: string, labelNames: readonly L[]) => ({
    /** Registers the gauge; `read` gives its samples at each scrape (a failed read gives none). */
    readFrom(read: () => GaugeSamples<L> | Promise<GaugeSamples<L>>): void {
      new Gauge<L>({
        name, help, labelNames, registers,
        async collect() {
          let samples: GaugeSamples<L> = [];
          try {
            samples = await read();
          } catch { /* no samples this scrape: a stale value would mislead more than a gap */ }
          this.reset();
          for (const [labels, value] of samples) this.set(labels, value);
        },
      });
    },
  });
  const gauge = (name: string, help: string) => ({
    readFrom(read: () => number): void {
      new Gauge({ name, help, registers, collect() { this.set(read()); } });
    },
  });

  return {
    contentType: registry.contentType,
    render: () => registry.metrics(),

    unhandledRejections: counter('jetcron_unhandled_rejections_total', 'Promise rejections no code path handled (each one is a bug)'),

    httpRequests: counter('jetcron_http_requests_total', 'HTTP requests answered', ['method', 'route', 'status']),
    httpRequestDuration: histogram('jetcron_http_request_duration_seconds', 'HTTP request duration, by route and status', SECONDS, ['method', 'route', 'status']),
    inboundRequests: counter('jetcron_inbound_requests_total', 'Inbound webhook requests answered', ['status']),
    inboundRequestDuration: histogram('jetcron_inbound_request_duration_seconds', 'Inbound webhook request duration', SECONDS),
    rateLimited: counter('jetcron_rate_limited_total', 'API requests refused by the rate limit'),
    idempotentReplays: counter('jetcron_idempotent_replays_total', 'Answers replayed for a repeated Idempotency-Key'),
    idempotencyStoreFailures: counter('jetcron_idempotency_store_failures_total', 'Idempotency records that could not be written', ['what']),
    projectionSeq: gauge('jetcron_projection_seq', 'Last stream sequence the read models include'),
    apiProcesses: gauge('jetcron_api_processes', 'API processes sharing the rate limit'),
    liveFeeds: gauge('jetcron_live_feeds', 'Live feeds (GET /api/v1/live) open in this process'),

    consumerErrors: counter('jetcron_consumer_errors_total', 'Failed tries of an event, job or timer, by consumer and kind', ['consumer', 'kind']),
    consumerSkipped: counter('jetcron_consumer_skipped_total', 'Items skipped after repeated failures (see `jetcron projections failures`), by consumer', ['consumer']),
    consumerFailuresRecorded: labeledGauge('jetcron_consumer_failures_recorded', 'Items skipped after repeated failures and not yet retried successfully (KV failures), by consumer', ['consumer']),
    consumerLag: labeledGauge('jetcron_consumer_lag', 'How far a consumer is behind: stream sequences for a log reader, messages waiting or unacknowledged for a work queue', ['consumer']),
    consumerStuck: labeledGauge('jetcron_consumer_stuck', '1 when a consumer is stuck past the threshold (as of the last health check)', ['consumer']),

    executions: counter('jetcron_executions_total', 'Executions ended (the final attempt recorded), by source type and status', ['source_type', 'status']),
    attemptDuration: histogram('jetcron_attempt_duration_seconds', 'Outbound exchange duration of each attempt sent, by source type and outcome', EXCHANGE_SECONDS, ['source_type', 'outcome']),
    hostBlocksActive: gauge('jetcron_host_blocks_active', 'Organization + host pairs blocked now by per-host backoff'),
    flowControlWaiting: labeledGauge('jetcron_flow_control_waiting', 'Executions waiting under a flow-control key in the partitions this process owns, by organization (keys are not labels: their number has no bound)', ['org_id']),
    flowControlInFlight: labeledGauge('jetcron_flow_control_in_flight', 'Executions of a flow-control key being sent now in the partitions this process owns, by organization', ['org_id']),
    flowControlPausedKeys: labeledGauge('jetcron_flow_control_paused_keys', 'Flow-control keys paused, in the partitions this process owns, by organization', ['org_id']),
    timersPending: gauge('jetcron_timers_pending', 'Executions waiting for their time (a delay, run_at or retry) in the task partitions this process owns'),
    notifications: counter('jetcron_notifications_total', 'Notification delivery tries, by channel and result (sent, retried, failed)', ['channel', 'result']),
    monitorRunDuration: histogram('jetcron_monitor_run_duration_seconds', 'Heartbeat runs timed (a /start to its end, wall clock), by organization and how the run ended (success or failure)', RUN_SECONDS, ['org_id', 'outcome']),
    scriptCalls: counter('jetcron_script_calls_total', 'Lua script calls, by hook and result', ['hook', 'result']),
    scriptCallDuration: histogram('jetcron_script_call_duration_seconds', 'Lua script call duration in a worker (the wait for a free worker excluded)', SCRIPT_SECONDS, ['hook']),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;
