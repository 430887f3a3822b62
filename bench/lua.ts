/**
 * Lua scripting (`npm run bench -- lua`), in one run on one stack:
 * 1. inbound acceptance of ~1 KB JSON POSTs at saturation, on the same kind of
 *    endpoint without a script and with one that verifies an HMAC-SHA256 of the body
 *    (`crypto.hmac_sha256`) and transforms the body; the pure-Lua HMAC variant shows
 *    what the native digest saves;
 * 2. hook call latency p50 / p99 (verify with HMAC, transform of 1 KB) through the
 *    script engine the service uses, one call at a time and 8 at once;
 * 3. on_response: service CPU per execution for tasks with and without the hook;
 * 4. what a runaway costs everyone else: p99 of plain API requests at a steady rate,
 *    alone and while one script per second hits its time limit (a busy loop and a
 *    pathological `string.find`, which costs a worker thread).
 */
import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { createScriptEngine } from '../src/scripts/engine.ts';
import { ROOT, sleep, type CpuReport } from './harness.ts';
import { closedLoop, HttpClient, openLoop, Outcomes, type SendResult } from './load.ts';
import { troubleNotes, withStack, type Benchmark, type Stack } from './stack.ts';
import { fmt, summarize, type Summary } from './stats.ts';

const CONCURRENCY = 64;
const WARMUP_MS = 2_000;
const SECONDS = 6;
const BODY_BYTES = 1024;
const SECRET = 'whsec_bench_lua';
const GOAL_RATIO = 0.7;
const HOOK_CALLS = 2_000;
const TASKS = 2_000;
const PLAIN_RATE = 100;
const PLAIN_SECONDS = 10;

/** Verifies `X-Signature: sha256=<hex>` over the raw body, as GitHub signs; then reshapes the JSON. */
const HOOKS = `
function verify(req, secrets)
  local given = req.headers["x-signature"] or ""
  return crypto.equal(given, "sha256=" .. HMAC(secrets.signing_key, req.body))
end

function transform(req)
  local event = json.decode(req.body)
  return { body = json.encode({ bid = event.bid, kind = event.type, size = #event.pad, via = "jetcron" }) }
end
`;
const NATIVE = `local HMAC = crypto.hmac_sha256\n${HOOKS}`;
const PURE_LUA = `${readFileSync(path.join(ROOT, 'bench', 'lua-hmac-sha256.lua'), 'utf8')}\nlocal HMAC = hmac_sha256_hex\n${HOOKS}`;
const ON_RESPONSE = 'function on_response(res, task)\n  if res.status >= 300 then return { status = "failed" } end\nend';

function payload(id: string): string {
  const head = `{"bid":"${id}","type":"bench.lua","pad":"`;
  return `${head}${'x'.repeat(Math.max(0, BODY_BYTES - head.length - 2))}"}`;
}
const signature = (body: string) => `sha256=${createHmac('sha256', SECRET).update(body).digest('hex')}`;
const isReceived = (r: SendResult) => r.status === 200 && r.text.includes('"received"');
/** CPU of every process of the stack over a phase, in ms. */
const totalMs = (r: CpuReport) => r.rows.filter((x) => !x.detail).reduce((t, x) => t + x.cpuSeconds, 0) * 1000;
const p50p99 = (x: Summary) => `${fmt.ms(x.p50)} / ${fmt.ms(x.p99)}`;

async function createEndpoint(s: Stack, name: string, script: string | null): Promise<string> {
  const spec = { name, forward_urls: [`${s.target.url}/body-id`], use_lane: false, ...(script ? { script, secrets: { signing_key: SECRET } } : {}) };
  const r = await s.api.send('POST', '/api/v1/endpoints', { body: JSON.stringify(spec) });
  if (r.status !== 201) throw new Error(`POST /api/v1/endpoints answered ${r.status}: ${r.text.slice(0, 300)}`);
  return new URL((JSON.parse(r.text) as { data: { inbound_url: string } }).data.inbound_url).pathname;
}

interface Acceptance {
  rate: number;
  accepted: number;
  ms: number[];
  outcomes: Outcomes;
  /** Service CPU per accepted request, all processes of the stack. */
  cpuMsPer: number;
  forwarded: boolean;
}

