import { createHash } from 'node:crypto';
import type { HookRequest, TransformResult } from './pipeline.ts';
import type { ScriptEngine, ScriptOutcome } from '../scripts/engine.ts';

/**
 * What one endpoint hook decided, with the lines its script logged. A script error or a
 * limit hit is `ok: false` (the caller rejects in verify, fails the delivery
 * unforwarded in the others); a hook the script does not define is a pass.
 */
export type HookResult<T> =
  | { ok: true; value: T; logs: string[] }
  /** `unavailable`: the engine could not run the call at all (see ScriptOutcome); the script is not to blame. */
  | { ok: false; error: string; logs: string[]; unavailable?: boolean };

export type Verdict = { accepted: true } | { accepted: false; status_code: number };

export interface Transformed extends TransformResult {
  debounce_key?: string;
  debounce?: string;
}

export interface EndpointScriptHooks {
  verify(req: HookRequest, secrets: Record<string, string>): Promise<HookResult<Verdict>>;
  /** true: forward; false: store only (`filtered`). */
  filter(req: HookRequest): Promise<HookResult<boolean>>;
  /** null: keep the custom forwarding values. */
  transform(req: HookRequest): Promise<HookResult<Transformed | null>>;
  /** null: every forward URL; else the chosen ones, each one of `forwardUrls`. */
  route(req: HookRequest, forwardUrls: readonly string[]): Promise<HookResult<string[] | null>>;
}

/** The error is also the last line of the logs, as the contract has it for every hook. */
const failed = <T>(out: ScriptOutcome, hook: string, error: string): HookResult<T> =>
  ({ ok: false, error: `${hook}: ${error}`, logs: [...out.logs, `${hook} failed: ${error}`], ...(out.unavailable ? { unavailable: true } : {}) });

/**
 * Hooks scripts do not define, by script digest: a script's top level defines the same
 * functions every time, so after one call says a hook is missing, later calls of that
 * hook pass without a trip to a worker (an endpoint with only `transform` costs its
 * receiver nothing). Bounded: oldest scripts are forgotten first.
 */
const MISSING_LIMIT = 2_000;
const missingHooks = new Map<string, Set<string>>();
const digestOf = (script: string) => createHash('sha1').update(script).digest('base64');
function knownMissing(digest: string, hook: string): boolean {
  return missingHooks.get(digest)?.has(hook) ?? false;
}
function rememberMissing(digest: string, hook: string): void {
  let hooks = missingHooks.get(digest);
  if (!hooks) {
    if (missingHooks.size >= MISSING_LIMIT) missingHooks.delete(missingHooks.keys().next().value!);
    missingHooks.set(digest, (hooks = new Set()));
  }
  hooks.add(hook);
}
const MISSING: ScriptOutcome = { result: [], logs: [], duration_ms: 0, error: null, missing: true };
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The contract's endpoint hooks over the script engine, for one endpoint's script:
 * `verify` accepts only on `true` (`false, code` rejects with that 4xx, any other
 * code or value with 403); `filter` drops only on `false`; `transform` returns a table
 * of `method`, `headers`, `body`, `debounce_key`, `debounce` (what it leaves out keeps
 * the custom forwarding value); `route` returns a list of URLs, each one of the
 * endpoint's `forward_urls` (any other is an error of the script, never a destination).
 */
export function endpointScriptHooks(engine: ScriptEngine, script: string): EndpointScriptHooks {
  let digest: string | undefined;
  const run = async (hook: string, args: unknown[]): Promise<ScriptOutcome> => {
    digest ??= digestOf(script);
    if (knownMissing(digest, hook)) return MISSING;
    const out = await engine.run({ script, hook, args });
    if (out.missing) rememberMissing(digest, hook);
    return out;
  };
  return {
    async verify(req, secrets) {
      const out = await run('verify', [req, secrets]);
      if (out.error) return failed(out, 'verify', out.error);
      if (out.missing) return { ok: true, value: { accepted: true }, logs: out.logs };
      const [accepted, code] = out.result;
      if (accepted === true) return { ok: true, value: { accepted: true }, logs: out.logs };
      const status = typeof code === 'number' && Number.isInteger(code) && code >= 400 && code <= 499 ? code : 403;
      return { ok: true, value: { accepted: false, status_code: status }, logs: out.logs };
    },
    async filter(req) {
      const out = await run('filter', [req]);
      if (out.error) return failed(out, 'filter', out.error);
      return { ok: true, value: out.missing || out.result[0] !== false, logs: out.logs };
    },
    async transform(req) {
      const out = await run('transform', [req]);
      if (out.error) return failed(out, 'transform', out.error);
      const t = out.result[0];
      if (out.missing || t === null || t === undefined) return { ok: true, value: null, logs: out.logs };
      if (!isObject(t)) return failed(out, 'transform', `must return a table, not ${Array.isArray(t) ? 'a list' : typeof t}`);
      const value: Transformed = {};
      for (const key of ['method', 'body', 'debounce_key', 'debounce'] as const) {
        if (t[key] === undefined || t[key] === null) continue;
        if (typeof t[key] !== 'string') return failed(out, 'transform', `${key} must be a string`);
        value[key] = t[key];
      }
      if (t.headers !== undefined && t.headers !== null) {
        if (!isObject(t.headers) || !Object.values(t.headers).every((v) => typeof v === 'string')) return failed(out, 'transform', 'headers must be a table of strings');
        value.headers = t.headers as Record<string, string>;
      }
      if ((value.debounce_key === undefined) !== (value.debounce === undefined)) return failed(out, 'transform', 'debounce_key and debounce go together');
      return { ok: true, value, logs: out.logs };
    },
    async route(req, forwardUrls) {
      const out = await run('route', [req]);
      if (out.error) return failed(out, 'route', out.error);
      const r = out.result[0];
      if (out.missing || r === null || r === undefined) return { ok: true, value: null, logs: out.logs };
      // An empty Lua table reaches JSON as {}: it is the empty list here.
      const list = isObject(r) && Object.keys(r).length === 0 ? [] : r;
      if (!Array.isArray(list) || !list.every((u) => typeof u === 'string')) return failed(out, 'route', 'must return a list of URLs');
      const unknown = list.find((u) => !forwardUrls.includes(u));
      if (unknown !== undefined) return failed(out, 'route', `${unknown} is not one of the endpoint's forward_urls`);
      return { ok: true, value: list, logs: out.logs };
    },
  };
}
