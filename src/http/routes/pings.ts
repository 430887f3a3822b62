import { Router, type Request } from 'express';
import AsyncLock from 'async-lock';
import { createMonitor, pingMonitor, type SlugOwner } from '../../commands/monitor/handlers.ts';
import { PING_BODY_LIMIT, SLUG_PATTERN, type MonitorEvent, type PingRequest } from '../../commands/monitor/types.ts';
import type { Metrics } from '../../lib/metrics.ts';
import { ApiError, badRequest, notFound } from '../../lib/errors.ts';
import { storableText } from '../../lib/input-checks.ts';
import { handler, type ApiDeps } from '../context.ts';
import { slugOwner, type PingTarget, type PingTokens } from '../ping-tokens.ts';
import { planLimitFor } from '../plan-limits.ts';
import { rawBody } from '../request-body.ts';

const METHODS = new Set(['GET', 'HEAD', 'POST']);
/** `?create=1` makes an interval monitor: daily, grace 1 h, named after its slug. */
const CREATED_MONITOR = { schedule_type: 'interval', interval_seconds: 86_400, grace_period_seconds: 3_600 } as const;

/** A ping that ended a run: its duration in the organization's histogram. */
function observeRun(metrics: Metrics, events: MonitorEvent[]): void {
  for (const e of events) {
    const ping = e.type === 'MonitorPinged' || e.type === 'MonitorWentDown' ? e.data.ping : undefined;
    if (ping?.duration_ms == null) continue;
    metrics.monitorRunDuration.observe({ org_id: e.org_id, outcome: e.type === 'MonitorPinged' ? 'success' : 'failure' }, ping.duration_ms / 1000);
  }
}

/** What a ping request carries, read by the transport (express here, or `ping-receiver.ts`). */
export type Received = Omit<PingRequest, 'id' | 'received_at' | 'suffix'>;

/** A ping's answer: status and JSON body (`Ping-Body-Limit` goes on every one). */
export interface PingAnswer {
  status: number;
  body: unknown;
}

/** A query parameter given at most once, as text. */
function queryText(req: Request, name: string): string | null {
  const v = req.query[name];
  if (v === undefined) return null;
  if (typeof v !== 'string') throw badRequest(`${name} must be given once`, name);
  return v;
}

/**
 * What the request carries: the method, where from, and the first 100 KB of a body.
 * A ping is never refused for what it carries: bytes that are not UTF-8 decode to
 * U+FFFD, and what the store cannot hold (NUL) is replaced the same way.
 */
export function receivedPing(method: string, sourceIp: string | undefined | null, userAgent: string | undefined, body: Buffer, rid: string | null): Received {
  const text = (value: string | undefined | null) => (value == null ? null : storableText(value));
  return { method, source_ip: text(sourceIp), user_agent: text(userAgent), body: storableText(body.subarray(0, PING_BODY_LIMIT).toString('utf8')), rid };
}

const received = (req: Request): Received =>
  receivedPing(req.method, req.ip, req.get('user-agent'), Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0), queryText(req, 'rid'));

/**
 * A ping, whatever carried it: the monitor named by token or by ping key and slug,
 * decided and appended, then the answer. Errors are thrown (ApiError: the contract's
 * answer), except a paused or disabled monitor's 410, which names the monitor.
 */
