import { Router } from 'express';
import { createBatch, type BatchInput } from '../../commands/batch/handlers.ts';
import { unprocessable } from '../../lib/errors.ts';
import { jsonObject } from '../body.ts';
import { handler, type ApiDeps } from '../context.ts';
import { idempotent, onceId } from '../idempotency.ts';
import { orgPlan } from '../plan-limits.ts';
import { jsonBody } from '../request-body.ts';
import { createBatchSchema, MAX_BATCH_HOSTS } from '../schemas/batch.ts';
import { checkBodySize, checkHeaders } from '../task-checks.ts';
import { validate } from '../validate.ts';

/** Room for a full batch (8 MiB); each task body is still held to 256 KB. */
export const BATCH_REQUEST_LIMIT = 8 * 1024 * 1024;

function host(url: string): string {
  return new URL(url).host.toLowerCase();
}

function checkBatch(input: BatchInput): void {
  if (input.delay !== undefined && input.run_at !== undefined) throw unprocessable('send either delay or run_at, not both', 'run_at');
  checkHeaders(input.headers);
  const hosts = new Set<string>();
  if (input.callback_url) hosts.add(host(input.callback_url));
  input.tasks.forEach((t, i) => {
    checkBodySize(t.body, `tasks[${i}].`);
    checkHeaders(t.headers, `tasks[${i}].`);
    hosts.add(host(t.url));
  });
  if (hosts.size > MAX_BATCH_HOSTS) {
    throw unprocessable(`a batch may reach at most ${MAX_BATCH_HOSTS} distinct hosts (url and callback_url); this one has ${hosts.size}`, 'tasks');
  }
}

/** POST /tasks/batch: up to 1,000 tasks of one lane, accepted all together or not at all. */
export function batchRoutes(deps: ApiDeps): Router {
  const r = Router();
  r.post(
    '/tasks/batch',
    jsonBody(BATCH_REQUEST_LIMIT),
    idempotent(deps),
    handler(async (req, res) => {
      const input = validate<BatchInput>(createBatchSchema, jsonObject(req));
      checkBatch(input);
      const { event, seq } = await createBatch(deps, req.orgId, input, await orgPlan(deps, req.orgId), onceId(res, 'cmd'));
      await deps.reads.wrote(req.orgId, seq);
      const created = event.data.tasks.length;
      res.status(201).json({
        data: { lane: input.lane, created, scheduled_for: event.data.scheduled_for },
        message: `Created ${created} task(s) in lane ${input.lane}`,
      });
    }),
  );
  return r;
}
