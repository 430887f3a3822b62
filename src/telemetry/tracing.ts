import { context, INVALID_SPAN_CONTEXT, propagation, trace, type Attributes, type Context, type Span, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler, AlwaysOnSampler, BatchSpanProcessor, ParentBasedSampler, TraceIdRatioBasedSampler, TracerProvider, type Sampler,
} from '@opentelemetry/sdk-trace';

/**
 * OpenTelemetry tracing, configured by the standard environment variables and off
 * unless they ask for it: with none of `OTEL_EXPORTER_OTLP_ENDPOINT`,
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_TRACES_EXPORTER=otlp` set (or with
 * `OTEL_SDK_DISABLED=true`, `OTEL_TRACES_EXPORTER=none`), nothing is registered: the
 * API stays its no-op, no context manager runs, and a span costs one no-op call.
 *
 * On: a TracerProvider with a batch processor and the OTLP/HTTP exporter (which reads
 * the `OTEL_EXPORTER_OTLP_*` endpoint, headers and timeout itself), the sampler from
 * `OTEL_TRACES_SAMPLER`/`OTEL_TRACES_SAMPLER_ARG` (default parentbased_always_on),
 * W3C trace context as the propagator, AsyncLocalStorage as the context manager.
 */
export function tracingRequested(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.OTEL_SDK_DISABLED === 'true') return false;
  const exporter = env.OTEL_TRACES_EXPORTER?.trim().toLowerCase();
  if (exporter === 'none') return false;
  return exporter === 'otlp' || !!env.OTEL_EXPORTER_OTLP_ENDPOINT || !!env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
}

/** The sampler `OTEL_TRACES_SAMPLER` names (the specification's values). */
export function samplerFromEnv(env: NodeJS.ProcessEnv = process.env): Sampler {
  const arg = Number(env.OTEL_TRACES_SAMPLER_ARG);
  const ratio = Number.isFinite(arg) && arg >= 0 && arg <= 1 ? arg : 1;
  switch (env.OTEL_TRACES_SAMPLER?.trim().toLowerCase()) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(ratio);
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio) });
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

export interface Tracing {
  readonly enabled: boolean;
  /** Exports what is buffered and stops; spans started after are dropped. */
  shutdown(): Promise<void>;
}

let started: Tracing | undefined;

/** Starts tracing for this process when the environment asks for it; idempotent. */
export function startTracing(opts: { serviceName?: string; role: string; instanceId: string; env?: NodeJS.ProcessEnv }): Tracing {
  if (started) return started;
  const env = opts.env ?? process.env;
  if (!tracingRequested(env)) return { enabled: false, shutdown: async () => {} };
  const provider = new TracerProvider({
    sampler: samplerFromEnv(env),
    resource: resourceFromAttributes({
      'service.name': env.OTEL_SERVICE_NAME || opts.serviceName || 'jetcron',
      'service.instance.id': opts.instanceId,
      'jetcron.role': opts.role,
    }),
    spanProcessors: [new BatchSpanProcessor({ exporter: new OTLPTraceExporter(), scheduledDelayMillis: 500 })],
  });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);
  started = {
    enabled: true,
    async shutdown() {
      await provider.forceFlush().catch(() => {});
      await provider.shutdown().catch(() => {});
      // Back to the no-op API, so a service started again in this process (tests) can register anew.
      trace.disable();
      context.disable();
      propagation.disable();
      started = undefined;
    },
  };
  return started;
}

const tracer = () => trace.getTracer('jetcron');

/** Whether spans are recorded in this process at all (a cheap guard for instrumentation that builds things). */
export const tracingOn = (): boolean => started?.enabled ?? false;

/**
 * `fn` bound to the context active now, for a callback an event emitter runs later (an
 * `'end'` listener runs in the emitter's context; a promise's reaction keeps its own).
 * Tracing off: `fn` itself.
 */
export function bindActive<F extends (...args: never[]) => unknown>(fn: F): F {
  return started?.enabled ? context.bind(context.active(), fn) : fn;
}