/** Closed loop on one endpoint, every request signed; then waits until the target has every accepted one. */
async function accept(s: Stack, client: HttpClient, inboundPath: string, prefix: string): Promise<Acceptance> {
  await s.target.reset();
  const post = (id: string) => {
    const body = payload(id);
    return client.send('POST', inboundPath, { body, headers: { 'content-type': 'application/json', 'x-signature': signature(body) } });
  };
  let warmOk = 0;
  await closedLoop({ concurrency: CONCURRENCY, maxCount: 1e9, maxMs: WARMUP_MS, fn: async (i) => { if (isReceived(await post(`${prefix}w${i}`))) warmOk++; } });
  const cpuEnd = s.startCpuPhase();
  const outcomes = new Outcomes();
  const ms: number[] = [];
  const run = await closedLoop({
    concurrency: CONCURRENCY, maxCount: 1e9, maxMs: SECONDS * 1000,
    fn: async (i) => {
      const r = await post(`${prefix}${i}`);
      const ok = isReceived(r);
      outcomes.add(ok ? '200' : String(r.status), ok ? undefined : r.text);
      if (ok) ms.push(r.ms);
    },
  });
  const cpu = cpuEnd();
  // Forwarding (router transform, dispatch) runs behind the 200s: let it finish so the next variant starts clean.
  const total = warmOk + ms.length;
  const deadline = Date.now() + 120_000;
  while ((await s.target.stats()).unique < total && Date.now() < deadline) await sleep(200);
  return {
    rate: ms.length / (run.elapsedMs / 1000), accepted: ms.length, ms, outcomes,
    cpuMsPer: totalMs(cpu) / Math.max(1, ms.length), forwarded: (await s.target.stats()).unique >= total,
  };
}

/** Hook call latency through the engine the service uses (worker threads, limits as configured). */
async function hookLatency(): Promise<{ label: string; one: Summary; eight: Summary }[]> {
  const engine = createScriptEngine();
  try {
    const body = payload('hook');
    const req = { method: 'POST', path: '/in/x', query: '', headers: { 'x-signature': signature(body) }, body, source_ip: '127.0.0.1' };
    const cases = [
      { label: 'verify, crypto.hmac_sha256 over 1 KB', script: NATIVE, hook: 'verify', args: [req, { signing_key: SECRET }] },
      { label: 'verify, HMAC-SHA256 in plain Lua over 1 KB', script: PURE_LUA, hook: 'verify', args: [req, { signing_key: SECRET }] },
      { label: 'transform, 1 KB JSON decoded and encoded', script: NATIVE, hook: 'transform', args: [req] },
      { label: 'on_response (a status check)', script: ON_RESPONSE, hook: 'on_response', args: [{ status: 200, headers: {}, body: 'ok', duration_ms: 1 }, { id: 't', name: '', url: 'http://x', method: 'POST', attempt: 1 }] },
    ];
    const out = [];
    for (const c of cases) {
      const call = async () => {
        const t0 = performance.now();
        const r = await engine.run({ script: c.script, hook: c.hook, args: c.args });
        if (r.error) throw new Error(`${c.label}: ${r.error}`);
        if (c.hook === 'verify' && r.result[0] !== true) throw new Error(`${c.label}: the signature did not verify`);
        return performance.now() - t0;
      };
      for (let i = 0; i < 100; i++) await call();
      const one: number[] = [];
      for (let i = 0; i < HOOK_CALLS; i++) one.push(await call());
      const eight: number[] = [];
      await closedLoop({ concurrency: 8, maxCount: HOOK_CALLS, maxMs: 60_000, fn: async () => eight.push(await call()) });
      out.push({ label: c.label, one: summarize(one), eight: summarize(eight) });
    }
    return out;
  } finally {
    await engine.close();
  }
}

/** TASKS tasks due now, created 16 at a time; CPU of the whole stack from the first create to the last arrival. */
async function executions(s: Stack, script: string | null, prefix: string): Promise<{ cpuMsPer: number; perSecond: number; arrived: number }> {
  await s.target.reset();
  const cpuEnd = s.startCpuPhase();
  const t0 = performance.now();
  await closedLoop({
    concurrency: 16, maxCount: TASKS, maxMs: 120_000,
    fn: (i) => s.api.createTask({ url: `${s.target.url}/body-id`, body: JSON.stringify({ bid: `${prefix}${i}` }), ...(script ? { script } : {}) }),
  });
  const deadline = Date.now() + 120_000;
  while ((await s.target.stats()).unique < TASKS && Date.now() < deadline) await sleep(50);
  const elapsed = performance.now() - t0;
  const cpu = cpuEnd();
  const arrived = (await s.target.stats()).unique;
  return { cpuMsPer: totalMs(cpu) / TASKS, perSecond: arrived / (elapsed / 1000), arrived };
}

