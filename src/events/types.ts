import type { ApiKeyEvent } from '../commands/api-key/types.ts';
import type { BatchEvent } from '../commands/batch/types.ts';
import type { DebounceEvent } from '../commands/debounce/types.ts';
import type { ScheduleEvent } from '../commands/schedule/types.ts';
import type { MonitorEvent } from '../commands/monitor/types.ts';
import type { ExecutionEvent } from '../commands/execution/types.ts';
import type { NotificationEvent } from '../commands/notification/types.ts';
import type { OrganizationEvent } from '../commands/organization/types.ts';
import type { TaskEvent } from '../commands/task/types.ts';
import type { EndpointEvent } from '../commands/endpoint/types.ts';
import type { QuotaEvent } from '../commands/quota.ts';
import type { PartitionEvent } from '../commands/partition/types.ts';
import type { FlowKeyEvent } from '../commands/flow-control/types.ts';
import type { InboundDebounceEvent, InboundEventEvent } from '../commands/inbound-event/types.ts';

export type JetcronEvent = OrganizationEvent | ApiKeyEvent | TaskEvent | ExecutionEvent | DebounceEvent | BatchEvent | ScheduleEvent | MonitorEvent | NotificationEvent | EndpointEvent | InboundEventEvent | InboundDebounceEvent | QuotaEvent | PartitionEvent | FlowKeyEvent;
export type EventType = JetcronEvent['type'];
