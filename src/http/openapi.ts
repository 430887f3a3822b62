import { idempotencyKeyParameter } from './idempotency.ts';
import { errorSchema } from './schemas/common.ts';
import { updateOrganizationSchema } from './schemas/organization.ts';
import { createTaskSchema, triggerTaskSchema, updateTaskSchema } from './schemas/task.ts';
import { createEndpointSchema, updateEndpointSchema } from './schemas/endpoint.ts';
import { createBatchSchema } from './schemas/batch.ts';
import { createMonitorSchema, updateMonitorSchema } from './schemas/monitor.ts';
import { createScheduleSchema, updateScheduleSchema } from './schemas/schedule.ts';
import { syncSchema } from './schemas/sync.ts';
import { scriptTestSchema } from './schemas/script.ts';

// Built from the very schema objects that validate requests, so the document cannot drift.
function strip(schema: object): object {
  const { $id: _id, ...rest } = schema as Record<string, unknown>;
  return rest;
}

const json = (ref: string) => ({ content: { 'application/json': { schema: { $ref: `#/components/schemas/${ref}` } } } });
const errors = { default: { description: 'Error', ...json('Error') } };

export function openApiDocument(serverUrl: string) {
  const op = (summary: string, body?: string, ok = '200') => ({
    summary,
    security: [{ bearer: [] }],
    ...(body ? { requestBody: { required: true, ...json(body) } } : {}),
    responses: { [ok]: { description: 'OK' }, ...errors },
  });
  return {
    openapi: '3.1.0',
    info: { title: 'jetcron API', version: '1' },
    servers: [{ url: serverUrl }],
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'pk_….sk_… API key' } },
      schemas: {
        CreateTask: strip(createTaskSchema),
        UpdateTask: strip(updateTaskSchema),
        TriggerTask: strip(triggerTaskSchema),
        UpdateOrganization: strip(updateOrganizationSchema),
        CreateBatch: strip(createBatchSchema),
        CreateSchedule: strip(createScheduleSchema),
        UpdateSchedule: strip(updateScheduleSchema),
        CreateMonitor: strip(createMonitorSchema),
        UpdateMonitor: strip(updateMonitorSchema),
        Sync: strip(syncSchema),
        ScriptTest: strip(scriptTestSchema),
        CreateEndpoint: strip(createEndpointSchema),
        UpdateEndpoint: strip(updateEndpointSchema),
        Error: errorSchema,
      },
    },
    paths: {
      '/tasks': { get: op('List tasks'), post: { ...op('Create a task', 'CreateTask', '201'), parameters: [idempotencyKeyParameter] } },
      '/tasks/{id}': { get: op('Get a task'), put: op('Update a task', 'UpdateTask'), delete: op('Delete a task and its history', undefined, '204') },
      '/tasks/{id}/trigger': { post: op('Run a task now', 'TriggerTask', '202') },
      '/tasks/{id}/executions': { get: op('Task execution history') },
      '/executions': { get: op('List executions') },
      '/executions/{id}': { get: op('Get an execution with its attempts') },
      '/tasks/batch': { post: { ...op('Create up to 1,000 tasks of one lane, all or nothing', 'CreateBatch', '201'), parameters: [idempotencyKeyParameter] } },
      '/schedules': { get: op('List schedules'), post: op('Create a cron schedule', 'CreateSchedule', '201') },
      '/schedules/{id}': { get: op('Get a schedule'), put: op('Update a schedule', 'UpdateSchedule'), delete: op('Delete a schedule and its history', undefined, '204') },
      '/schedules/{id}/trigger': { post: op('Run a schedule now', 'TriggerTask', '202') },
      '/schedules/{id}/executions': { get: op('Schedule execution history') },
      '/monitors': { get: op('List heartbeat monitors'), post: op('Create a heartbeat monitor', 'CreateMonitor', '201') },
      '/monitors/{id}': { get: op('Get a monitor with its ping_url'), put: op('Update a monitor', 'UpdateMonitor'), delete: op('Delete a monitor and its pings', undefined, '204') },
      '/monitors/{id}/pause': { post: op('Pause a monitor (pings answer 410)') },
      '/monitors/{id}/resume': { post: op('Resume a monitor') },
      '/monitors/{id}/pings': { get: op('Ping history') },
      '/sync': { put: op('Declare schedules and monitors by key', 'Sync') },
      '/scripts/test': { post: op('Run one Lua hook as the service would, storing nothing (Pro): answers {result, logs, duration_ms, error}', 'ScriptTest') },
      '/endpoints': { get: op('List endpoints'), post: { ...op('Create an endpoint', 'CreateEndpoint', '201'), parameters: [idempotencyKeyParameter] } },
      '/endpoints/{id}': { get: op('Get an endpoint with its inbound_url'), put: op('Update an endpoint', 'UpdateEndpoint'), delete: op('Delete an endpoint and its inbound events', undefined, '204') },
      '/endpoints/{id}/pause': { post: op('Pause delivery (events are stored and held)') },
      '/endpoints/{id}/resume': { post: op('Resume delivery (held events go out in order)') },
      '/endpoints/{id}/events': { get: op('Inbound events of the last 30 days, newest first') },
      '/endpoints/{id}/events/{event_id}': { get: op('One inbound event with its stored request') },
      '/endpoints/{id}/events/{event_id}/replay': { post: op('Forward the stored request again', undefined, '202') },
      '/organization': { get: op('Get the organization'), put: op('Update notification settings', 'UpdateOrganization') },
      '/organization/webhook-secret/rotate': { post: op('Rotate the webhook secret') },
    },
  };
}
