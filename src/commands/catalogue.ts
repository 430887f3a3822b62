import { CHANNEL_EVENT_SCHEMAS } from './channel/schemas.ts';
import { JOB_EVENT_SCHEMAS } from './job/schemas.ts';
import { readFileSync } from 'node:fs';
import type { TSchema } from '@sinclair/typebox';
import { SUBJECTS } from '../../streams/subjects.ts';
import { API_KEY_EVENT_SCHEMAS } from './api-key/schemas.ts';
import { BATCH_EVENT_SCHEMAS } from './batch/schemas.ts';
import { DEBOUNCE_EVENT_SCHEMAS } from './debounce/schemas.ts';
import { ENDPOINT_EVENT_SCHEMAS } from './endpoint/schemas.ts';
import { EXECUTION_EVENT_SCHEMAS } from './execution/schemas.ts';
import { FLOW_KEY_EVENT_SCHEMAS } from './flow-control/schemas.ts';
import { INBOUND_EVENT_SCHEMAS } from './inbound-event/schemas.ts';
import { MONITOR_EVENT_SCHEMAS } from './monitor/schemas.ts';
import { NOTIFICATION_EVENT_SCHEMAS } from './notification/schemas.ts';
import { ORGANIZATION_EVENT_SCHEMAS } from './organization/schemas.ts';
import { PARTITION_EVENT_SCHEMAS } from './partition/schemas.ts';
import { SYSTEM_ORG } from './partition/types.ts';
import { QUOTA_EVENT_SCHEMAS } from './quota-schemas.ts';
import { SCHEDULE_EVENT_SCHEMAS } from './schedule/schemas.ts';
import { TASK_EVENT_SCHEMAS } from './task/schemas.ts';
import type { EventType } from './events.ts';
import { versionOf } from './upcast.ts';

/**
 * The AsyncAPI 3.0 catalogue of the EVENTS stream (`GET /asyncapi.json`, `jetcron events
 * schema`), built from the schemas each aggregate keeps beside its event union
 * (`src/commands/<aggregate>/schemas.ts`, checked against the TypeScript types by the
 * compiler): one message per event type, one channel per subject pattern.
 */

/** The `data` schema of every event type; a type missing here is a compile error. */
export const EVENT_SCHEMAS = {
  ...ORGANIZATION_EVENT_SCHEMAS, ...API_KEY_EVENT_SCHEMAS, ...TASK_EVENT_SCHEMAS, ...BATCH_EVENT_SCHEMAS, ...DEBOUNCE_EVENT_SCHEMAS,
  ...EXECUTION_EVENT_SCHEMAS, ...SCHEDULE_EVENT_SCHEMAS, ...MONITOR_EVENT_SCHEMAS, ...NOTIFICATION_EVENT_SCHEMAS, ...ENDPOINT_EVENT_SCHEMAS,
  ...INBOUND_EVENT_SCHEMAS, ...QUOTA_EVENT_SCHEMAS, ...PARTITION_EVENT_SCHEMAS, ...FLOW_KEY_EVENT_SCHEMAS, ...CHANNEL_EVENT_SCHEMAS, ...JOB_EVENT_SCHEMAS,
} satisfies Record<EventType, TSchema>;

export const EVENT_TYPES = Object.keys(EVENT_SCHEMAS) as EventType[];

export const SCHEMA_FORMAT = 'application/schema+json;version=draft-2020-12';

interface Channel {
  /** The subject with `{parameters}`, made by the code's own subject function where it has one. */
  address: string;
  description: string;
  parameters: Record<string, string>;
  /** The event types stored on it, alone or in commits. */
  events: EventType[];
  /** Its messages are commits (`{type: "Commit", events: […]}`), besides any single events. */
  commits?: boolean;
}

const ORG = '{org_id}';
const orgParam = { org_id: `The organization (\`org_…\`; \`${SYSTEM_ORG}\` for the service's own events)` };
const ofType = <P extends string>(prefix: P) => EVENT_TYPES.filter((t) => t.startsWith(prefix));
/** The last token of a subject made by a function that hashes its argument (shards), as a parameter. */
const lastToken = (subject: string, param: string) => `${subject.slice(0, subject.lastIndexOf('.'))}.{${param}}`;
const EXECUTION_TYPES: EventType[] = ['AttemptStarted', 'AttemptFinished', 'AttemptDeferred', 'ExecutionCancelled', 'CallbackAttempted'];

