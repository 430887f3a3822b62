import { idempotencyKeyParameter } from './idempotency.ts';
import { errorSchema } from './schemas/common.ts';
import { updateOrganizationSchema } from './schemas/organization.ts';
import { createTaskSchema, triggerTaskSchema, updateTaskSchema } from './schemas/task.ts';

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
      '/organization': { get: op('Get the organization'), put: op('Update notification settings', 'UpdateOrganization') },
      '/organization/webhook-secret/rotate': { post: op('Rotate the webhook secret') },
    },
  };
}
