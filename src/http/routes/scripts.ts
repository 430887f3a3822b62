import { Router } from 'express';
import { checkPlanFeatures } from '../../commands/plan-rules.ts';
import { unprocessable } from '../../lib/errors.ts';
import { ScriptEngineUnavailableError } from '../../scripts/engine.ts';
import { jsonObject } from '../body.ts';
import { handler, type ApiDeps } from '../context.ts';
import { orgPlan } from '../plan-limits.ts';
import { scriptTestSchema } from '../schemas/script.ts';
import { SCRIPT_HOOKS } from '../script-checks.ts';
import { validate } from '../validate.ts';

interface ScriptTest {
  script: string;
  hook: 'verify' | 'filter' | 'transform' | 'route' | 'on_response';
  request?: Record<string, unknown>;
  secrets?: Record<string, string>;
  response?: Record<string, unknown>;
  task?: Record<string, unknown>;
}

/** The tables a hook gets, with the service's defaults for what the caller left out. */
function hookArgs(t: ScriptTest): unknown[] {
  if (t.hook === 'on_response') {
    const res = { status: null, headers: {}, body: '', duration_ms: 0, ...t.response };
    const task = { id: 'tsk_test', name: 'test', url: '', method: 'POST', attempt: 1, ...t.task };
    return [res, task];
  }
  const req = { method: 'POST', path: '/', query: '', headers: {}, body: '', source_ip: null, ...t.request };
  // Header names reach hooks lower-cased, as an inbound request's do.
  req.headers = Object.fromEntries(Object.entries(req.headers as Record<string, string>).map(([k, v]) => [k.toLowerCase(), v]));
  return t.hook === 'verify' ? [req, t.secrets ?? {}] : [req];
}

/**
 * `POST /scripts/test` (Pro): runs one hook in the same sandbox and under the same
 * limits as the service, stores nothing, and answers what it returned: `result` is the
 * hook's return value (a list when it returned several, null when none), `error` the
 * Lua error or limit message. A script that does not compile is 422, as on a save.
 */
export function scriptRoutes(deps: ApiDeps): Router {
  const r = Router();
  r.post('/scripts/test', handler(async (req, res) => {
    const t = validate<ScriptTest>(scriptTestSchema, jsonObject(req));
    checkPlanFeatures(await orgPlan(deps, req.orgId), { script: t.script });
    const owner = t.hook === 'on_response' ? 'task' : 'endpoint';
    const problem = await deps.scripts.check(t.script, SCRIPT_HOOKS[owner]);
    if (problem && !/^defines none/.test(problem)) throw unprocessable(`script: ${problem}`, 'script');
    const out = await deps.scripts.run({ script: t.script, hook: t.hook, args: hookArgs(t) });
    // The engine's state, not the script's answer: the caller should try again.
    if (out.unavailable) throw new ScriptEngineUnavailableError(out.error!);
    const result = out.missing ? null : out.result.length === 0 ? null : out.result.length === 1 ? out.result[0] : out.result;
    res.json({ result, logs: out.logs, duration_ms: out.duration_ms, error: out.missing ? `the script defines no ${t.hook} function` : out.error });
  }));
  return r;
}