const CHANNELS: Record<string, Channel> = {
  organization: { address: SUBJECTS.org(ORG), description: 'An organization\'s own events', parameters: orgParam, events: ofType('Organization').concat('WebhookSecretRotated') },
  apiKey: {
    address: SUBJECTS.apiKey('{public_id}'), description: 'An API key (its events name their organization in `org_id`)',
    parameters: { public_id: 'The key\'s public part (`pk_…`)' }, events: ofType('ApiKey'),
  },
  task: {
    address: SUBJECTS.task(ORG, '{task_id}'), description: 'A task\'s changes after its create (and its create, for a task created under an Idempotency-Key)',
    parameters: { ...orgParam, task_id: '`tsk_…`' }, events: ofType('Task'),
  },
  creates: {
    address: lastToken(SUBJECTS.creates(ORG, 'x'), 'shard'), commits: true,
    description: 'Single task creates (one commit per organization and turn of an API process), and batches without an Idempotency-Key (their `TaskCreated`, then `BatchAccepted`), on one of a few shard subjects per organization',
    parameters: { ...orgParam, shard: 'A shard number, from the commit id' }, events: ['TaskCreated', 'BatchAccepted'],
  },
  batch: {
    address: SUBJECTS.batch(ORG, '{batch_id}'), commits: true, description: 'A batch: one commit of its tasks\' `TaskCreated`, then its `BatchAccepted`',
    parameters: { ...orgParam, batch_id: 'The batch id' }, events: ['TaskCreated', 'BatchAccepted'],
  },
  execution: {
    address: SUBJECTS.execution(ORG, '{execution_id}'),
    description: 'An execution\'s own subject: results a fenced partition owner got after its fence (`late: true`: the owner holding the execution may adopt one), a batch lane head handed to its flow-control key\'s owner and that owner\'s results of it, and (in older logs) every result of an execution',
    parameters: { ...orgParam, execution_id: '`exe_…`' }, events: [...EXECUTION_TYPES, 'ExecutionHandedToKey'],
  },
  partition: {
    address: SUBJECTS.partition('{partition}' as unknown as number), commits: true,
    description: `A partition owner's log: its claims (organization \`${SYSTEM_ORG}\`) and commits of the results of the executions it runs, of many organizations`,
    parameters: { partition: 'The partition number' }, events: ['PartitionClaimed', ...EXECUTION_TYPES],
  },
  schedule: { address: `evt.${ORG}.schedule.{schedule_id}`, description: 'A schedule, its ticks and triggers', parameters: { ...orgParam, schedule_id: '`sch_…`' }, events: ofType('Schedule') },
  monitor: {
    address: `evt.${ORG}.monitor.{monitor_id}`, description: 'A monitor\'s definition and state (pings and goings down of older versions too)',
    parameters: { ...orgParam, monitor_id: '`mon_…`' }, events: ofType('Monitor').filter((t) => t !== 'MonitorRestated'),
  },
  monitorPartition: {
    address: SUBJECTS.monitorPartition('{partition}' as unknown as number), commits: true,
    description: `A monitor partition owner's log: its claims (organization \`${SYSTEM_ORG}\`) and commits of pings, goings down and restatements`,
    parameters: { partition: 'The partition number' }, events: ['PartitionClaimed', 'MonitorPinged', 'MonitorWentDown', 'MonitorRestated'],
  },
  endpoint: { address: SUBJECTS.endpoint(ORG, '{endpoint_id}'), description: 'An inbound endpoint', parameters: { ...orgParam, endpoint_id: '`ep_…`' }, events: ofType('Endpoint') },
  inboundEvent: {
    address: SUBJECTS.inboundEvent(ORG, '{event_id}'), commits: true,
    description: 'An inbound event routed by the router (a group of requests: one commit on its first request\'s subject), then its replays',
    parameters: { ...orgParam, event_id: '`evt_…`' }, events: ['InboundEventReceived', 'InboundEventReplayed'],
  },
  inboundReceived: {
    address: lastToken(SUBJECTS.inboundReceived(ORG, 'x'), 'shard'), commits: true, description: 'Inbound events the receiver recorded itself, one commit per group of requests',
    parameters: { ...orgParam, shard: 'A shard number, from the commit id' }, events: ['InboundEventReceived'],
  },
  inboundDebounce: {
    address: SUBJECTS.inboundDebounce(ORG, '{endpoint_id}', '{key_hash}'), description: 'An endpoint\'s debounce window for one key',
    parameters: { ...orgParam, endpoint_id: '`ep_…`', key_hash: 'SHA-256 of the debounce key' }, events: ['InboundDebounceOpened'],
  },
  debounce: {
    address: `evt.${ORG}.debounce.{key_hash}`, description: 'A task debounce window (lane and debounce_key)',
    parameters: { ...orgParam, key_hash: 'A digest of the lane and key' }, events: ['DebounceWindowOpened'],
  },
  flowKey: {
    address: SUBJECTS.flowKey(ORG, '{key_hash}'), description: 'A flow-control key\'s pause and resume',
    parameters: { ...orgParam, key_hash: 'SHA-256 of the key' }, events: ofType('FlowControl'),
  },
  notification: {
    address: SUBJECTS.notification(ORG, '{notification_id}'), description: 'One notification\'s deliveries, one event per channel; a channel\'s test message',
    parameters: { ...orgParam, notification_id: 'The notification id' }, events: [...ofType('Notification'), 'ChannelTested'],
  },
  channels: {
    address: SUBJECTS.channels(ORG), description: 'The organization\'s notification channels: one aggregate, each event carrying the whole set',
    parameters: orgParam, events: ['ChannelCreated', 'ChannelUpdated', 'ChannelDeleted'],
  },
  jobs: {
    address: SUBJECTS.jobs(ORG), commits: true,
    description: 'The organization\'s bulk retry and replay jobs, one aggregate whose state is its latest job: acceptance with the fixed set, a cancel, and each group of steps as one commit of the group\'s retries (`TaskTriggered`, `ScheduleTriggered` with `source_seq`, `InboundEventReplayed`) followed by its `RetryJobStepped`',
    parameters: orgParam, events: ['RetryJobAccepted', 'RetryJobStepped', 'RetryJobCancelled', 'TaskTriggered', 'ScheduleTriggered', 'InboundEventReplayed'],
  },
  quota: {
    address: `evt.${ORG}.quota.{kind}`, description: 'The places of a plan limit taken (endpoints, schedules, monitors)',
    parameters: { ...orgParam, kind: '`endpoint`, `schedule` or `monitor`' }, events: ['QuotaReserved'],
  },
};