export function createPinger(deps: ApiDeps, targets: PingTokens) {
  const owner: SlugOwner = slugOwner(deps.db);
  // `?create=1` pings of one name in this process create one monitor.
  const creating = new AsyncLock({ maxPending: Infinity });

  const answer = async (target: PingTarget, ping: Omit<PingRequest, 'id' | 'received_at'>, slug?: string, status = 200): Promise<PingAnswer> => {
    try {
      const { events, state, seq } = await pingMonitor(deps, target.org_id, target.id, ping, slug);
      await deps.reads.wrote(target.org_id, seq);
      observeRun(deps.metrics, events);
      return { status, body: { monitor: state!.name, status: state!.status } };
    } catch (err) {
      if (err instanceof ApiError && err.status === 410) {
        const row = await deps.db.selectFrom('monitors').select('doc').where('id', '=', target.id).executeTakeFirst();
        return { status: 410, body: { monitor: (row?.doc as { name?: string } | undefined)?.name ?? null, status: 'paused', error: { message: err.message, field: null } } };
      }
      throw err;
    }
  };

  return {
    /** `received` is read once the monitor is known (a bad `rid` of an unknown token is a 404). */
    async byToken(received: () => Received, token: string, suffix: string | null): Promise<PingAnswer> {
      const target = await targets.find(token);
      if (!target) throw notFound('Not found');
      try {
        return await answer(target, { ...received(), suffix });
      } catch (err) {
        if (err instanceof ApiError && err.status === 404) targets.forget(token);
        throw err;
      }
    },

    /** `received` and `create` are read once the ping key is known (given twice, a query parameter is a 400 then, not before a 404). */
    async byName(received: () => Received, pingKey: string, slug: string, suffix: string | null, create: () => boolean): Promise<PingAnswer> {
      const orgId = await targets.organizationOf(pingKey);
      if (!orgId) throw notFound('Not found');
      const ping = { ...received(), suffix };
      const creates = create();
      if (creates && !SLUG_PATTERN.test(slug)) throw badRequest('A slug takes lower-case letters, digits, "-" and "_"', 'slug');
      // The name's monitor may have changed (a slug moved, a monitor deleted) or not be
      // projected yet (a sync a moment ago): look again once, after the organization's
      // writes are in the read model, before saying there is none (or creating one).
      for (const fresh of [false, true]) {
        if (fresh) await deps.reads.caughtUp(orgId);
        const target = await targets.findByName(orgId, slug, fresh);
        if (!target) continue;
        try {
          return await answer(target, ping, slug);
        } catch (err) {
          if (!(err instanceof ApiError && err.status === 404) || fresh) throw err;
          targets.forgetName(orgId, slug);
        }
      }
      if (!creates) throw notFound('Not found');
      return creating.acquire(`${orgId}/${slug}`, async () => {
        const made = await targets.findByName(orgId, slug);
        if (made) return answer(made, ping, slug);
        const plan = await planLimitFor(deps, 'monitor', orgId);
        const { state } = await createMonitor(deps, orgId, { ...CREATED_MONITOR, name: slug, slug }, plan, owner);
        targets.rememberName(orgId, slug, state!.id);
        return answer({ org_id: orgId, id: state!.id }, ping, slug, 201);
      });
    },
  };
}

export type Pinger = ReturnType<typeof createPinger>;

/**
 * `{root}/ping/<token>[/<signal>]` and `{root}/ping/<ping_key>/<slug>[/<signal>]`, HEAD,
 * GET or POST, no API key: the token (or the ping key) is the credential. The signal
 * (`start`, `fail`, `log`, `0`–`255`) and `rid` are read by the monitor's decider.
 * Every answer carries `Ping-Body-Limit`, which Healthchecks clients (runitor) use to
 * cut what they send. The common requests are taken before express by
 * `ping-receiver.ts`; these routes answer the rest the same way.
 */
export function pingRoutes(deps: ApiDeps, pinger: Pinger): Router {
  const r = Router();
  const raw = rawBody();

  // Other methods: 405 (a middleware, not a route: the routes list what a ping is).
  r.use('/ping', (req, res, next) => {
    res.set('Ping-Body-Limit', String(PING_BODY_LIMIT));
    next(METHODS.has(req.method) ? undefined : new ApiError(405, 'A ping is HEAD, GET or POST', null, { Allow: 'GET, HEAD, POST' }));
  });
  const ping = handler(async (req, res) => {
    const { first, second, third } = req.params as { first: string; second?: string; third?: string };
    const answer = first.startsWith('ppk_') && second !== undefined
      ? await pinger.byName(() => received(req), first, second, third ?? null, () => queryText(req, 'create') === '1')
      : third !== undefined ? null : await pinger.byToken(() => received(req), first, second ?? null);
    if (!answer) throw notFound('Not found');
    res.status(answer.status).json(answer.body);
  });
  // <token>, <token>/<signal> or <ping_key>/<slug>, <ping_key>/<slug>/<signal>.
  for (const path of ['/ping/:first', '/ping/:first/:second', '/ping/:first/:second/:third']) {
    for (const method of ['get', 'head', 'post'] as const) r[method](path, raw, ping);
  }
  return r;
}
