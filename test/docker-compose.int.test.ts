/**
 * Validates the production shape: docker-compose.yml against the Compose
 * Specification JSON Schema (the copy the `dclint` package ships, checked with
 * ajv), the NATS node configs under deploy/nats/, and the Dockerfile. No Docker
 * engine is needed. When a local nats-server is installed, each node config is
 * also checked by the real config parser (`nats-server -t`).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, existsSync, mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv } from 'ajv';
import { parse as parseYaml } from 'yaml';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const composePath = path.join(root, 'docker-compose.yml');

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Obj = { [key: string]: Json };

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function obj(v: unknown, what: string): Obj {
  assert.ok(isObj(v), `${what} must be a mapping`);
  return v;
}

// ---------------------------------------------------------------- compose file

/**
 * Compose's variable interpolation (`${VAR:-default}`, `${VAR-default}`,
 * `${VAR}`, `${VAR:?msg}`, `$VAR`, `$$`), applied to values as `docker compose`
 * does before it validates. `missing` collects variables with no default.
 */
function interpolate(value: Json, env: Record<string, string>, missing: Set<string>): Json {
  if (typeof value === 'string') {
    return value.replace(
      /\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)/g,
      (whole, braced: string | undefined, op: string | undefined, arg: string | undefined, bare: string | undefined) => {
        if (whole === '$$') return '$';
        const name = (braced ?? bare)!;
        const set = env[name];
        if (op === ':-') return set ? set : arg!;
        if (op === '-') return set !== undefined ? set : arg!;
        if (set === undefined || (op === ':?' && set === '')) missing.add(name);
        return set ?? '';
      },
    );
  }
  if (Array.isArray(value)) return value.map((v) => interpolate(v, env, missing));
  if (isObj(value)) {
    const out: Obj = {};
    for (const [k, v] of Object.entries(value)) out[k] = interpolate(v, env, missing);
    return out;
  }
  return value;
}

function loadCompose(): { raw: Obj; resolved: Obj; missing: Set<string> } {
  // merge: true resolves the `<<: *anchor` keys the file uses, as Compose does.
  const raw = parseYaml(readFileSync(composePath, 'utf8'), { merge: true }) as unknown;
  const missing = new Set<string>();
  const resolved = interpolate(obj(raw, 'docker-compose.yml') as Json, {}, missing);
  return { raw: obj(raw, 'docker-compose.yml'), resolved: obj(resolved, 'docker-compose.yml'), missing };
}

function composeValidator() {
  const require = createRequire(import.meta.url);
  const dclintDir = path.dirname(require.resolve('dclint/package.json'));
  const schemaPath = path.join(dclintDir, 'schemas', 'compose.schema.json');
  assert.ok(existsSync(schemaPath), `compose-spec schema not found at ${schemaPath}`);
  const schema = JSON.parse(readFileSync(schemaPath, 'utf8')) as Obj;
  // The schema names draft-07 by its https URL; ajv registers draft-07 under
  // the canonical http://…# id. Same meta-schema, so point at the one ajv has.
  assert.match(String(schema.$schema), /draft-07/);
  schema.$schema = 'http://json-schema.org/draft-07/schema#';
  // strict: false because the upstream schema uses union types and
  // type-less patternProperties that ajv's strict mode only warns about.
  const ajv = new Ajv({ allErrors: true, strict: false });
  return ajv.compile(schema);
}

function services(doc: Obj): Obj {
  return obj(doc.services, 'services');
}

function service(doc: Obj, name: string): Obj {
  const s = services(doc)[name];
  return obj(s, `service ${name}`);
}

function commandOf(svc: Obj): string[] {
  const c = svc.command;
  if (typeof c === 'string') return c.split(/\s+/).filter(Boolean);
  assert.ok(Array.isArray(c), 'command must be a list or a string');
  return c.map(String);
}

/** `environment` as a map, whichever of the two forms Compose allows is used. */
function envOf(svc: Obj): Record<string, string | null> {
  const e = svc.environment;
  const out: Record<string, string | null> = {};
  if (Array.isArray(e)) {
    for (const item of e) {
      const s = String(item);
      const i = s.indexOf('=');
      if (i < 0) out[s] = null;
      else out[s.slice(0, i)] = s.slice(i + 1);
    }
  } else if (isObj(e)) {
    for (const [k, v] of Object.entries(e)) out[k] = v === null ? null : String(v);
  }
  return out;
}