/** Plain GET /api/v1/organization at PLAIN_RATE for PLAIN_SECONDS, optionally with one runaway script per second. */
async function plainRequests(s: Stack, runaway: string | null): Promise<{ lat: Summary; failures: number; runaways: Summary | null }> {
  const client = s.client(32);
  const ms: number[] = [];
  let failures = 0;
  const runawayMs: number[] = [];
  let stop = false;
  const runaways = runaway
    ? (async () => {
        while (!stop) {
          const t0 = performance.now();
          const r = await s.api.send('POST', '/api/v1/scripts/test', { body: JSON.stringify({ script: runaway, hook: 'filter', request: { body: 'x' } }) });
          if (r.status !== 200 || !/100 ms/.test(r.text)) failures++;
          runawayMs.push(performance.now() - t0);
          await sleep(Math.max(0, 1000 - (performance.now() - t0)));
        }
      })()
    : Promise.resolve();
  await openLoop({
    rate: PLAIN_RATE, count: PLAIN_RATE * PLAIN_SECONDS, maxMs: 30_000,
    fn: async () => {
      const r = await client.send('GET', '/api/v1/organization');
      if (r.status === 200) ms.push(r.ms);
      else failures++;
    },
  });
  stop = true;
  await runaways;
  return { lat: summarize(ms), failures, runaways: runaway ? summarize(runawayMs) : null };
}

