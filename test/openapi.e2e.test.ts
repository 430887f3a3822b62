import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { Ajv2020, type ErrorObject } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { Express } from 'express';
import { loadConfig } from '../src/config.ts';
import { createApp } from '../src/http/app.ts';
import type { ApiDeps } from '../src/http/context.ts';
import { newId, type IdPrefix } from '../src/lib/ids.ts';
import { registeredRoutes } from './support/express-routes.ts';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { startTarget } from './support/target.ts';

// The schema spec.openapis.org publishes as https://spec.openapis.org/oas/3.1/schema/2022-10-07;
// test/fixtures/README.md says where this copy comes from and how it differs.
const OAS_SCHEMA = JSON.parse(readFileSync(new URL('./fixtures/openapi-3.1-schema.json', import.meta.url), 'utf8')) as { $id: string };

// ajv-formats is CommonJS; under NodeNext its default export arrives wrapped.
const addFormats = ((addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ?? addFormatsModule) as unknown as (a: Ajv2020) => Ajv2020;

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'] as const;

/**
 * Registered by the app but outside the API the document describes, each for a reason.
 * `/in/<slug>` (inbound webhooks) is not here because it is no express route: the
 * HTTP server hands it to the inbound receiver before express sees it.
 */
const OUTSIDE_THE_SPEC = new Map([
  ['GET /healthz', 'operations: readiness for load balancers and orchestrators'],
  ['GET /livez', 'operations: liveness'],
  ['GET /metrics', 'operations: Prometheus text, not JSON'],
  // Healthchecks-compatible: HEAD, GET or POST of /ping/<token>[/<signal>] or /ping/<ping_key>/<slug>[/<signal>].
  ...['GET', 'HEAD', 'POST'].flatMap((m) => [
    [`${m} /ping/{first}`, 'monitor ping URL: the token is the credential, no API key'],
    [`${m} /ping/{first}/{second}`, 'a signal (start, fail, log, exit status) on a token, or a ping key and a slug'],
    [`${m} /ping/{first}/{second}/{third}`, 'a signal on a ping key and a slug'],
  ] as const),
  ['GET /', 'the web console\'s page (HTML)'],
  ['GET /console/*', 'the web console\'s modules, styles and vendored libraries'],
  ['GET /asyncapi.json', 'the event catalogue (AsyncAPI 3.0, docs/analysts.md): the events, not the HTTP API'],
]);

type Parameter = { name: string; in: string; required?: boolean };
type ParameterOrRef = Parameter | { $ref: string };

interface Operation {
  method: string;
  /** As documented, relative to the server URL: `/tasks/{id}`. */
  path: string;
  /** The path item's parameters, which every operation under it shares. */
  shared: ParameterOrRef[];
  spec: {
    parameters?: ParameterOrRef[];
    requestBody?: { required?: boolean };
    responses: Record<string, { content?: Record<string, unknown> }>;
  };
}

/** An operation whose success is a stream that stays open (the live feed): its answer has no end to wait for. */
const isStream = (op: Operation) => Object.values(op.spec.responses).some((r) => r.content?.['text/event-stream']);

/** The status and content type of a streaming operation's answer; the stream is then dropped. */
async function openStream(url: string, apiKey: string): Promise<{ status: number; type: string | null; body: unknown }> {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), 20_000);
  try {
    const res = await fetch(url, { headers: { Authorization: `Bearer ${apiKey}` }, signal: abort.signal });
    // An error answer ends; a stream does not, so only its head is read.
    const body = res.ok ? null : await res.json();
    return { status: res.status, type: res.headers.get('content-type'), body };
  } finally {
    clearTimeout(timer);
    abort.abort();
  }
}

type PathItem = { parameters?: ParameterOrRef[] } & { [method in (typeof METHODS)[number]]?: Operation['spec'] };

type Document = {
  servers: Array<{ url: string }>;
  paths: Record<string, PathItem>;
  components: { schemas: Record<string, object>; parameters?: Record<string, Parameter> };
};

function operations(doc: Document): Operation[] {
  return Object.entries(doc.paths).flatMap(([path, item]) =>
    METHODS.filter((m) => item[m]).map((m) => ({ method: m.toUpperCase(), path, shared: item.parameters ?? [], spec: item[m]! })));
}

/** An operation's parameters, its path item's included, with `$ref`s to `components.parameters` resolved. */
function parametersOf(doc: Document, op: Operation): Parameter[] {
  return [...op.shared, ...(op.spec.parameters ?? [])].map((p) => {
    if (!('$ref' in p)) return p;
    const target = doc.components.parameters?.[p.$ref.replace('#/components/parameters/', '')];
    assert.ok(target, `${op.method} ${op.path}: ${p.$ref} does not resolve`);
    return target;
  });
}