/** Channel name → its address as a pattern of subject tokens (`*` for a parameter), for the suite and the docs. */
export function channelPatterns(): Array<{ name: string; pattern: RegExp; events: readonly string[] }> {
  return Object.entries(CHANNELS).map(([name, c]) => ({
    name,
    pattern: new RegExp(`^${c.address.split('.').map((t) => (t.startsWith('{') ? '[^.]+' : t.replace(/[-]/g, '\\-'))).join('\\.')}$`),
    events: c.events,
  }));
}

/**
 * One subject filter that holds every stored event of `types` (of organization `org`,
 * when given): the channel they all live on, its parameters as wildcards. Undefined
 * when they live on several channels (nats-server 2.9 takes one filter a consumer).
 */
export function subjectFilterOf(types: readonly EventType[], org?: string): string | undefined {
  const on = Object.values(CHANNELS).filter((c) => types.some((t) => c.events.includes(t)));
  if (on.length !== 1) return undefined;
  return on[0]!.address.split('.').map((t) => (t === ORG && org ? org : t.startsWith('{') ? '*' : t)).join('.');
}

const ENVELOPE = {
  type: 'object',
  description: 'What every stored event looks like; `data` is the event\'s own body (its message\'s schema). Readers ignore fields they do not know.',
  required: ['type', 'v', 'id', 'at', 'org_id', 'data'],
  properties: {
    type: { type: 'string', description: 'The event type: past tense, one per message of this document' },
    v: { type: 'integer', minimum: 1, description: 'The type\'s schema version. Events stored before 2026-12-06 carry none and read as version 1; `jetcron replay` and every reader get them upcast to the version here' },
    id: { type: 'string', description: 'Deterministic per event: the same decision retried is the same id' },
    at: { type: 'string', format: 'date-time', description: 'When it was decided (never later than when it was stored)' },
    org_id: { type: 'string', description: `The organization; \`${SYSTEM_ORG}\` for the service's own (partition claims)` },
    data: { type: 'object' },
    traceparent: { type: 'string', description: 'Inside a commit: the W3C trace context of the one who decided it, when tracing was on' },
  },
};

