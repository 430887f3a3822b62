import { checkPlanFeatures } from '../commands/plan-rules.ts';
import type { Plan } from '../commands/organization/types.ts';
import { unprocessable } from '../lib/errors.ts';
import type { ScriptEngine } from '../scripts/engine.ts';

/** The hooks each kind of resource's script may define. */
export const SCRIPT_HOOKS = {
  task: ['on_response'],
  schedule: ['on_response'],
  endpoint: ['verify', 'filter', 'transform', 'route'],
} as const;

export type ScriptOwner = keyof typeof SCRIPT_HOOKS;

/**
 * A script stored on a resource must compile and define at least one hook its resource
 * can use: else 422 naming the field, with Lua's message and line. The plan comes
 * first, so a Free organization hears that scripts need Pro (403), whatever the script.
 */
export async function checkScript(engine: ScriptEngine, plan: Plan, owner: ScriptOwner, script: string | null | undefined, field = 'script'): Promise<void> {
  // Empty is none, as the deciders store it (payload-checks.ts, emptyAsNone).
  if (script == null || script === '') return;
  checkPlanFeatures(plan, { script });
  const problem = await engine.check(script, SCRIPT_HOOKS[owner]);
  if (problem) throw unprocessable(`script: ${problem}`, field);
}
