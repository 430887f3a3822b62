import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { loadConfig } from '../src/config.ts';
import { serve, type Running } from '../src/runtime/serve.ts';
import { apiClient, eventually, startTestService, type TestService, secondLog } from './support/service.ts';

const RATE = 10;

describe('API rate limit across processes', () => {
  let svc: TestService;
  let second: Running;
  before(async () => {
    svc = await startTestService({ JETCRON_RATE_LIMIT_FREE: String(RATE) });
    const config = loadConfig(
      { NATS_URL: svc.natsUrl, DATABASE_URL: svc.databaseUrl, PORT: '0', JETCRON_RATE_LIMIT_FREE: String(RATE) },
      { roles: 'api', dataDir: mkdtempSync(path.join(os.tmpdir(), 'jetcron-test-api2-')) },
    );
    second = await serve(config, secondLog);
    // Both processes have seen each other's presence: each takes half the burst, so a new
    // organization's first request through either leaves 2 × RATE − 2 (one process: − 1).
    const seesTwo = async (url: () => string) => {
      const { apiKey } = await svc.createOrg();
      return Number((await apiClient(url, apiKey)('GET', '/tasks')).headers.get('ratelimit-remaining')) === 2 * RATE - 2;
    };
    await eventually(async () => (await seesTwo(() => svc.url)) && (await seesTwo(() => second.url!)), 30_000, 100);
  });
  after(async () => {
    await second.stop();
    await svc.stop();
  });

  test('two API processes together allow the organization one burst, not two', async () => {
    const { apiKey } = await svc.createOrg();
    const a = apiClient(() => svc.url, apiKey);
    const b = apiClient(() => second.url!, apiKey);
    const t0 = Date.now();
    const results = await Promise.all(Array.from({ length: 60 }, (_, i) => (i % 2 ? a : b)('GET', '/tasks')));
    const elapsed = (Date.now() - t0) / 1000;
    const allowed = results.filter((r) => r.status === 200).length;
    const limited = results.filter((r) => r.status === 429);
    // Burst is 2× the rate (20) for the whole organization, plus what refills meanwhile.
    assert.ok(allowed >= 2 * RATE - 2, `allowed ${allowed}`);
    assert.ok(allowed <= 2 * RATE + Math.ceil(elapsed * RATE) + 2, `allowed ${allowed} in ${elapsed}s`);
    assert.ok(limited.length > 0);
    assert.equal(limited[0]!.headers.get('ratelimit-limit'), String(2 * RATE));
    assert.ok(Number(limited[0]!.headers.get('retry-after')) >= 1);
  });
});