const COMMIT = {
  type: 'object',
  description: 'One stored message holding an ordered list of events, written, read and deduplicated together; all share the message\'s stream sequence',
  required: ['type', 'id', 'at', 'events'],
  properties: {
    type: { const: 'Commit' },
    id: { type: 'string', description: 'Deterministic: the message\'s `Nats-Msg-Id`' },
    at: { type: 'string', format: 'date-time' },
    from: { type: 'integer', description: 'A partition owner\'s commit: the lowest EVENTS position a takeover must read from' },
    events: { type: 'array', minItems: 1, items: { $ref: '#/components/schemas/Event' } },
  },
};

const eventRef = (type: string) => ({ $ref: `#/components/messages/${type}` });
const payloadOf = (type: EventType) => ({
  allOf: [
    { $ref: '#/components/schemas/Envelope' },
    { type: 'object', properties: { type: { const: type }, v: { const: versionOf(type) }, data: { $ref: `#/components/schemas/${type}` } } },
  ],
});

/** The schema objects without TypeBox's symbols (JSON.stringify drops them; so does this). */
const plain = (schema: TSchema): Record<string, unknown> => JSON.parse(JSON.stringify(schema)) as Record<string, unknown>;

/** The package's version, the document's `info.version`. */
export const PACKAGE_VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

export function asyncApiDocument(opts: { version?: string; natsUrl?: string } = {}): Record<string, unknown> {
  const channels: Record<string, unknown> = {};
  const operations: Record<string, unknown> = {};
  for (const [name, c] of Object.entries(CHANNELS)) {
    const messages: Record<string, unknown> = Object.fromEntries(c.events.map((t) => [t, eventRef(t)]));
    if (c.commits) messages.Commit = { $ref: '#/components/messages/Commit' };
    channels[name] = {
      address: c.address,
      description: c.description,
      parameters: Object.fromEntries(Object.entries(c.parameters).map(([p, description]) => [p, { description }])),
      messages,
    };
    operations[`read_${name}`] = {
      action: 'receive',
      channel: { $ref: `#/channels/${name}` },
      summary: `Read ${c.address} (stream EVENTS)`,
      messages: Object.keys(messages).map((m) => ({ $ref: `#/channels/${name}/messages/${m}` })),
    };
  }
  const schemas: Record<string, unknown> = { Envelope: ENVELOPE, Event: { oneOf: EVENT_TYPES.map((t) => ({ $ref: `#/components/schemas/${t}Event` })) } };
  const messages: Record<string, unknown> = {
    Commit: { name: 'Commit', title: 'A commit of events', contentType: 'application/json', payload: { schemaFormat: SCHEMA_FORMAT, schema: COMMIT } },
  };
  for (const type of EVENT_TYPES) {
    const data = plain(EVENT_SCHEMAS[type]);
    schemas[type] = data;
    schemas[`${type}Event`] = payloadOf(type);
    messages[type] = {
      name: type,
      title: type,
      ...(typeof data.description === 'string' ? { summary: data.description } : {}),
      contentType: 'application/json',
      payload: { schemaFormat: SCHEMA_FORMAT, schema: { $ref: `#/components/schemas/${type}Event` } },
    };
  }
  return {
    asyncapi: '3.0.0',
    info: {
      title: 'jetcron events',
      version: opts.version ?? PACKAGE_VERSION,
      description: 'The EVENTS stream of jetcron: every subject pattern a channel, every event type a message. '
        + 'A message is one event or a commit of several (`Commit`). Replay them into projections of your own with `jetcron replay` (docs/analysts.md).',
    },
    servers: { nats: { host: (opts.natsUrl ?? 'nats://127.0.0.1:4222').replace(/^nats:\/\//, ''), protocol: 'nats', description: 'JetStream stream EVENTS (subjects `evt.>`)' } },
    defaultContentType: 'application/json',
    channels,
    operations,
    components: { schemas, messages },
  };
}
