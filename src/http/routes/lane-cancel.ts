import { Router } from 'express';
import { cancelTask } from '../../commands/task/handlers.ts';
import { ApiError, unprocessable } from '../../lib/errors.ts';
import { queryString } from '../body.ts';
import { handler, type ApiDeps } from '../context.ts';

const PARALLEL = 16;

/**
 * DELETE /tasks?lane=…: soft-deletes every live task of the lane (each through its
 * own guarded command), which cancels their pending executions; an attempt already
 * running finishes but is not retried.
 */
export function laneCancelRoutes(deps: ApiDeps): Router {
  const r = Router();
  r.delete('/tasks', handler(async (req, res) => {
    const lane = queryString(req, 'lane');
    if (!lane) throw unprocessable('query parameter lane is required', 'lane');
    await deps.reads.caughtUp(req.orgId);
    const rows = await deps.db.selectFrom('tasks').select('id').where('org_id', '=', req.orgId)
      .where('lane', '=', lane).where('deleted_at', 'is', null).execute();
    let cancelled = 0;
    let lastSeq = 0;
    const queue = rows.map((r) => r.id);
    const worker = async () => {
      for (let id = queue.shift(); id; id = queue.shift()) {
        try {
          const { seq } = await cancelTask(deps, req.orgId, id, `lane ${lane} cancelled`);
          cancelled++;
          lastSeq = Math.max(lastSeq, seq);
        } catch (err) {
          // Deleted or cancelled by someone else meanwhile: not ours to count.
          if (!(err instanceof ApiError && err.status === 404)) throw err;
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(PARALLEL, queue.length) }, worker));
    await deps.reads.wrote(req.orgId, lastSeq);
    res.json({ data: { cancelled }, message: `Cancelled ${cancelled} task(s) in lane ${lane}` });
  }));
  return r;
}
