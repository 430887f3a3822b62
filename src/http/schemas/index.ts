import { createBatchSchema } from './batch.ts';
import { createChannelSchema, testChannelSchema, updateChannelSchema } from './channel.ts';
import { createEndpointSchema, updateEndpointSchema } from './endpoint.ts';
import { createMonitorSchema, updateMonitorSchema } from './monitor.ts';
import { updateOrganizationSchema } from './organization.ts';
import { createScheduleSchema, updateScheduleSchema } from './schedule.ts';
import { scriptTestSchema } from './script.ts';
import { syncSchema } from './sync.ts';
import { createTaskSchema, triggerTaskSchema, updateTaskSchema } from './task.ts';
import { bulkReplaySchema, bulkRetrySchema, enableForwardSchema } from './job.ts';

/**
 * Every JSON Schema a request body is validated with, by its name in the OpenAPI
 * document (its `$id`). The document's components come from here, and so does the
 * suite's walk of every field with its empty value (test/empty-values.e2e.test.ts):
 * a schema added here is documented and checked without another list to keep.
 */
export const REQUEST_SCHEMAS = {
  CreateTask: createTaskSchema,
  UpdateTask: updateTaskSchema,
  TriggerTask: triggerTaskSchema,
  CreateBatch: createBatchSchema,
  CreateSchedule: createScheduleSchema,
  UpdateSchedule: updateScheduleSchema,
  CreateMonitor: createMonitorSchema,
  UpdateMonitor: updateMonitorSchema,
  Sync: syncSchema,
  ScriptTest: scriptTestSchema,
  CreateEndpoint: createEndpointSchema,
  UpdateEndpoint: updateEndpointSchema,
  UpdateOrganization: updateOrganizationSchema,
  CreateChannel: createChannelSchema,
  UpdateChannel: updateChannelSchema,
  TestChannel: testChannelSchema,
  BulkRetry: bulkRetrySchema,
  BulkReplay: bulkReplaySchema,
  EnableForward: enableForwardSchema,
} as const satisfies Record<string, { $id: string }>;

export type RequestSchemaName = keyof typeof REQUEST_SCHEMAS;
