import type { ApiKeyEvent } from './api-key/types.ts';
import type { BatchEvent } from './batch/types.ts';
import type { DebounceEvent } from './debounce/types.ts';
import type { ScheduleEvent } from './schedule/types.ts';
import type { MonitorEvent } from './monitor/types.ts';
import type { ExecutionEvent } from './execution/types.ts';
import type { NotificationEvent } from './notification/types.ts';
import type { OrganizationEvent } from './organization/types.ts';
import type { TaskEvent } from './task/types.ts';
import type { EndpointEvent } from './endpoint/types.ts';
import type { QuotaEvent } from './quota.ts';
import type { HandoffEvent, PartitionEvent } from './partition/types.ts';
import type { FlowKeyEvent } from './flow-control/types.ts';
import type { ChannelEvent, ChannelTestEvent } from './channel/types.ts';
import type { InboundDebounceEvent, InboundEventEvent } from './inbound-event/types.ts';
import type { JobEvent } from './job/types.ts';

export type JetcronEvent = OrganizationEvent | ApiKeyEvent | TaskEvent | ExecutionEvent | DebounceEvent | BatchEvent | ScheduleEvent | MonitorEvent | NotificationEvent | EndpointEvent | InboundEventEvent | InboundDebounceEvent | QuotaEvent | PartitionEvent | HandoffEvent | FlowKeyEvent | ChannelEvent | ChannelTestEvent | JobEvent;
export type EventType = JetcronEvent['type'];

/** The event of one type. */
export type EventOf<T extends EventType> = Extract<JetcronEvent, { type: T }>;

/**
 * One handler per event type, as a map: a reader declares what it does with each
 * type, and leaving a type out is a compile error (what an exhaustive switch gave).
 */
export type EventHandlers<R, A extends unknown[] = []> = { [T in EventType]: (event: EventOf<T>, ...args: A) => R };

/** The handler of `event`'s type. */
export function handle<R, A extends unknown[]>(handlers: EventHandlers<R, A>, event: JetcronEvent, ...args: A): R {
  const handler = handlers[event.type] as ((event: JetcronEvent, ...args: A) => R) | undefined;
  // A type this build does not know (a newer writer's): a failure of this event, recorded as any other.
  if (!handler) throw new Error(`unhandled case: ${String((event as { type?: unknown }).type)}`);
  return handler(event, ...args);
}

/**
 * One handler for several types, spread into a map (`...forTypes(['A', 'B'], h)`); the
 * map still names every type, and `h` must take each type it is given for.
 */
export function forTypes<K extends EventType, H>(types: readonly K[], handler: H): Record<K, H> {
  return Object.fromEntries(types.map((t) => [t, handler])) as Record<K, H>;
}