function replicasOf(svc: Obj): number {
  const deploy = isObj(svc.deploy) ? svc.deploy : {};
  const r = deploy.replicas ?? svc.scale ?? 1;
  return Number(r);
}

/** Short-syntax volume `source:target[:mode]` or long syntax, as {source, target}. */
function mounts(svc: Obj): Array<{ source: string; target: string; readOnly: boolean }> {
  const vols = Array.isArray(svc.volumes) ? svc.volumes : [];
  return vols.map((v) => {
    if (typeof v === 'string') {
      const [source = '', target = '', mode = ''] = v.split(':');
      return { source, target, readOnly: mode.split(',').includes('ro') };
    }
    const o = obj(v, 'volume');
    return { source: String(o.source ?? ''), target: String(o.target ?? ''), readOnly: o.read_only === true };
  });
}

function dependsOn(svc: Obj): Record<string, string> {
  const d = svc.depends_on;
  const out: Record<string, string> = {};
  if (Array.isArray(d)) for (const n of d) out[String(n)] = 'service_started';
  else if (isObj(d)) for (const [n, v] of Object.entries(d)) out[n] = String(obj(v, `depends_on.${n}`).condition ?? 'service_started');
  return out;
}

// ------------------------------------------------------------ NATS config files

/**
 * A small parser for the nats-server config format (the subset it allows and
 * these files use): `key: value`, `key = value`, `key value`, nested `{}` blocks,
 * `[]` arrays split by newlines or commas, quoted or bare scalars, `#` and `//`
 * comments. Scalars stay strings.
 */
type Conf = string | Conf[] | { [key: string]: Conf };

function parseNatsConf(text: string): { [key: string]: Conf } {
  let i = 0;
  const err = (msg: string): never => {
    const line = text.slice(0, i).split('\n').length;
    throw new Error(`nats conf line ${line}: ${msg}`);
  };
  const skip = (newlines: boolean) => {
    for (;;) {
      const c = text[i];
      if (c === undefined) return;
      if (c === '#' || (c === '/' && text[i + 1] === '/')) {
        while (i < text.length && text[i] !== '\n') i++;
      } else if (c === ' ' || c === '\t' || c === '\r' || c === ';' || (newlines && (c === '\n' || c === ','))) {
        i++;
      } else return;
    }
  };
  const value = (): Conf => {
    skip(false);
    const c = text[i];
    if (c === '{') {
      i++;
      const o = block('}');
      i++;
      return o;
    }
    if (c === '[') {
      i++;
      const arr: Conf[] = [];
      for (;;) {
        skip(true);
        if (text[i] === undefined) err('unterminated array');
        if (text[i] === ']') {
          i++;
          return arr;
        }
        arr.push(value());
      }
    }
    if (c === '"' || c === "'") {
      const end = text.indexOf(c, i + 1);
      if (end < 0) err('unterminated string');
      const s = text.slice(i + 1, end);
      i = end + 1;
      return s;
    }
    const start = i;
    while (i < text.length && !/[\n,\]}#;]/.test(text[i]!)) i++;
    const s = text.slice(start, i).trim();
    if (!s) err('missing value');
    return s;
  };
  const block = (close: string | undefined): { [key: string]: Conf } => {
    const o: { [key: string]: Conf } = {};
    for (;;) {
      skip(true);
      const c = text[i];
      if (c === undefined) {
        if (close) err(`missing "${close}"`);
        return o;
      }
      if (c === close) return o;
      const m = /^[A-Za-z_$][A-Za-z0-9_.$-]*/.exec(text.slice(i));
      if (!m) err(`unexpected ${JSON.stringify(c)}`);
      const key = m![0];
      i += key.length;
      skip(false);
      if (text[i] === ':' || text[i] === '=') i++;
      o[key] = value();
    }
  };
  return block(undefined);
}

function confObj(v: Conf | undefined, what: string): { [key: string]: Conf } {
  assert.ok(typeof v === 'object' && v !== null && !Array.isArray(v), `${what} must be a block`);
  return v;
}

/** A nats duration such as `100ms`, `1s`, `2m` in milliseconds (NaN if not one). */
function durationMs(s: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(s.trim());
  if (!m) return Number.NaN;
  return Number(m[1]) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[m[2] as 'ms' | 's' | 'm' | 'h'];
}