function describeErrors(errors: ErrorObject[] | null | undefined): string {
  return (errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message} (${e.schemaPath} ${JSON.stringify(e.params)})`).join('\n');
}

/**
 * The route table createApp builds. No request ever reaches this copy (the live
 * service answers those below), so its dependencies are inert stand-ins: only the
 * routes it registers are read. Config is real because createApp reads it at once.
 */
function routeTableApp(): Express {
  const inert: object = new Proxy(function inert() {}, {
    get: (_t, key) => (key === 'then' ? undefined : inert),
    apply: () => inert,
  });
  const config = loadConfig({}, { dataDir: '/nonexistent' });
  const deps = new Proxy({}, { get: (_t, key) => (key === 'config' ? config : inert) }) as ApiDeps;
  return createApp(deps, () => {});
}

/** The answer express's catch-all gives a path no route matches, as opposed to a resource that is not there. */
const isRouteMissing = (res: { status: number; body: any }) =>
  res.status === 404 && res.body?.error?.message === 'Not found' && res.body.error.field === null;

describe('OpenAPI document', () => {
  let svc: TestService;
  let target: Awaited<ReturnType<typeof startTarget>>;
  let api: Api;
  let apiKey: string;
  let doc: Document;

  before(async () => {
    target = await startTarget();
    svc = await startTestService();
    ({ api, apiKey } = await svc.createOrg('pro'));
    // Served without an API key.
    const res = await fetch(`${svc.url}/api/v1/openapi.json`, { signal: AbortSignal.timeout(20_000) });
    assert.equal(res.status, 200);
    doc = (await res.json()) as Document;
  });
  after(async () => {
    await svc?.stop();
    await target?.close();
  });

  test('is valid against the official OpenAPI 3.1 schema', () => {
    assert.equal(OAS_SCHEMA.$id, 'https://spec.openapis.org/oas/3.1/schema/2022-10-07');
    // Not strict: ajv's strict mode lints schema authoring, which the official schema
    // was not written for. Its warnings are kept, so a format left unchecked still fails.
    const warnings: unknown[] = [];
    const ajv = new Ajv2020({ allErrors: true, strict: false, logger: { log: () => {}, warn: (...m: unknown[]) => warnings.push(m), error: console.error } });
    addFormats(ajv);
    // The OAS schema's own format for content-type keys: an RFC 9110 media range.
    const token = "[!#$%&'*+.^_`|~0-9A-Za-z-]+";
    ajv.addFormat('media-range', new RegExp(`^${token}/${token}(\\s*;\\s*${token}=(${token}|"[^"]*"))*$`));
    const validate = ajv.compile(OAS_SCHEMA);
    assert.deepEqual(warnings, []);
    assert.ok(validate(doc), describeErrors(validate.errors));
    // The check bites: a response without its description, a parameter without its `in`.
    const broken = structuredClone(doc) as any;
    delete broken.paths['/tasks'].get.responses['200'].description;
    assert.equal(validate(broken), false);
    const noIn = structuredClone(doc) as any;
    delete noIn.paths['/executions'].get.parameters[0].in;
    assert.equal(validate(noIn), false);
  });

  test('its component schemas are valid JSON Schema 2020-12 (the OAS 3.1 schema does not look inside them)', () => {
    const ajv = new Ajv2020({ allErrors: true, strict: false });
    for (const [name, schema] of Object.entries(doc.components.schemas)) {
      assert.ok(ajv.validateSchema(schema), `${name}:\n${describeErrors(ajv.errors)}`);
    }
  });

  test('describes an endpoint\'s verification preset: its types, its write-only secret', () => {
    for (const name of ['CreateEndpoint', 'UpdateEndpoint']) {
      const v = (doc.components.schemas[name] as any).properties.verification.anyOf[0];
      assert.deepEqual(v.properties.type.enum, ['standard-webhooks', 'stripe', 'github', 'shopify', 'hmac'], name);
      assert.equal(v.properties.secret.writeOnly, true, name);
      assert.match(v.description, /403/);
    }
  });

  test('every $ref resolves inside the document', () => {
    const refs: string[] = [];
    const collect = (node: unknown): void => {
      if (Array.isArray(node)) node.forEach(collect);
      else if (node && typeof node === 'object') {
        for (const [k, v] of Object.entries(node)) {
          if (k === '$ref' && typeof v === 'string') refs.push(v);
          else collect(v);
        }
      }
    };
    collect(doc);
    assert.ok(refs.length > 0);
    for (const ref of new Set(refs)) {
      assert.match(ref, /^#\//, `${ref} points outside the document`);
      const found = ref.slice(2).split('/').reduce<unknown>((node, part) =>
        (node as Record<string, unknown> | undefined)?.[part.replace(/~1/g, '/').replace(/~0/g, '~')], doc);
      assert.ok(found !== undefined, `${ref} does not resolve`);
    }
  });

  // A rule of the specification that its JSON Schema cannot express.
  test('every path template names a required path parameter, and every path parameter is in the template', () => {
    for (const op of operations(doc)) {
      const inTemplate = [...op.path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!).sort();
      const declared = parametersOf(doc, op).filter((p) => p.in === 'path');
      assert.deepEqual(declared.map((p) => p.name).sort(), inTemplate, `${op.method} ${op.path}`);
      for (const p of declared) assert.equal(p.required, true, `${op.method} ${op.path}: path parameter ${p.name} must be required`);
    }
  });

  test('its server URL is where the API answers', () => {
    assert.deepEqual(doc.servers.map((s) => s.url), [`${svc.url}/api/v1`]);
  });

  test('documents every route the app registers under /api/v1, and registers every route it documents', () => {
    const base = new URL(doc.servers[0]!.url).pathname;
    const routes = registeredRoutes(routeTableApp());
    const inApi = new Set(routes.filter((r) => r.path.startsWith(`${base}/`)).map((r) => `${r.method} ${r.path.slice(base.length)}`));
    const outside = routes.filter((r) => !r.path.startsWith(`${base}/`)).map((r) => `${r.method} ${r.path}`);
    const documented = new Set(operations(doc).map((op) => `${op.method} ${op.path}`));
    assert.ok(inApi.size > 30, `the route walk found only ${inApi.size} API routes`);
    assert.deepEqual([...inApi].filter((r) => !documented.has(r)), [], 'registered, not documented');
    assert.deepEqual([...documented].filter((r) => !inApi.has(r)), [], 'documented, not registered');
    assert.deepEqual(outside.sort(), [...OUTSIDE_THE_SPEC.keys()].sort(),
      'routes outside the API changed: document them, or list them in OUTSIDE_THE_SPEC with the reason');
    assert.ok(!routes.some((r) => r.path.startsWith('/in/')), 'inbound URLs are answered before express');
  });

  describe('on a live service', () => {
    const LANE = 'openapi-lane';
    const ids: Record<string, string> = {};
    let eventId = '';

    /** Request bodies the API accepts, one per documented operation that requires one; an optional body is left out. */
    const bodies = (): Record<string, unknown> => ({
      'POST /tasks': { url: `${target.url}/task`, delay: '1h' },
      'PUT /tasks/{id}': { name: 'renamed' },
      'POST /tasks/batch': { lane: LANE, tasks: [{ url: `${target.url}/batch` }], delay: '1h' },
      'POST /schedules': { url: `${target.url}/schedule`, cron: '0 0 1 1 *' },
      'PUT /schedules/{id}': { name: 'renamed' },
      'POST /monitors': { name: 'openapi monitor', schedule_type: 'interval', interval_seconds: 3600 },
      'PUT /monitors/{id}': { name: 'renamed' },
      'POST /endpoints': { name: 'openapi endpoint', forward_urls: [`${target.url}/forward`] },
      'PUT /endpoints/{id}': { name: 'renamed' },
      'PUT /sync': {},
      'POST /scripts/test': { script: 'function filter(req) return true end', hook: 'filter', request: { body: '{}' } },
      'PUT /organization': { notify_on_failure: false },
      'POST /channels': { kind: 'webhook', name: 'openapi channel', config: { url: `${target.url}/channel` } },
      'PUT /channels/{id}': { name: 'renamed' },
      // Matches nothing: a job of an empty set, done at once.
      'POST /executions/retry': { filter: { error: 'openapi: no such error' } },
      'POST /endpoints/{id}/events/replay': { filter: { method: 'TRACE' } },
      // Active already: enabled as it is, no job.
      'POST /endpoints/{id}/forwards/enable': { url: `${target.url}/forward` },
    });
    /** Values for required query parameters, by name. */
    const queries: Record<string, string> = { lane: LANE };

    const RESOURCE_PREFIX: Record<string, IdPrefix> = { 'flow-control': 'evt', tasks: 'tsk', schedules: 'sch', monitors: 'mon', endpoints: 'ep', executions: 'exe', channels: 'chn', jobs: 'rjb' };

    const urlOf = (op: Operation, idFor: (resource: string) => string, event: string) => {
      const resource = op.path.split('/')[1]!;
      const path = op.path.replace('{id}', () => idFor(resource)).replace('{key}', () => idFor(resource)).replace('{event_id}', event);
      assert.doesNotMatch(path, /[{}]/, `${op.method} ${op.path}: no value for a path parameter`);
      const required = parametersOf(doc, op).filter((p) => p.in === 'query' && p.required);
      const query = new URLSearchParams(required.map((p) => {
        assert.ok(queries[p.name], `${op.method} ${op.path}: give the required query parameter ${p.name} a value`);
        return [p.name, queries[p.name]!];
      }));
      return required.length > 0 ? `${path}?${query}` : path;
    };
    const bodyOf = (op: Operation) => {
      if (!op.spec.requestBody?.required) return undefined;
      const key = `${op.method} ${op.path}`;
      assert.ok(key in bodies(), `${key}: add a request body to the test`);
      return bodies()[key];
    };
    // Deletes go last, so every other operation finds its resources.
    const inCallOrder = (ops: Operation[]) => [...ops.filter((op) => op.method !== 'DELETE'), ...ops.filter((op) => op.method === 'DELETE')];

    before(async () => {
      const create = async (path: string) => {
        const res = await api('POST', path, bodies()[`POST ${path}`]);
        assert.equal(res.status, 201, JSON.stringify(res.body));
        return res.body.data as { id: string; inbound_url?: string };
      };
      ids.tasks = (await create('/tasks')).id;
      const keyed = await api('POST', '/tasks', { url: 'https://example.com/keyed', delay: '1d', flow_control: { key: 'openapi key/1', parallelism: 2 } });
      assert.equal(keyed.status, 201, JSON.stringify(keyed.body));
      ids['flow-control'] = encodeURIComponent('openapi key/1');
      ids.schedules = (await create('/schedules')).id;
      ids.monitors = (await create('/monitors')).id;
      const endpoint = await create('/endpoints');
      ids.endpoints = endpoint.id;
      ids.channels = (await create('/channels')).id;
      const trigger = await api('POST', `/tasks/${ids.tasks}/trigger`);
      assert.equal(trigger.status, 202, JSON.stringify(trigger.body));
      ids.executions = trigger.body.data.execution_id;
      // Finished, so that its retry is accepted.
      await eventually(async () => ['success', 'failed'].includes((await api('GET', `/executions/${ids.executions}`)).body.data?.status), 30_000);
      const job = await api('POST', '/executions/retry', bodies()['POST /executions/retry']);
      assert.equal(job.status, 202, JSON.stringify(job.body));
      ids.jobs = job.body.data.id;
      const received = await fetch(endpoint.inbound_url!, { method: 'POST', body: '{"hello":1}', signal: AbortSignal.timeout(20_000) });
      assert.equal(received.status, 200);
      eventId = ((await received.json()) as { id: string }).id;
      // The inbound receiver writes no read-your-writes mark: wait for the projection.
      await eventually(async () => (await api('GET', `/endpoints/${ids.endpoints}/events/${eventId}`)).status === 200, 30_000);
    });

    test('every documented operation answers its documented success status', async () => {
      const failures: string[] = [];
      const streams: string[] = [];
      for (const op of inCallOrder(operations(doc))) {
        const documented = Object.keys(op.spec.responses).filter((code) => /^2\d\d$/.test(code));
        if (isStream(op)) {
          assert.equal(op.method, 'GET', `${op.path}: a stream is read with GET`);
          const res = await openStream(`${svc.url}/api/v1${urlOf(op, (r) => ids[r]!, eventId)}`, apiKey);
          streams.push(`${op.method} ${op.path}`);
          if (!documented.includes(String(res.status))) failures.push(`${op.method} ${op.path}: ${res.status} (documented ${documented.join(', ')}) ${JSON.stringify(res.body)}`);
          else if (!res.type?.startsWith('text/event-stream')) failures.push(`${op.method} ${op.path}: answered ${res.type}, documented text/event-stream`);
          continue;
        }
        const res = await api(op.method, urlOf(op, (r) => ids[r]!, eventId), bodyOf(op));
        if (!documented.includes(String(res.status))) failures.push(`${op.method} ${op.path}: ${res.status} (documented ${documented.join(', ')}) ${JSON.stringify(res.body)}`);
      }
      assert.deepEqual(failures, []);
      assert.deepEqual(streams, ['GET /live']);
    });

    test('with unknown ids, a path answers that the resource is not found, never that the route is', async () => {
      const missing = await api('GET', `/tasks/${ids.tasks}/no-such-route`);
      assert.ok(isRouteMissing(missing), JSON.stringify(missing.body));
      const failures: string[] = [];
      // A key is no stored resource: pausing one that no task named yet is allowed (what comes later waits).
      const withParams = operations(doc).filter((op) => op.path.includes('{') && op.path !== '/flow-control/{key}/pause');
      assert.ok(withParams.length > 10);
      for (const op of inCallOrder(withParams)) {
        const res = await api(op.method, urlOf(op, (r) => newId(RESOURCE_PREFIX[r]!), newId('evt')), bodyOf(op));
        if (res.status !== 404 || isRouteMissing(res)) failures.push(`${op.method} ${op.path}: ${res.status} ${JSON.stringify(res.body)}`);
      }
      assert.deepEqual(failures, []);
    });
  });
});