/** Runs `fn` with `traceparent`'s context active, so what it publishes continues that trace. */
export function withTraceparent<T>(traceparent: string | undefined | null, fn: () => T): T {
  return traceparent ? context.with(contextFrom(traceparent), fn) : fn();
}

/** A carrier getter/setter over a plain record (NATS headers are copied into one). */
const recordGetter = {
  get: (carrier: Record<string, string>, key: string) => carrier[key],
  keys: (carrier: Record<string, string>) => Object.keys(carrier),
};

/** The active context as a W3C `traceparent` (undefined when no sampled span is active: tracing off costs this lookup only). */
export function currentTraceparent(ctx?: Context): string | undefined {
  if (!started?.enabled) return undefined;
  const span = trace.getSpan(ctx ?? context.active());
  if (!span || !span.isRecording()) return undefined;
  const carrier: Record<string, string> = {};
  propagation.inject(ctx ?? context.active(), carrier);
  return carrier.traceparent;
}

/** The context a `traceparent` continues (the active one when there is none). */
function contextFrom(traceparent: string | undefined | null): Context {
  if (!traceparent) return context.active();
  return propagation.extract(context.active(), { traceparent }, recordGetter);
}

/** How a span starts: its kind, whose trace it continues, its attributes. */
export interface SpanSpec {
  kind: SpanKind;
  /** The writer's trace to continue (a message header); default: the active context. */
  traceparent?: string | null | undefined;
  /** Only continue a trace: without a `traceparent`, no span (log readers, so untraced writers make no traces). */
  continueOnly?: boolean;
  /** A new trace, linked to `traceparent`'s instead of continuing it (a cron tick). */
  root?: boolean;
  /** Built only when the span records. */
  attributes?: () => Attributes;
}

/** A started span and its context: `run` makes it the active one (what `fn` publishes carries it). */
export interface SpanScope {
  readonly span: Span;
  run<T>(fn: () => T): T;
  end(): void;
}

const NO_SPAN = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);
/** Tracing off, not sampled or nothing to continue: no span, no context switch. */
const NO_SCOPE: SpanScope = { span: NO_SPAN, run: (fn) => fn(), end: () => {} };

/** Starts a span per `spec`; with tracing off this is one check and a shared no-op scope. */
export function openSpan(name: string, spec: SpanSpec): SpanScope {
  if (!started?.enabled || (spec.continueOnly && !spec.traceparent)) return NO_SCOPE;
  const from = contextFrom(spec.traceparent);
  const linked = spec.root && spec.traceparent ? trace.getSpanContext(from) : undefined;
  const span = tracer().startSpan(name, { kind: spec.kind, ...(spec.root ? { root: true } : {}), ...(linked ? { links: [{ context: linked }] } : {}) }, from);
  if (!span.isRecording()) return NO_SCOPE;
  if (spec.attributes) span.setAttributes(spec.attributes());
  const ctx = trace.setSpan(from, span);
  return { span, run: (fn) => context.with(ctx, fn), end: () => span.end() };
}

/**
 * Runs `fn` in a new span (see `openSpan`) and ends it when `fn` settles: an error
 * marks the span failed and passes on.
 */
export function inSpan<T>(name: string, spec: SpanSpec, fn: (span: Span) => Promise<T> | T): Promise<T> {
  const scope = openSpan(name, spec);
  if (scope === NO_SCOPE) {
    try {
      return Promise.resolve(fn(NO_SPAN));
    } catch (err) {
      return Promise.reject(err);
    }
  }
  return scope.run(async () => {
    try {
      return await fn(scope.span);
    } catch (err) {
      scope.span.recordException(err as Error);
      scope.span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error)?.message });
      throw err;
    } finally {
      scope.end();
    }
  });
}

/** The ids users search by, as span attributes (`jetcron.*`). */
export function sourceAttributes(orgId: string, source: { type: string; id: string }, extra: Attributes = {}): Attributes {
  return { 'jetcron.org_id': orgId, [`jetcron.${source.type}_id`]: source.id, ...extra };
}

export { SpanKind, SpanStatusCode };
