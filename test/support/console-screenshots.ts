// Screenshots of the console's pages for the README (docs/console/*.png): a Pro
// organization is filled with tasks, a schedule, monitors in each state and an endpoint
// with events, then each page is captured at 1280×800 (and a few at phone width).
import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, Page } from 'playwright-core';
import { eventually, type Api, type TestService } from './service.ts';

const OUT_DIR = fileURLToPath(new URL('../../docs/console/', import.meta.url));
const DESKTOP = { width: 1280, height: 800 };
const PHONE = { width: 375, height: 812 };

interface ScreenshotOptions {
  svc: TestService;
  browser: Browser;
  targetUrl: string;
  release: () => void;
  signIn: (page: Page, apiKey: string) => Promise<void>;
}

async function seed(api: Api, svcUrl: string, targetUrl: string) {
  const ok = async (res: Promise<{ status: number; body: any }>) => {
    const r = await res;
    if (r.status >= 300) throw new Error(`seeding failed: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body?.data;
  };
  const report = await ok(api('POST', '/tasks', {
    name: 'send weekly report', url: `${targetUrl}/reports/weekly`, method: 'POST',
    headers: { 'X-Team': 'growth' }, body: { week: 42, format: 'pdf' }, retry_attempts: 3,
  }));
  for (const name of ['resize avatar 1881', 'resize avatar 1882', 'sync invoices', 'warm cache']) {
    await ok(api('POST', '/tasks', { name, url: `${targetUrl}/jobs/${encodeURIComponent(name)}`, retry_attempts: 0 }));
  }
  await ok(api('POST', '/tasks', { name: 'charge card (bad route)', url: `${svcUrl}/no-such-page`, method: 'GET', retry_attempts: 0 }));
  await ok(api('POST', '/tasks', { name: 'rebuild search index', url: `${targetUrl}/index`, delay: '6h' }));
  const schedule = await ok(api('POST', '/schedules', { name: 'nightly export', url: `${targetUrl}/export`, cron: '30 2 * * *', timezone: 'Europe/Berlin' }));
  await ok(api('POST', `/schedules/${schedule.id}/trigger`, {}));
  await ok(api('POST', '/schedules', { name: 'every 5 minutes', url: `${targetUrl}/tick`, cron: '*/5 * * * *' }));

  const monitor = (name: string) => ok(api('POST', '/monitors', { name, schedule_type: 'interval', interval_seconds: 86_400, grace_period_seconds: 3_600 }));
  const backups = await monitor('database backup');
  // Runs as runitor sends them: a start and an end with the same rid, the output as the end's body.
  for (let i = 0; i < 4; i++) {
    const rid = randomUUID();
    const headers = { 'User-Agent': 'runitor/v1.3.0 (linux-amd64; +https://bdd.fi/x/runitor)', 'Content-Type': 'text/plain' };
    await fetch(`${backups.ping_url}/start?rid=${rid}`, { method: 'POST', headers });
    await fetch(`${backups.ping_url}${i === 2 ? '/1' : ''}?rid=${rid}`, { method: 'POST', body: i === 2 ? 'pg_dump: error: connection refused' : `backup ${i + 1} done: 3 tables, 41 MB`, headers });
  }
  await fetch(`${backups.ping_url}/log`, { method: 'POST', body: 'rotated old dumps' });
  const cleanup = await monitor('log cleanup');
  await fetch(cleanup.ping_url);
  await fetch(`${cleanup.ping_url}/fail`, { method: 'POST', body: 'disk full' });
  await monitor('certificate renewal');
  const paused = await monitor('staging smoke test');
  await fetch(paused.ping_url);
  await ok(api('POST', `/monitors/${paused.id}/pause`));

  const endpoint = await ok(api('POST', '/endpoints', { name: 'github webhooks', forward_urls: [`${targetUrl}/github`] }));
  await ok(api('POST', '/endpoints', { name: 'stripe events', forward_urls: [`${targetUrl}/stripe`] }));
  const send = (body: string | Uint8Array<ArrayBuffer>, type: string) => fetch(endpoint.inbound_url, { method: 'POST', headers: { 'Content-Type': type, 'X-GitHub-Event': 'push' }, body });
  await send(JSON.stringify({ ref: 'refs/heads/main', repository: { full_name: 'acme/api' }, commits: [{ id: '9f2c1e', message: 'Fix retry jitter' }] }), 'application/json');
  await send(new Uint8Array([0x1f, 0x8b, 0x08, 0x00, 0xde, 0xad, 0xbe, 0xef, 0x00, 0x01, 0x02, 0x03, 0xff, 0xfe]), 'application/octet-stream');
  const events = await eventually(async () => {
    const list = await ok(api('GET', `/endpoints/${endpoint.id}/events`));
    return list.length === 2 && list.every((e: any) => e.executions.length > 0) ? list : null;
  }, 20_000);
  await eventually(async () => {
    const failed = await ok(api('GET', '/executions?status=failed'));
    return failed.length > 0;
  }, 20_000);
  return { report, schedule, monitor: backups, endpoint, event: events[1] };
}

export async function takeScreenshots({ svc, browser, targetUrl, release, signIn }: ScreenshotOptions): Promise<void> {
  mkdirSync(OUT_DIR, { recursive: true });
  release();
  const org = await svc.createOrg('pro');
  const seeded = await seed(org.api, svc.url, targetUrl);
  const execution = (await org.api('GET', `/tasks/${seeded.report.id}`)).body.data.last_execution_id as string;
  await eventually(async () => (await org.api('GET', `/executions/${execution}`)).body.data.status === 'success', 20_000);

  const shoot = async (viewport: { width: number; height: number }, shots: Array<[string, string, string]>, colorScheme: 'light' | 'dark' = 'light') => {
    const context = await browser.newContext({ viewport, colorScheme });
    const page = await context.newPage();
    page.setDefaultTimeout(20_000);
    await page.goto(`${svc.url}/`);
    if (colorScheme === 'light') await page.screenshot({ path: path.join(OUT_DIR, viewport === PHONE ? 'sign-in-phone.png' : 'sign-in.png') });
    await signIn(page, org.apiKey);
    for (const [file, hash, waitFor] of shots) {
      await page.evaluate((h) => {
        location.hash = h;
      }, hash);
      await page.locator(waitFor).first().waitFor();
      await page.locator('.loading').waitFor({ state: 'detached' });
      await page.screenshot({ path: path.join(OUT_DIR, file), fullPage: false });
    }
    await context.close();
  };

  await shoot(DESKTOP, [
    ['overview.png', '#/?hours=1', '.chart canvas'],
    ['executions.png', '#/executions', 'tbody tr'],
    ['execution.png', `#/executions/${execution}`, '.execution-status'],
    ['tasks.png', '#/tasks', 'tbody tr'],
    ['task.png', `#/tasks/${seeded.report.id}`, 'h2'],
    ['task-new.png', '#/tasks/new', 'form'],
    ['schedules.png', '#/schedules', 'tbody tr'],
    ['schedule.png', `#/schedules/${seeded.schedule.id}`, '.next-runs'],
    ['monitors.png', '#/monitors', 'tbody tr'],
    ['monitor.png', `#/monitors/${seeded.monitor.id}`, '.timeline'],
    ['endpoints.png', '#/endpoints', 'tbody tr'],
    ['endpoint.png', `#/endpoints/${seeded.endpoint.id}`, '.endpoint-state'],
    ['inbound-event.png', `#/endpoints/${seeded.endpoint.id}/events/${seeded.event.id}`, '.body-view'],
    ['organization.png', '#/organization', '#webhook-secret'],
  ]);
  await shoot(PHONE, [
    ['overview-phone.png', '#/', '.chart canvas'],
    ['execution-phone.png', `#/executions/${execution}`, '.execution-status'],
  ]);
  await shoot(DESKTOP, [
    ['overview-dark.png', '#/?hours=1', '.chart canvas'],
    ['endpoint-dark.png', `#/endpoints/${seeded.endpoint.id}`, '.endpoint-state'],
  ], 'dark');
}
