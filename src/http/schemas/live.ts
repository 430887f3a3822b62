import type { InboundOutcome } from '../../commands/inbound-event/types.ts';
import type { MonitorStatus } from '../../commands/monitor/types.ts';
import { LIVE_KINDS } from '../../live/messages.ts';
import { EXECUTION_STATUSES } from '../routes/executions.ts';

const MONITOR_STATUSES = ['new', 'up', 'down', 'paused'] as const satisfies readonly MonitorStatus[];
const OUTCOMES = ['forwarding', 'collected', 'filtered', 'rejected', 'debounced'] as const satisfies readonly InboundOutcome[];

const prefixed = (prefix: string) => ({ type: 'string', pattern: `^${prefix}_` }) as const;

/** The `data` of each message of `GET /live` (src/live/messages.ts), for the OpenAPI document and the tests. */
export const liveMessageSchema = {
  type: 'object',
  required: ['type', 'kind', 'id', 'at'],
  additionalProperties: false,
  properties: {
    type: { type: 'string', description: 'The event type: `TaskCreated`, `AttemptFinished`, `MonitorWentDown`, …' },
    kind: { type: 'string', enum: [...LIVE_KINDS], description: 'What changed; also the SSE `event:` name' },
    id: { type: 'string', description: 'The id of the resource of that kind' },
    execution_id: prefixed('exe'),
    task_id: prefixed('tsk'),
    schedule_id: prefixed('sch'),
    endpoint_id: prefixed('ep'),
    monitor_id: prefixed('mon'),
    status: { type: 'string', enum: [...EXECUTION_STATUSES], description: "The execution's status, when the event decides one" },
    monitor_status: { type: 'string', enum: [...MONITOR_STATUSES], description: "A monitor's status after the event" },
    outcome: { type: 'string', enum: [...OUTCOMES], description: 'How an inbound event was routed' },
    at: { type: 'string', format: 'date-time' },
  },
} as const;
