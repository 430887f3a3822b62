import { checkScript } from '../script-checks.ts';
import { featuresOf } from '../../commands/plan-rules.ts';
import { Router } from 'express';
import { createSchedule, deleteSchedule, triggerSchedule, updateSchedule } from '../../commands/schedule/handlers.ts';
import type { Schedule, ScheduleInput } from '../../commands/schedule/types.ts';
import { notFound } from '../../lib/errors.ts';
import { jsonObject } from '../body.ts';
import { handler, type ApiDeps } from '../context.ts';
import { idempotent, onceId } from '../idempotency.ts';
import { createScheduleSchema, updateScheduleSchema } from '../schemas/schedule.ts';
import { triggerTaskSchema } from '../schemas/task.ts';
import { historyRow, schedulesWithStatus, type ScheduleRow } from '../serializers.ts';
import { validate } from '../validate.ts';
import { orgPlan, planLimitFor } from '../plan-limits.ts';
import { limitParam } from './executions.ts';

const iso = (d: Date | string | null) => (d == null ? null : new Date(d).toISOString());

function scheduleResource(row: ScheduleRow) {
  return {
    missed_ticks: 0,
    // Resources made before notification channels name none: every channel.
    channels: null,
    ...(row.doc as Record<string, unknown>),
    id: row.id,
    next_run_at: iso(row.next_run_at),
    disabled_reason: row.disabled_reason ?? null,
    last_execution_id: row.last_execution_id,
    last_status: row.last_status,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
}

function fromState(s: Schedule) {
  const { org_id: _o, health: _h, ...rest } = s;
  return { missed_ticks: 0, ...rest, disabled_reason: s.disabled_reason ?? null, last_execution_id: null, last_status: null };
}

export function scheduleRoutes(deps: ApiDeps): Router {
  const r = Router();
  const load = async (orgId: string, id: string) => {
    const row = await schedulesWithStatus(deps.db).selectAll().where('id', '=', id).where('org_id', '=', orgId).executeTakeFirst();
    if (!row) throw notFound('Schedule not found');
    return row;
  };

  r.get('/schedules', handler(async (req, res) => {
    const rows = await schedulesWithStatus(deps.db).selectAll().where('org_id', '=', req.orgId).orderBy('created_at', 'desc').orderBy('id', 'desc').execute();
    res.json({ data: rows.map(scheduleResource) });
  }));

  r.get('/schedules/:id', handler(async (req, res) => {
    res.json({ data: scheduleResource(await load(req.orgId, req.params.id!)) });
  }));

  r.post('/schedules', idempotent(deps), handler(async (req, res) => {
    const input = validate<ScheduleInput & { url: string; cron: string }>(createScheduleSchema, jsonObject(req));
    const limit = await planLimitFor(deps, 'schedule', req.orgId);
    await checkScript(deps.scripts, featuresOf(limit), 'schedule', input.script);
    const { state, seq } = await createSchedule(deps, req.orgId, input, limit, onceId(res, 'sch'));
    await deps.reads.wrote(req.orgId, seq);
    res.status(201).json({ data: fromState(state!) });
  }));

  r.put('/schedules/:id', handler(async (req, res) => {
    const input = validate<ScheduleInput>(updateScheduleSchema, jsonObject(req));
    const plan = await orgPlan(deps, req.orgId);
    await checkScript(deps.scripts, plan, 'schedule', input.script);
    const { seq } = await updateSchedule(deps, req.orgId, req.params.id!, input, plan);
    await deps.reads.wrote(req.orgId, seq);
    await deps.reads.caughtUp(req.orgId);
    res.json({ data: scheduleResource(await load(req.orgId, req.params.id!)) });
  }));

  r.delete('/schedules/:id', handler(async (req, res) => {
    const { seq } = await deleteSchedule(deps, req.orgId, req.params.id!);
    await deps.reads.wrote(req.orgId, seq);
    res.status(204).end();
  }));

  r.post('/schedules/:id/trigger', handler(async (req, res) => {
    const input = validate<{ callback_url?: string }>(triggerTaskSchema, jsonObject(req, true));
    const { events: [event], seq } = await triggerSchedule(deps, req.orgId, req.params.id!, input.callback_url ?? null);
    await deps.reads.wrote(req.orgId, seq);
    const executionId = event?.type === 'ScheduleTriggered' ? event.data.execution.id : null;
    res.status(202).json({ data: { execution_id: executionId, status: 'pending' }, message: 'Execution queued' });
  }));

  r.get('/schedules/:id/executions', handler(async (req, res) => {
    await load(req.orgId, req.params.id!);
    const rows = await deps.db.selectFrom('executions').selectAll().where('source_id', '=', req.params.id!)
      .where('org_id', '=', req.orgId).orderBy('scheduled_for', 'desc').orderBy('id', 'desc').limit(limitParam(req)).execute();
    res.json({ data: rows.map(historyRow) });
  }));

  return r;
}