function natsServerVersion(): [number, number] | null {
  const r = spawnSync('nats-server', ['--version'], { encoding: 'utf8' });
  if (r.error || r.status !== 0) return null;
  const m = /v?(\d+)\.(\d+)\.\d+/.exec(r.stdout + r.stderr);
  return m ? [Number(m[1]), Number(m[2])] : null;
}

// ----------------------------------------------------------------------- tests

const NATS_NODES = ['nats-1', 'nats-2', 'nats-3'] as const;
const ROLES = ['api', 'projector', 'scheduler', 'dispatcher', 'notifier'] as const;

test('docker-compose.yml is valid against the Compose Specification schema', () => {
  const validate = composeValidator();
  const { resolved, missing } = loadCompose();
  const ok = validate(resolved);
  assert.ok(ok, `schema errors:\n${JSON.stringify(validate.errors, null, 2)}`);
  assert.deepEqual([...missing], [], 'every ${VAR} in docker-compose.yml needs a default so it starts as it is');
});

test('the schema check is real: it rejects a misspelt key and a bad type', () => {
  const validate = composeValidator();
  const { resolved } = loadCompose();
  const typo = structuredClone(resolved);
  const api = obj(services(typo).api, 'api');
  api.helthcheck = api.healthcheck ?? {};
  delete api.healthcheck;
  assert.equal(validate(typo), false);
  assert.ok(validate.errors?.some((e) => e.keyword === 'additionalProperties' && e.params.additionalProperty === 'helthcheck'));

  const badType = structuredClone(resolved);
  obj(services(badType).postgres, 'postgres').volumes = 'postgres-data:/var/lib/postgresql/data';
  assert.equal(validate(badType), false);
});

test('three NATS 2.10+ nodes, each with its own config file and named volume', () => {
  const { resolved } = loadCompose();
  const topVolumes = obj(resolved.volumes, 'top-level volumes');
  const dataVolumes = new Set<string>();
  for (const node of NATS_NODES) {
    const svc = service(resolved, node);
    const m = /^nats:(\d+)\.(\d+)/.exec(String(svc.image));
    assert.ok(m, `${node}: image should be the official nats image, got ${String(svc.image)}`);
    assert.ok(Number(m[1]) > 2 || (Number(m[1]) === 2 && Number(m[2]) >= 10), `${node}: sync_interval needs nats 2.10+, got ${String(svc.image)}`);

    const cmd = commandOf(svc);
    const cfgArg = cmd.findIndex((a) => a === '--config' || a === '-c');
    assert.ok(cfgArg >= 0 && cmd[cfgArg + 1], `${node}: command must pass --config`);
    const cfgTarget = cmd[cfgArg + 1]!;

    const ms = mounts(svc);
    const cfgMount = ms.find((v) => v.target === cfgTarget);
    assert.ok(cfgMount, `${node}: nothing mounted at ${cfgTarget}`);
    assert.equal(path.normalize(cfgMount.source), path.normalize(`./deploy/nats/${node}.conf`));
    assert.ok(cfgMount.readOnly, `${node}: config should be mounted read-only`);
    assert.ok(existsSync(path.join(root, cfgMount.source)), `${cfgMount.source} is missing`);

    const conf = parseNatsConf(readFileSync(path.join(root, cfgMount.source), 'utf8'));
    const storeDir = String(confObj(conf.jetstream, `${node} jetstream`).store_dir ?? '');
    const dataMount = ms.find((v) => storeDir === v.target || storeDir.startsWith(v.target.replace(/\/?$/, '/')));
    assert.ok(dataMount, `${node}: store_dir ${storeDir} is not on a mounted volume`);
    assert.ok(dataMount.source in topVolumes, `${node}: ${dataMount.source} must be a named volume`);
    assert.ok(!dataVolumes.has(dataMount.source), `${node}: shares volume ${dataMount.source} with another node`);
    dataVolumes.add(dataMount.source);

    assert.ok(isObj(svc.healthcheck), `${node}: needs a healthcheck`);
  }
});

