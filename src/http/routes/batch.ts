import { Router } from 'express';
import { createBatch, type BatchInput } from '../../commands/batch/handlers.ts';
import { jsonObject } from '../body.ts';
import { flowControlServed } from './tasks.ts';
import { handler, type ApiDeps } from '../context.ts';
import { idempotent, onceId } from '../idempotency.ts';
import { orgPlan } from '../plan-limits.ts';
import { jsonBody } from '../request-body.ts';
import { createBatchSchema } from '../schemas/batch.ts';
import { validate } from '../validate.ts';

/** Room for a full batch (8 MiB); each task body is still held to 256 KB. */
export const BATCH_REQUEST_LIMIT = 8 * 1024 * 1024;

/** POST /tasks/batch: up to 1,000 tasks of one lane, accepted all together or not at all. */
export function batchRoutes(deps: ApiDeps): Router {
  const r = Router();
  r.post(
    '/tasks/batch',
    jsonBody(BATCH_REQUEST_LIMIT),
    idempotent(deps),
    handler(async (req, res) => {
      const input = validate<BatchInput>(createBatchSchema, jsonObject(req));
      flowControlServed(deps, input.flow_control ?? input.tasks.find((t) => t.flow_control != null)?.flow_control);
      const { event, seq } = await createBatch(deps, req.orgId, input, await orgPlan(deps, req.orgId), onceId(res, 'cmd'));
      await deps.reads.wrote(req.orgId, seq);
      const created = event.data.created ?? event.data.tasks?.length ?? 0;
      res.status(201).json({
        data: { lane: input.lane ?? null, ...(input.flow_control ? { flow_control_key: input.flow_control.key } : {}), created, scheduled_for: event.data.scheduled_for },
        message: input.lane ? `Created ${created} task(s) in lane ${input.lane}` : `Created ${created} task(s) under flow-control key ${input.flow_control!.key}`,
      });
    }),
  );
  return r;
}
