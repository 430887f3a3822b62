import { Kvm } from '@nats-io/kv';
import { KV_BUCKETS, KV_CHECKPOINT_READERS, STREAMS } from '../../streams/definitions.ts';
import { SUBJECTS } from '../../streams/subjects.ts';
import type { Endpoint } from '../commands/endpoint/types.ts';
import type { ForwardPlan, InboundDebounceWindow, InboundEventEvent } from '../commands/inbound-event/types.ts';
import { ConcurrencyError, type EventStore } from '../commands/store.ts';
import type { Clock } from '../lib/clock.ts';
import { isoTime } from '../lib/iso-time.ts';
import type { Nats } from '../nats/connection.ts';
import { readStream, type MessageHeaders, type StreamItem } from '../nats/event-reader.ts';
import type { FailedEvent, Supervisor } from '../nats/supervisor.ts';
import { isTransient } from '../lib/transient.ts';
import { openCheckpoint } from '../nats/throttled-checkpoint.ts';
import { startConsumers } from '../nats/consumer-kit.ts';
import type { EndpointDirectory } from './endpoint-directory.ts';
import { createDebounceWindows } from './debounce-windows.ts';
import { planDelivery, plannedExecutionId, plannedWithoutHooks, receivedEvent, type HooksFor, type RoutedDelivery } from './pipeline.ts';
import { loadStoredMessage, ROUTED_HEADER, routesOf, type RequestRoute, type StoredRequest } from './stored-request.ts';
import { openSpan, SpanKind } from '../telemetry/tracing.ts';
import type { Log } from '../lib/logger.ts';
import { positionText } from '../nats/written-positions.ts';

/**
 * One stored request as the router takes it: its route, its message's sequence and its
 * place in that message; `request` reads the whole request (headers, body) from
 * INBOUND, once per message, for the hooks that need it.
 */
interface RequestItem {
  route: RequestRoute;
  seq: number;
  subject: string;
  index: number;
  traceparent: string | undefined;
  request: () => Promise<StoredRequest>;
}

/**
 * Each request of each INBOUND message, in order (a group's requests share its
 * sequence). The router reads headers only: a message without routes in its header
 * (written before them, or with routes too long for one) is read whole first.
 */
async function requestsOf(nats: Nats, batch: StreamItem<RequestRoute[] | null>[]): Promise<RequestItem[]> {
  const messages = await Promise.all(batch.map(async (item) => {
    let whole: Promise<StoredRequest[] | null> | undefined;
    const load = () => (whole ??= loadStoredMessage(nats, item.seq));
    // Gone since it was delivered: purged with its endpoint, whose events went with it.
    const routes = item.event ?? (await load())?.map((r) => r.meta) ?? [];
    return routes.map((route, index): RequestItem => ({
      route, seq: item.seq, subject: item.subject, index, traceparent: route.traceparent ?? item.traceparent,
      request: async () => {
        const request = (await load())?.[index];
        if (!request) throw new Error(`INBOUND seq ${item.seq} no longer holds request ${route.id}`);
        return request;
      },
    }));
  }));
  return messages.flat();
}

/** The highest EVENTS sequence a batch appended, per organization. */
function createWrittenPositions() {
  const positions = new Map<string, number>();
  return {
    positions,
    raise(orgId: string, seq: number): void {
      if (seq > (positions.get(orgId) ?? 0)) positions.set(orgId, seq);
    },
  };
}
type WrittenPositions = ReturnType<typeof createWrittenPositions>;

export const CHECKPOINT_KEY: keyof typeof KV_CHECKPOINT_READERS = 'inbound-router';
const CHECKPOINT_EVERY_MS = 250;
/** A debounce window this close to its end (or a quarter of it, if less) takes no more events. */
const MERGE_MARGIN_MS = 250;
/** That margin for a window of `windowMs` real milliseconds (already scaled). */
export const mergeMarginMs = (windowMs: number): number => Math.min(MERGE_MARGIN_MS, windowMs / 4);

export interface RouterDeps {
  nats: Nats;
  store: EventStore;
  endpoints: EndpointDirectory;
  hooks: HooksFor;
  clock: Clock;
  owner: string;
  log: Log;
  supervisor: Supervisor;
}

/**
 * The router: the filter, custom forwarding, transform and route stages. It reads
 * INBOUND in order (one endpoint's requests in arrival order, different endpoints
 * concurrently) and records each request's deliveries as `InboundEventReceived` in
 * EVENTS, where the projector lists it and the endpoint's task partition owner
 * delivers its executions. A request whose event is already recorded (a replay after a crash) is
 * skipped: the append expects an empty subject.
 */