test('each NATS config: server_name, JetStream file storage with sync_interval, routes to the other two', () => {
  for (const node of NATS_NODES) {
    const file = path.join(root, 'deploy', 'nats', `${node}.conf`);
    const conf = parseNatsConf(readFileSync(file, 'utf8'));
    assert.equal(conf.server_name, node, `${node}: server_name`);

    const js = confObj(conf.jetstream, `${node} jetstream`);
    assert.ok(typeof js.store_dir === 'string' && js.store_dir.startsWith('/'), `${node}: jetstream.store_dir must be an absolute path`);
    const sync = js.sync_interval ?? js.sync;
    assert.equal(typeof sync, 'string', `${node}: jetstream.sync_interval must be set`);
    const s = String(sync);
    assert.ok(
      s.toLowerCase() === 'always' || durationMs(s) <= 1000,
      `${node}: sync_interval should be "always" or at most 1s, got ${s}`,
    );

    const cluster = confObj(conf.cluster, `${node} cluster`);
    assert.ok(typeof cluster.name === 'string' && cluster.name, `${node}: cluster.name`);
    const listenPort = /:(\d+)$/.exec(String(cluster.listen ?? cluster.port ?? ''))?.[1];
    assert.ok(listenPort, `${node}: cluster.listen needs a port`);
    assert.ok(Array.isArray(cluster.routes), `${node}: cluster.routes must be a list`);
    const routeHosts = cluster.routes.map((r) => {
      const u = new URL(String(r));
      assert.equal(u.protocol, 'nats:', `${node}: route ${String(r)}`);
      assert.equal(u.port, listenPort, `${node}: route ${String(r)} must use the cluster port ${listenPort}`);
      return u.hostname;
    });
    const others = NATS_NODES.filter((n) => n !== node);
    for (const other of others) assert.ok(routeHosts.includes(other), `${node}: routes must name ${other}`);
    assert.ok(routeHosts.every((h) => h === node || others.includes(h as (typeof others)[number])), `${node}: unknown route in ${routeHosts.join(', ')}`);

    assert.ok(conf.http !== undefined || conf.http_port !== undefined, `${node}: monitoring port (healthcheck uses /healthz)`);
  }
});

