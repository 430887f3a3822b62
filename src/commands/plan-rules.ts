import { forbidden, type ApiError } from '../lib/errors.ts';
import type { Plan } from './organization/types.ts';

/** The kinds of resource a plan counts. */
export type LimitedKind = 'endpoint' | 'schedule' | 'monitor';

interface PlanRules {
  label: string;
  /** How many of each kind an organization may have; null = no limit. */
  limits: Record<LimitedKind, number | null>;
  /** Lua scripts on tasks, schedules and endpoints. */
  script: boolean;
  /** Endpoint secrets (for `verify()`). */
  secrets: boolean;
}

/** Every plan rule: the counts and the Pro-only features. */
const PLANS: Record<Plan, PlanRules> = {
  free: { label: 'Free', limits: { endpoint: 3, schedule: 10, monitor: 10 }, script: false, secrets: false },
  pro: { label: 'Pro', limits: { endpoint: null, schedule: null, monitor: null }, script: true, secrets: true },
};

/** A plan's count of one kind as a create sees it: `live` = the ids the read model holds now. */
export interface PlanLimit {
  name: string;
  limit: number | null;
  live: string[];
  /** Whose features the create may use (scripts, secrets); absent: the Free plan's. */
  plan?: Plan;
}

/** Whether the plan counts this kind at all (when not, the read model need not be asked). */
export const isLimited = (plan: Plan, kind: LimitedKind): boolean => PLANS[plan].limits[kind] !== null;

/** The plan's count of `kind`; `live` = the organization's ids of that kind in the read model. */
export function planLimit(plan: Plan, kind: LimitedKind, live: string[]): PlanLimit {
  const rules = PLANS[plan];
  const limit = rules.limits[kind];
  return { plan, name: rules.label, limit, live: limit === null ? [] : live };
}

/** The plan whose features a create of this limit may use. */
export const featuresOf = (limit: PlanLimit): Plan => limit.plan ?? 'free';

/** The refusal of a create past the plan's count. */
export const overLimit = (plan: PlanLimit, kind: LimitedKind): ApiError =>
  forbidden(`the ${plan.name} plan allows ${plan.limit} ${kind}s; delete one or upgrade to Pro`);

/**
 * Refuses the features the plan does not include, with a 403 naming the field:
 * a script (any value but null), secrets (one or more).
 */
export function checkPlanFeatures(plan: Plan, use: { script?: string | null; secrets?: readonly string[] | null }): void {
  const rules = PLANS[plan];
  if (!rules.script && use.script != null) throw forbidden('Lua scripts need the Pro plan', 'script');
  if (!rules.secrets && use.secrets?.length) throw forbidden('secrets need the Pro plan', 'secrets');
}