export function startInboundRouter(deps: RouterDeps) {
  const windows = createDebounceWindows(deps.store);

  /**
   * The event recording one request's deliveries, or null when its endpoint is gone.
   * Decided at once, without a promise, when the endpoint is known here and no hook
   * runs (most requests); else once the endpoint is read and the hooks have run.
   */
  function decide(item: RequestItem): InboundEventEvent | null | Promise<InboundEventEvent | null> {
    const meta = item.route;
    const known = deps.endpoints.cached(meta.org_id, meta.endpoint_id);
    if (known === undefined) return deps.endpoints.get(meta.org_id, meta.endpoint_id).then((endpoint) => decideFor(item, endpoint));
    return decideFor(item, known);
  }

  function decideFor(item: RequestItem, endpoint: Endpoint | null): InboundEventEvent | null | Promise<InboundEventEvent | null> {
    if (!endpoint) return null; // deleted since: its events went with it
    const meta = item.route;
    let receivedMs: number | undefined;
    const plan = {
      endpoint,
      route: meta,
      hooks: deps.hooks(endpoint),
      now: meta.received_at,
      executionId: (i: number) => plannedExecutionId(meta.id, (receivedMs ??= Date.parse(meta.received_at)), i),
    };
    const planned = plannedWithoutHooks(plan);
    if (planned) return receivedEvent(item.route, item.seq, endpoint, planned, planned, isoTime(deps.clock.now()));
    return planDelivery({ ...plan, request: item.request }).then(async (delivery) => {
      const at = isoTime(deps.clock.now());
      return receivedEvent(item.route, item.seq, endpoint, delivery, delivery.debounce && delivery.executions.length ? await debounced(meta, delivery, at) : delivery, at);
    });
  }


  /**
   * The spec's deduplication: the first event of a key opens a window and schedules
   * its deliveries at its end; a later one inside the window takes over those
   * executions (its payload replaces theirs, their time stays). A window about to end
   * takes no more events: its executions may be running already, so a new one opens.
   */
  async function debounced(meta: RequestRoute, delivery: RoutedDelivery, at: string): Promise<Pick<RoutedDelivery, 'outcome' | 'executions'>> {
    const { key, window_ms: windowMs } = delivery.debounce!;
    const receivedMs = Date.parse(meta.received_at);
    const latest = await windows.latest(meta.org_id, meta.endpoint_id, key);
    const plansAt = (w: InboundDebounceWindow, replacing: boolean) => delivery.executions.map((p): ForwardPlan => {
      const id = w.executions[p.url];
      return id ? { ...p, execution_id: id, scheduled_for: w.run_at, ...(replacing ? { replaces: true as const } : {}) } : { ...p, scheduled_for: w.run_at };
    });
    // Its own window: this event was routed before, and the router stopped before recording it.
    if (latest?.event_id === meta.id) return { outcome: 'forwarding', executions: plansAt(latest, false) };
    const endMs = latest ? Date.parse(latest.run_at) : 0;
    const margin = mergeMarginMs(deps.clock.wait(windowMs));
    if (latest && receivedMs < endMs && endMs - deps.clock.now() > margin) return { outcome: 'debounced', executions: plansAt(latest, true) };
    const window: InboundDebounceWindow = {
      endpoint_id: meta.endpoint_id,
      debounce_key: key,
      event_id: meta.id,
      opened_at: meta.received_at,
      run_at: new Date(receivedMs + deps.clock.wait(windowMs)).toISOString(),
      executions: Object.fromEntries(delivery.executions.map((p) => [p.url, p.execution_id])),
    };
    await windows.open(meta.org_id, window, at);
    return { outcome: 'forwarding', executions: plansAt(window, false) };
  }

  /** The subject a stored message's routed events go to: its first request's, guarded to be empty. */
  const recordSubject = (first: RequestRoute) => SUBJECTS.inboundEvent(first.org_id, first.id);

  /**
   * One endpoint's requests of a batch, in arrival order: decided one by one, then
   * appended without waiting for each ack, one append per INBOUND message: a
   * message of one request as its event alone, a group's events as one commit on its
   * first request's subject. The appends leave on one connection in call order, so
   * EVENTS keeps the arrival order, and a batch costs one round trip instead of one
   * per request. Each append expects an empty subject: a message routed before
   * (after a crash, or a failed append) is recorded once.
   */
  async function routeInOrder(items: RequestItem[], wrote: WrittenPositions): Promise<void> {
    const appends: Array<() => Promise<unknown>> = [];
    for (let i = 0; i < items.length;) {
      let end = i + 1;
      while (end < items.length && items[end]!.seq === items[i]!.seq) end++;
      const message = items.slice(i, end);
      i = end;
      const decided = await decideEach(message);
      if (!decided.length) continue;
      const subject = recordSubject(message[0]!.route);
      const events = decided.map((d) => d.event);
      const scopes = decided.map((d) => d.scope);
      const append = message.length === 1
        ? () => scopes[0]!.run(() => deps.store.append(subject, events[0]!, 0))
        : () => deps.store.appendCommit(subject, events, 0);
      const orgId = message[0]!.route.org_id;
      appends.push(() => append().then((seq) => wrote.raise(orgId, seq), (err) => {
        // Recorded already (a batch routed again after a crash or a failed append).
        if (!(err instanceof ConcurrencyError)) throw err;
      }).finally(() => scopes.forEach((s) => s.end())));
    }
    await Promise.all(appends.map((a) => a()));
  }

  /**
   * A message's requests decided in order, each in a span continuing the receiver's
   * trace, which its event carries on (a group's commit is appended outside the spans).
   */
  async function decideEach(message: RequestItem[]) {
    const decided = [];
    for (const item of message) {
      const meta = item.route;
      const scope = openSpan('route inbound', {
        kind: SpanKind.CONSUMER, traceparent: item.traceparent,
        attributes: () => ({ 'jetcron.org_id': meta.org_id, 'jetcron.endpoint_id': meta.endpoint_id, 'jetcron.inbound_event_id': meta.id }),
      });
      try {
        const decision = scope.run(() => decide(item));
        const e = decision instanceof Promise ? await decision : decision;
        const traceparent = e ? scope.run(() => deps.store.traceparent?.()) : undefined;
        const event = e && traceparent ? { ...e, traceparent } : e;
        deps.log.debug?.('inbound event routed', () => ({
          org_id: meta.org_id, endpoint_id: meta.endpoint_id, inbound_event_id: meta.id,
          outcome: event?.data.event.outcome ?? 'endpoint deleted', executions: event?.data.executions.map((x) => x.execution_id) ?? [],
        }));
        if (event) decided.push({ event, scope });
        else scope.end();
      } catch (err) {
        scope.end();
        throw err;
      }
    }
    return decided;
  }

  async function routeBatch(items: RequestItem[], wrote: WrittenPositions = createWrittenPositions()): Promise<void> {
    const bySubject = new Map<string, RequestItem[]>();
    for (const item of items) {
      const list = bySubject.get(item.subject);
      if (list) list.push(item);
      else bySubject.set(item.subject, [item]);
    }
    await Promise.all([...bySubject.values()].map((list) => routeInOrder(list, wrote)));
  }

  /**
   * Read-your-writes for requests the router records: an API process that answered one
   * makes its organization's reads wait until the router passed its INBOUND sequence
   * (`src/http/read-your-writes.ts`). The EVENTS positions go first, on the one
   * connection, so a reader knows them once it hears how far the router got.
   */
  function announce(wrote: WrittenPositions, through: number): void {
    for (const [orgId, seq] of wrote.positions) deps.nats.nc.publish(SUBJECTS.written, positionText({ kind: 'events', orgId, seq }));
    deps.nats.nc.publish(SUBJECTS.written, positionText({ kind: 'routed', seq: through }));
  }

  return startConsumers(deps, [{
    lease: CHECKPOINT_KEY,
    open: () => new Kvm(deps.nats.nc).open(KV_BUCKETS.checkpoints.name),
    term: async (signal, kv) => {
      windows.clear();
      const checkpoint = await openCheckpoint(kv, CHECKPOINT_KEY, CHECKPOINT_EVERY_MS);
      try {
        const read = {
          stream: STREAMS.inbound.name, startSeq: checkpoint.position + 1, maxBatch: 500, signal, log: deps.log,
          // The routes alone (a header): the bodies stay in nats-server unless a hook reads them.
          // A group the receiver recorded itself (no hook touches it) has nothing left to route.
          headersOnly: true, decode: (_data: Uint8Array, headers: MessageHeaders | undefined) => (headers?.get(ROUTED_HEADER) ? [] : routesOf(headers)),
          name: CHECKPOINT_KEY, supervisor: deps.supervisor,
          onSkip: ({ seq }: { seq: number }) => checkpoint.advance(seq),
          reapply: async (item: StreamItem<RequestRoute[] | null>, index: number | undefined) =>
            routeBatch((await requestsOf(deps.nats, [item])).filter((r) => index === undefined || r.index === index)),
          // A group with a request that cannot be routed: the others are, in order, and only that one is skipped.
          applyApart: async (item: StreamItem<RequestRoute[] | null>, skip: (event: FailedEvent, err: unknown) => Promise<void>) => {
            const requests = await requestsOf(deps.nats, [item]);
            if (requests.length < 2) return false;
            // Its commit is stored (what fails now is later): every request of it is recorded.
            if (await deps.store.lastMessage(recordSubject(requests[0]!.route))) return true;
            for (const r of requests) {
              try {
                await routeBatch([r]);
              } catch (err) {
                if (isTransient(err)) throw err;
                await skip({ index: r.index, id: r.route.id, type: 'inbound request' }, err);
              }
            }
            return true;
          },
        };
        await readStream<RequestRoute[] | null>(deps.nats, read, async (batch) => {
          const wrote = createWrittenPositions();
          await routeBatch(await requestsOf(deps.nats, batch), wrote);
          announce(wrote, batch[batch.length - 1]!.seq);
          await checkpoint.advance(batch[batch.length - 1]!.seq);
        });
      } finally {
        await checkpoint.close().catch(() => {});
      }
    },
  }]);
}