test('each NATS config passes the real nats-server config parser', (t) => {
  const version = natsServerVersion();
  if (!version) {
    t.skip('nats-server is not installed: only the structural checks above ran');
    return;
  }
  const modern = version[0] > 2 || (version[0] === 2 && version[1] >= 10);
  const dir = mkdtempSync(path.join(tmpdir(), 'jetcron-natsconf-'));
  try {
    for (const node of NATS_NODES) {
      let text = readFileSync(path.join(root, 'deploy', 'nats', `${node}.conf`), 'utf8');
      // nats-server 2.9 (Debian's) does not know sync_interval and rejects it;
      // check everything else with it. 2.10+ checks the file as it is.
      if (!modern) text = text.replace(/^\s*sync(_interval)?\s*[:=]?.*$/m, '');
      const file = path.join(dir, `${node}.conf`);
      writeFileSync(file, text);
      const r = spawnSync('nats-server', ['-t', '-c', file], { encoding: 'utf8' });
      assert.equal(r.status, 0, `nats-server ${version.join('.')} -t rejects ${node}.conf:\n${r.stdout}${r.stderr}`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('postgres service with a volume and a healthcheck', () => {
  const { resolved } = loadCompose();
  const pg = service(resolved, 'postgres');
  assert.match(String(pg.image), /^postgres:1[6-9]/);
  const data = mounts(pg).find((v) => v.target === '/var/lib/postgresql/data' || v.target === '/var/lib/postgresql');
  assert.ok(data && data.source in obj(resolved.volumes, 'volumes'), 'postgres data must be on a named volume');
  const hc = obj(pg.healthcheck, 'postgres healthcheck');
  assert.ok(JSON.stringify(hc.test).includes('pg_isready'), 'postgres healthcheck uses pg_isready');
});

test('every role runs with its --roles, replicated streams and the shared env', () => {
  const { resolved } = loadCompose();
  const expectedReplicas: Record<(typeof ROLES)[number], number> = {
    api: 2,
    projector: 1,
    scheduler: 2,
    dispatcher: 2,
    notifier: 1,
  };
  const pgEnv = envOf(service(resolved, 'postgres'));

  for (const role of ROLES) {
    const svc = service(resolved, role);
    assert.ok(svc.build !== undefined || typeof svc.image === 'string', `${role}: needs an image or a build`);
    const cmd = commandOf(svc);
    assert.deepEqual(cmd.slice(0, 3), ['node', 'bin/jetcron.mjs', 'serve'], `${role}: command`);
    const r = cmd.indexOf('--roles');
    assert.ok(r >= 0, `${role}: command must pass --roles`);
    assert.equal(cmd[r + 1], role, `${role}: --roles`);
    assert.equal(replicasOf(svc), expectedReplicas[role], `${role}: replicas`);

    const env = envOf(svc);
    assert.equal(env.JETCRON_STREAM_REPLICAS, '3', `${role}: JETCRON_STREAM_REPLICAS`);
    assert.equal(env.JETCRON_METRICS_PORT, '9464', `${role}: JETCRON_METRICS_PORT, so every role can be scraped`);
    const servers = String(env.NATS_URL ?? '').split(',');
    assert.deepEqual(
      servers.map((u) => new URL(u).host).sort(),
      NATS_NODES.map((n) => `${n}:4222`),
      `${role}: NATS_URL must list the three nodes`,
    );
    const db = new URL(String(env.DATABASE_URL ?? ''));
    assert.equal(db.protocol, 'postgres:');
    assert.equal(db.hostname, 'postgres', `${role}: DATABASE_URL host`);
    assert.equal(decodeURIComponent(db.username), pgEnv.POSTGRES_USER, `${role}: DATABASE_URL user`);
    assert.equal(decodeURIComponent(db.password), pgEnv.POSTGRES_PASSWORD, `${role}: DATABASE_URL password`);
    assert.equal(db.pathname.slice(1), pgEnv.POSTGRES_DB, `${role}: DATABASE_URL database`);

    const deps = dependsOn(svc);
    for (const dep of [...NATS_NODES, 'postgres']) {
      assert.equal(deps[dep], 'service_healthy', `${role}: depends_on ${dep} should wait for service_healthy`);
    }
  }

  const api = service(resolved, 'api');
  assert.equal(envOf(api).HOST, '0.0.0.0', 'api: HOST=0.0.0.0 so other containers reach it');
  const hc = JSON.stringify(obj(api.healthcheck, 'api healthcheck').test);
  assert.ok(hc.includes('/healthz'), 'api healthcheck calls /healthz');
});

test('port 8080 is published exactly once and reaches the api service', () => {
  const { resolved } = loadCompose();
  const published: Array<{ service: string; host: string; target: string }> = [];
  for (const [name, s] of Object.entries(services(resolved))) {
    const svc = obj(s, name);
    for (const p of Array.isArray(svc.ports) ? svc.ports : []) {
      if (typeof p === 'string' || typeof p === 'number') {
        const parts = String(p).split(':');
        published.push({ service: name, host: parts.length > 1 ? parts[parts.length - 2]! : '', target: parts[parts.length - 1]! });
      } else {
        const o = obj(p, 'port');
        published.push({ service: name, host: String(o.published ?? ''), target: String(o.target) });
      }
    }
  }
  const http = published.filter((p) => p.host === '8080');
  assert.equal(http.length, 1, `8080 must be published once: ${JSON.stringify(published)}`);
  const front = http[0]!;
  if (front.service !== 'api') {
    // A proxy in front: it must forward to the api service and start after it.
    const svc = service(resolved, front.service);
    assert.ok(commandOf(svc).some((a) => /^(https?:\/\/)?api:8080$/.test(a)), `${front.service} must forward to api:8080`);
    assert.ok(dependsOn(svc).api, `${front.service} must depend on api`);
  } else {
    assert.equal(replicasOf(service(resolved, 'api')), 1, 'a fixed host port on a replicated service clashes');
  }
});

test('Dockerfile: node:24-bookworm-slim, npm ci, serve', () => {
  const text = readFileSync(path.join(root, 'Dockerfile'), 'utf8');
  const froms = [...text.matchAll(/^FROM\s+(\S+)/gim)].map((m) => m[1]);
  assert.ok(froms.length > 0);
  for (const f of froms) assert.equal(f, 'node:24-bookworm-slim');
  assert.match(text, /^RUN\s+npm ci\b/m);
  const cmd = /^CMD\s+(\[.*\])\s*$/m.exec(text);
  assert.ok(cmd, 'CMD in exec form');
  assert.deepEqual(JSON.parse(cmd[1]!), ['node', 'bin/jetcron.mjs', 'serve']);
  // Every service that builds uses this Dockerfile at the repo root.
  const { resolved } = loadCompose();
  for (const [name, s] of Object.entries(services(resolved))) {
    const b = obj(s, name).build;
    if (b === undefined) continue;
    const ctx = typeof b === 'string' ? b : String(obj(b, 'build').context ?? '.');
    assert.equal(path.resolve(root, ctx), root, `${name}: build context`);
  }
});