export const lua: Benchmark = {
  name: 'lua',
  title: `Lua scripts: inbound acceptance with an HMAC-verifying, transforming script against none (~1 KB JSON, concurrency ${CONCURRENCY}, ${SECONDS} s each); hook call latency; on_response cost per execution; plain requests while scripts run away`,
  run(ctx) {
    return withStack(
      ctx,
      this.name,
      async (s) => {
        const plainPath = await createEndpoint(s, 'bench-no-script', null);
        const nativePath = await createEndpoint(s, 'bench-hmac-native', NATIVE);
        const luaPath = await createEndpoint(s, 'bench-hmac-pure-lua', PURE_LUA);
        const client = new HttpClient(s.service.url, CONCURRENCY);
        try {
          // Without and with the script twice each, interleaved, so a drift of the machine shows.
          const runs: { label: string; a: Acceptance }[] = [];
          for (const round of [1, 2]) {
            ctx.log(`lua: acceptance round ${round}, no script`);
            runs.push({ label: `no script (round ${round})`, a: await accept(s, client, plainPath, `n${round}-`) });
            ctx.log(`lua: acceptance round ${round}, crypto.hmac_sha256 + transform`);
            runs.push({ label: `verify (crypto.hmac_sha256) + transform (round ${round})`, a: await accept(s, client, nativePath, `s${round}-`) });
          }
          ctx.log('lua: acceptance, HMAC in plain Lua + transform');
          const pure = await accept(s, client, luaPath, 'l-');
          const mean = (xs: Acceptance[]) => xs.reduce((t, x) => t + x.rate, 0) / xs.length;
          const without = mean([runs[0]!.a, runs[2]!.a]);
          const withScript = mean([runs[1]!.a, runs[3]!.a]);
          const ratio = withScript / without;

          ctx.log('lua: hook call latency through the script engine');
          const hooks = await hookLatency();

          ctx.log(`lua: ${TASKS} tasks without, then with, on_response`);
          await executions(s, null, 'warm-'); // the first run pays for JIT and connection warm-up
          const plainTasks = await executions(s, null, 'p-');
          const scriptTasks = await executions(s, ON_RESPONSE, 'o-');

          ctx.log('lua: plain API requests alone, then with one runaway script per second');
          const calm = await plainRequests(s, null);
          const busy = await plainRequests(s, 'function filter(req) while true do end end');
          const find = await plainRequests(s, 'function filter(req) return string.rep("a", 1e5):find(".-.-.-.-b") end');

          const ok = ratio >= GOAL_RATIO;
          const allForwarded = [...runs.map((r) => r.a), pure].every((a) => a.forwarded);
          return {
            name: this.name,
            title: this.title,
            metrics: [
              ...runs.map(({ label, a }) => ({ label: `inbound accepted, ${label}`, value: `${fmt.rate(a.rate)}, p50 / p99 ${p50p99(summarize(a.ms))}; CPU ${fmt.ms(a.cpuMsPer)} per request; ${a.outcomes.describe()}` })),
              { label: 'inbound accepted, verify (HMAC in plain Lua) + transform', value: `${fmt.rate(pure.rate)} = ${fmt.frac(pure.rate / without)} of no script; p50 / p99 ${p50p99(summarize(pure.ms))}; CPU ${fmt.ms(pure.cpuMsPer)} per request` },
              { label: 'with script / without (means of the two rounds)', value: fmt.frac(ratio), goal: `≥ ${GOAL_RATIO}`, ok },
              { label: 'every accepted request forwarded (transformed body, bid kept)', value: allForwarded ? 'yes' : 'no', ok: allForwarded },
              ...hooks.map((h) => ({ label: `hook call p50 / p99: ${h.label}`, value: `${p50p99(h.one)} one at a time; ${p50p99(h.eight)} 8 at once` })),
              { label: `${TASKS} tasks, no script: CPU per execution, rate`, value: `${fmt.ms(plainTasks.cpuMsPer)}; ${fmt.rate(plainTasks.perSecond)} (${plainTasks.arrived} arrived)` },
              { label: `${TASKS} tasks with on_response: CPU per execution, rate`, value: `${fmt.ms(scriptTasks.cpuMsPer)}; ${fmt.rate(scriptTasks.perSecond)} (${scriptTasks.arrived} arrived)` },
              { label: 'on_response overhead per execution (CPU)', value: fmt.ms(scriptTasks.cpuMsPer - plainTasks.cpuMsPer) },
              { label: `plain GET /organization at ${PLAIN_RATE}/s: p50 / p99 / max`, value: `${p50p99(calm.lat)} / ${fmt.ms(calm.lat.max)}; failures ${calm.failures}` },
              { label: 'same, one busy-loop script per second hitting 100 ms', value: `${p50p99(busy.lat)} / ${fmt.ms(busy.lat.max)}; failures ${busy.failures}; runaway answered in p50 / p99 ${p50p99(busy.runaways!)}` },
              { label: 'same, one pathological string.find per second (worker replaced)', value: `${p50p99(find.lat)} / ${fmt.ms(find.lat.max)}; failures ${find.failures}; runaway answered in p50 / p99 ${p50p99(find.runaways!)}` },
            ],
            headline: [
              { label: 'inbound accepted with script / without', value: `${fmt.frac(ratio)} (${fmt.rate(withScript)} vs ${fmt.rate(without)})`, goal: `≥ ${GOAL_RATIO}`, ok },
              { label: 'verify with HMAC, call p50 / p99', value: p50p99(hooks[0]!.one) },
              { label: 'on_response CPU per execution', value: fmt.ms(scriptTasks.cpuMsPer - plainTasks.cpuMsPer) },
              { label: 'plain API p99 alone / with a runaway per second', value: `${fmt.ms(calm.lat.p99)} / ${fmt.ms(busy.lat.p99)} (busy loop), ${fmt.ms(find.lat.p99)} (string.find)` },
            ],
            tables: [],
            notes: [
              `endpoints forward to the bench target; the script endpoint's secret is \`signing_key\`; each request carries X-Signature: sha256=<HMAC-SHA256 of the body>, computed by the bench. Only 200 "received" answers count; after each run the bench waits until the target has every accepted request, so forwarding (the router's transform, dispatch) is done before the next run.`,
              'CPU per request / per execution: all processes of the stack (jetcron, nats-server, Postgres, target) over the measured phase, divided by the count.',
              `hook calls: the engine in the bench process (2 worker threads, the service's limits), ${HOOK_CALLS} calls each after 100 warm-up calls.`,
              `on_response: ${TASKS} tasks due at once, created 16 at a time, from the first create to the last arrival at the target; script: \`${ON_RESPONSE.replace(/\n/g, ' ')}\`.`,
              ...runs.flatMap((r) => r.a.outcomes.examples),
              ...troubleNotes(s.service),
            ],
          };
        } finally {
          await client.close();
        }
      },
      { plan: 'pro' },
    );
  },
};
