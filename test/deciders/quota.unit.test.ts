import { describe, test } from 'node:test';
import { planLimit } from '../../src/commands/plan-rules.ts';
import { decideQuota, evolveQuota, type QuotaCommand, type Reservation } from '../../src/commands/quota.ts';
import { deciderSpec, later, NOW } from './spec.ts';

const spec = deciderSpec(decideQuota, evolveQuota);
const ORG = 'org_q';
const EPOCH = new Date(0).toISOString();
const reserve = (id: string, live: string[], liveness?: QuotaCommand['liveness']): QuotaCommand => ({
  type: 'ReserveSlot',
  orgId: ORG,
  kind: 'endpoint',
  plan: planLimit('free', 'endpoint', live),
  id,
  ...(liveness ? { liveness } : {}),
});
const at = (id: string, when: string): Reservation => ({ id, at: when });

describe('quota decider (Free: 3 endpoints)', () => {
  test('a place left: the reservations so far, the read model\'s ids, and the new one', () => {
    spec.givenState([at('ep_a', later(-1000))]).when(reserve('ep_new', ['ep_a', 'ep_b'])).then([{
      type: 'QuotaReserved',
      id: 'evt_test',
      at: NOW,
      org_id: ORG,
      data: { kind: 'endpoint', reservations: [at('ep_a', later(-1000)), at('ep_b', EPOCH), at('ep_new', NOW)] },
    }]);
  });

  test('full: 403 with the plan\'s words', () => {
    spec.given([]).when(reserve('ep_new', ['ep_a', 'ep_b', 'ep_c']))
      .thenRefuses({ status: 403, field: null, message: 'the Free plan allows 3 endpoints; delete one or upgrade to Pro' });
    // Reserved but not projected yet: they count too.
    spec.givenState([at('ep_x', NOW), at('ep_y', NOW)]).when(reserve('ep_new', ['ep_a'])).thenRefuses({ status: 403 });
  });

  test('full, but a place is free: a deleted resource, or a reservation whose create died (older than 30 s, never stored)', () => {
    spec.given([]).when(reserve('ep_new', ['ep_a', 'ep_b', 'ep_c'], { ep_a: true, ep_b: false, ep_c: true }))
      .thenMatches([{ data: { reservations: [at('ep_a', EPOCH), at('ep_c', EPOCH), at('ep_new', NOW)] } }]);
    spec.givenState([at('ep_dead', later(-31_000))]).when(reserve('ep_new', ['ep_a', 'ep_b'], { ep_dead: null, ep_a: true, ep_b: true }))
      .thenMatches([{ data: { reservations: [at('ep_a', EPOCH), at('ep_b', EPOCH), at('ep_new', NOW)] } }]);
  });

  test('full, and every place taken: a create still in flight (young, not stored yet) or of unknown liveness counts', () => {
    spec.givenState([at('ep_flying', later(-5_000))]).when(reserve('ep_new', ['ep_a', 'ep_b'], { ep_flying: null, ep_a: true, ep_b: true }))
      .thenRefuses({ status: 403 });
    spec.given([]).when(reserve('ep_new', ['ep_a', 'ep_b', 'ep_c'], { ep_a: false })).thenMatches([{ data: { reservations: [at('ep_b', EPOCH), at('ep_c', EPOCH), at('ep_new', NOW)] } }]);
  });

  test('an unlimited plan reserves nothing', () => {
    spec.given([]).when({ ...reserve('ep_new', []), plan: planLimit('pro', 'endpoint', ['ep_a', 'ep_b', 'ep_c', 'ep_d']) }).thenNothing();
  });

  test('each kind has its own count', () => {
    const schedule: QuotaCommand = { type: 'ReserveSlot', orgId: ORG, kind: 'schedule', plan: planLimit('free', 'schedule', ['s1', 's2', 's3']), id: 's4' };
    spec.given([]).when(schedule).thenMatches([{ data: { kind: 'schedule', reservations: [{ id: 's1' }, { id: 's2' }, { id: 's3' }, { id: 's4' }] } }]);
    const tenth = Array.from({ length: 10 }, (_, i) => `m${i}`);
    spec.given([]).when({ ...schedule, kind: 'monitor', plan: planLimit('free', 'monitor', tenth), id: 'm10' })
      .thenRefuses({ status: 403, message: 'the Free plan allows 10 monitors; delete one or upgrade to Pro' });
  });
});
