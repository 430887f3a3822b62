import { agree, OneOf, Str, Time, Type, type Disagreeing } from './schema-kit.ts';

export const QUOTA_EVENT_SCHEMAS = {
  QuotaReserved: Type.Object({
    kind: OneOf(['endpoint', 'schedule', 'monitor'] as const),
    reservations: Type.Array(Type.Object({ id: Str('The resource taking the place'), at: Time() })),
  }, { description: 'The places of a plan limit taken, per organization and kind of resource' }),
};
agree<Disagreeing<typeof QUOTA_EVENT_SCHEMAS>>();
