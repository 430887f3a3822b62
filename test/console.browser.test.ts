// The web console in a real browser: Debian's Chromium, headless, driven by
// playwright-core against a real service (nats-server, Postgres, the API and the live
// feed). Every wait is for an element or a state, never a fixed sleep.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import Stripe from 'stripe';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { takeScreenshots } from './support/console-screenshots.ts';
import { startTarget } from './support/target.ts';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
// Monitor waits: interval 60 s + grace 300 s → 3.6 s. Nothing here retries.
const SCALE = 0.01;
const WAIT_MS = 20_000;

/** A target that holds each answer until the test lets it go, so a page sees an execution before it ends. */
async function startGatedTarget() {
  let open = false;
  const held: Array<() => void> = [];
  const received: Array<{ method: string; url: string; body: string }> = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ method: req.method!, url: req.url!, body: Buffer.concat(chunks).toString('utf8') });
      const answer = () => {
        res.writeHead(200, { 'Content-Type': 'application/json', 'X-Target': 'gated' });
        res.end(JSON.stringify({ ok: true, n: received.length }));
      };
      if (open) answer();
      else held.push(answer);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received,
    hold: () => void (open = false),
    release() {
      open = true;
      for (const answer of held.splice(0)) answer();
    },
    close: () => new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    }),
  };
}

interface Tab {
  page: Page;
  context: BrowserContext;
  /** Alerts, confirms and prompts the page opened (an XSS would open one). */
  dialogs: string[];
  /** Script errors and CSP violations the page reported. */
  problems: string[];
}

// Without Chromium a developer's run skips this file; CI (which installs it in .ci/run) fails instead.
const skip = existsSync(CHROMIUM) || process.env.CI ? false : `no Chromium at ${CHROMIUM} (apt-get install chromium)`;

describe('web console (Chromium)', { skip }, () => {
  let svc: TestService;
  let browser: Browser;
  let target: Awaited<ReturnType<typeof startGatedTarget>>;
  let org: { orgId: string; apiKey: string; api: Api };
  const tabs: Tab[] = [];

  before(async () => {
    [svc, browser, target] = await Promise.all([
      startTestService({ JETCRON_TIME_SCALE: String(SCALE) }),
      chromium.launch({ executablePath: CHROMIUM, headless: true }),
      startGatedTarget(),
    ]);
    org = await svc.createOrg();
  });
  after(async () => {
    for (const tab of tabs) assert.deepEqual(tab.problems, [], 'no script error or CSP violation on any page');
    await browser?.close();
    await target?.close();
    await svc?.stop();
  });

  async function openConsole(viewport = { width: 1280, height: 800 }): Promise<Tab> {
    const context = await browser.newContext({ viewport });
    const page = await context.newPage();
    page.setDefaultTimeout(WAIT_MS);
    const tab: Tab = { page, context, dialogs: [], problems: [] };
    page.on('dialog', (d) => {
      tab.dialogs.push(`${d.type()}: ${d.message()}`);
      void d.dismiss();
    });
    page.on('pageerror', (err) => tab.problems.push(`pageerror: ${err.message}`));
    page.on('console', (m) => {
      // A refused key is a 401 the browser logs as a failed load: expected in the sign-in test.
      if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) tab.problems.push(`console: ${m.text()}`);
    });
    tabs.push(tab);
    await page.goto(`${svc.url}/`);
    return tab;
  }

  async function signIn(tab: Tab, apiKey: string) {
    await tab.page.getByLabel('API key').fill(apiKey);
    await tab.page.getByRole('button', { name: 'Sign in' }).click();
    await tab.page.getByRole('navigation', { name: 'Main' }).waitFor();
    await tab.page.locator('#live-state[data-state="live"]').waitFor();
  }

  async function go(page: Page, hash: string) {
    await page.evaluate((h) => {
      location.hash = h;
    }, hash);
  }

  /** Marks the document; `stillSame` is true while no reload replaced it. */
  async function markDocument(page: Page) {
    await page.evaluate(() => {
      (window as unknown as { marker: number }).marker = 42;
    });
    return () => page.evaluate(() => (window as unknown as { marker?: number }).marker === 42);
  }

  test('sign in with a key kept in session storage only; a wrong key is refused on its field; sign out', async () => {
    const tab = await openConsole();
    const { page } = tab;
    await page.getByLabel('API key').fill('pk_000000000000000000000000.sk_0000000000000000000000000000000000000000');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('#api-key-err').getByText('not valid').waitFor();
    assert.equal(await page.getByLabel('API key').getAttribute('aria-invalid'), 'true');

    // By keyboard alone: the key field has the focus; Enter signs in.
    await page.getByLabel('API key').fill('');
    await page.keyboard.type(org.apiKey);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
    assert.equal(await page.evaluate(() => sessionStorage.getItem('jetcron.apiKey')), org.apiKey);
    // The new page has the focus; the navigation is just before it (Shift+Tab), and Enter
    // on a link opens its page and moves the focus there.
    await page.waitForFunction(() => document.activeElement?.id === 'main');
    let focused = '';
    for (let i = 0; i < 10 && focused !== 'Tasks'; i++) {
      await page.keyboard.press('Shift+Tab');
      focused = await page.evaluate(() => document.activeElement?.textContent ?? '');
    }
    assert.equal(focused, 'Tasks');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Tasks', level: 1 }).waitFor();
    await page.waitForFunction(() => document.activeElement?.id === 'main');
    assert.deepEqual(await tab.context.cookies(), [], 'no cookie');
    assert.ok(!page.url().includes(org.apiKey.split('.')[1]!), 'the key is not in the URL');

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('API key').waitFor();
    assert.equal(await page.evaluate(() => sessionStorage.getItem('jetcron.apiKey')), null);
    assert.equal(await page.getByRole('navigation', { name: 'Main' }).isVisible(), false);
    await tab.context.close();
  });

  test('a task created in the form runs; its execution shows up and ends live; the attempt is on its page', async () => {
    const tab = await openConsole();
    const { page } = tab;
    await signIn(tab, org.apiKey);
    target.hold();

    // The executions list, open before the task exists, gains its row without a reload.
    await go(page, '#/executions');
    await page.getByRole('heading', { name: 'Executions', level: 1 }).waitFor();
    const sameDocument = await markDocument(page);
    const created = await org.api('POST', '/tasks', { name: 'from-the-api', url: `${target.url}/api-made` });
    assert.equal(created.status, 201);
    await page.getByRole('link', { name: 'from-the-api' }).waitFor();
    assert.ok(await sameDocument(), 'the list changed without a reload');

    await go(page, '#/tasks/new');
    await page.getByLabel('Name').fill('nightly report');
    await page.getByLabel('URL', { exact: true }).fill(`${target.url}/report`);
    await page.getByLabel('Method').selectOption('PUT');
    await page.getByLabel('Body', { exact: true }).fill('{"hello": "world"}');
    await page.getByLabel('Send as JSON').check();
    await page.getByRole('button', { name: 'Create task' }).click();
    await page.getByRole('heading', { name: 'nightly report', level: 1 }).waitFor();

    // Held at the target: the history shows the execution before its outcome.
    const history = page.getByRole('region', { name: 'Executions' });
    await history.locator('.badge', { hasText: /^(pending|running)$/ }).waitFor();
    const sameTaskPage = await markDocument(page);
    target.release();
    await history.locator('.badge', { hasText: /^success$/ }).waitFor();
    assert.ok(await sameTaskPage(), 'the outcome arrived without a reload');
    const sent = target.received.find((r) => r.url === '/report');
    assert.equal(sent?.method, 'PUT');
    assert.deepEqual(JSON.parse(sent!.body), { hello: 'world' });

    await history.getByRole('link', { name: /^exe_/ }).first().click();
    await page.getByRole('heading', { name: /^Execution exe_/, level: 1 }).waitFor();
    const attempts = page.getByRole('region', { name: 'Attempts' });
    const row = attempts.locator('tbody tr');
    assert.equal(await row.count(), 1);
    assert.equal(await row.locator('td').nth(0).textContent(), '1');
    assert.equal(await row.locator('.badge').textContent(), 'success');
    assert.equal(await row.locator('td').nth(2).textContent(), '200');
    await page.getByRole('region', { name: 'Signature headers' }).getByText('X-Jetcron-Signature', { exact: false }).waitFor();
    await page.getByRole('region', { name: 'Response headers' }).getByText('gated').waitFor();
    await page.getByText(`PUT ${target.url}/report`).waitFor();
    await tab.context.close();
  });

  test('a monitor: created in the form, pinged, up, then down after its grace', async () => {
    const tab = await openConsole();
    const { page } = tab;
    await signIn(tab, org.apiKey);
    await go(page, '#/monitors/new');
    await page.getByLabel('Name').fill('backup job');
    await page.getByLabel('Interval (seconds)').fill('60');
    await page.getByLabel('Grace period (seconds)').fill('300');
    await page.getByRole('button', { name: 'Create monitor' }).click();
    await page.getByRole('heading', { name: 'backup job', level: 1 }).waitFor();
    const state = page.locator('.monitor-status .badge');
    assert.equal(await state.textContent(), 'new');

    const pingUrl = await page.getByLabel('Ping URL', { exact: true }).inputValue();
    assert.match(pingUrl, /\/ping\/pm_/);
    const sameDocument = await markDocument(page);
    const res = await fetch(pingUrl, { method: 'POST', body: 'done in 3s' });
    assert.equal(res.status, 200);
    await page.locator('.monitor-status .badge', { hasText: /^up$/ }).waitFor();
    await page.getByRole('region', { name: 'Ping history' }).getByText('done in 3s').waitFor();
    assert.equal(await page.locator('.timeline rect.tick').count(), 1, 'the ping is on the timeline');
    await page.locator('.monitor-status .badge', { hasText: /^down$/ }).waitFor();
    assert.ok(await sameDocument(), 'up and down arrived without a reload');

    await go(page, '#/monitors');
    const listed = page.getByRole('row', { name: /backup job/ });
    assert.equal(await listed.locator('.badge').textContent(), 'down');
    await tab.context.close();
  });

  test('a monitor\'s runs: on the timeline with their durations, charted; each ping\'s kind, exit status and body; why it is down', async () => {
    const m = (await org.api('POST', '/monitors', { name: 'nightly db', schedule_type: 'interval', interval_seconds: 86400, max_duration_seconds: 3600 })).body.data;
    const [a, b] = ['11111111-1111-4111-8111-111111111111', '22222222-2222-4222-8222-222222222222'];
    for (const [suffix, body] of [[`/start?rid=${a}`, ''], [`/start?rid=${b}`, ''], [`/0?rid=${b}`, 'dumped 3 tables'], [`?rid=${a}`, 'all done'], ['/start', ''], ['/3', 'pg_dump: error: connection refused\nretry later']] as const) {
      assert.equal((await fetch(`${m.ping_url}${suffix}`, { method: 'POST', body })).status, 200);
    }
    const tab = await openConsole();
    const { page } = tab;
    await signIn(tab, org.apiKey);
    await go(page, `#/monitors/${m.id}`);
    await page.getByRole('heading', { name: 'nightly db', level: 1 }).waitFor();
    await page.locator('.monitor-status .badge', { hasText: /^down$/ }).waitFor();
    await page.getByRole('note').getByText('exited with a non-zero status').waitFor();
    assert.equal(await page.locator('.monitor-down-reason').textContent(), 'exit_status');
    // Three timed runs, two of them overlapping (two rows), one failed.
    assert.equal(await page.locator('.timeline rect.run').count(), 3);
    assert.equal(await page.locator('.timeline rect.run.fail').count(), 1);
    assert.equal(await page.locator('.timeline rect.tick').count(), 6);
    await page.locator('.runs-chart .uplot canvas').first().waitFor();
    await page.getByText(/^3 timed runs in the last 6 pings/).waitFor();
    const history = page.getByRole('region', { name: 'Ping history' });
    const rows = history.locator('tbody tr');
    assert.equal(await rows.count(), 6);
    const newest = rows.first();
    assert.equal((await newest.locator('td[data-label="Kind"]').textContent())?.trim(), 'exit 3');
    assert.equal(await newest.locator('td[data-label="Exit status"]').textContent(), '3');
    assert.match((await newest.locator('td[data-label="Duration"]').textContent()) ?? '', /ms|s$/);
    await newest.locator('details summary').click();
    await newest.locator('pre').getByText('retry later').waitFor();
    await history.getByText('dumped 3 tables').waitFor();
    assert.equal((await rows.nth(1).locator('td[data-label="Kind"]').textContent())?.trim(), 'start');
    await tab.context.close();
  });

  test('an endpoint: paused and resumed; a request sent to its inbound URL is stored, forwarded and replayed', async () => {
    const tab = await openConsole();
    const { page } = tab;
    await signIn(tab, org.apiKey);
    target.release();
    await go(page, '#/endpoints/new');
    await page.getByLabel('Name').fill('github hooks');
    await page.getByLabel('Forward URLs').fill(`${target.url}/forwarded`);
    await page.getByRole('button', { name: 'Create endpoint' }).click();
    await page.getByRole('heading', { name: 'github hooks', level: 1 }).waitFor();

    await page.getByRole('button', { name: 'Pause' }).click();
    await page.locator('.endpoint-state .badge', { hasText: /^paused$/ }).waitFor();
    const inboundUrl = await page.getByLabel('Inbound URL', { exact: true }).inputValue();
    const forwardedBefore = target.received.filter((r) => r.url === '/forwarded').length;
    const sent = await fetch(inboundUrl, { method: 'POST', headers: { 'Content-Type': 'application/json', 'X-GitHub-Event': 'push' }, body: '{"ref":"refs/heads/main","commits":[1,2]}' });
    assert.equal(sent.status, 200);
    const eventId = ((await sent.json()) as { id: string }).id;
    const events = page.getByRole('region', { name: 'Inbound events' });
    await events.getByRole('link', { name: eventId }).waitFor();
    assert.equal(target.received.filter((r) => r.url === '/forwarded').length, forwardedBefore, 'held while paused');

    await page.getByRole('button', { name: 'Resume' }).click();
    await page.locator('.endpoint-state .badge', { hasText: /^active$/ }).waitFor();
    await events.getByRole('row', { name: new RegExp(eventId) }).getByRole('link', { name: 'success' }).waitFor();
    assert.equal(target.received.filter((r) => r.url === '/forwarded').length, forwardedBefore + 1);

    await events.getByRole('link', { name: eventId }).click();
    await page.getByRole('heading', { name: `Event ${eventId}`, level: 1 }).waitFor();
    // JSON is shown pretty-printed first; the hex view is one press away.
    assert.equal(await page.locator('.body-area pre').textContent(), JSON.stringify({ ref: 'refs/heads/main', commits: [1, 2] }, null, 2));
    await page.getByRole('region', { name: 'Headers as received' }).getByText('push', { exact: true }).waitFor();
    await page.getByRole('button', { name: 'Hex' }).click();
    assert.match((await page.locator('.body-area pre').textContent())!, /^00000000  7b 22 72 65 66/);

    await page.getByRole('button', { name: 'Replay' }).click();
    const replayed = page.locator('.action-result').getByRole('link', { name: /^exe_/ });
    await replayed.waitFor();
    await page.getByRole('region', { name: 'Forwards' }).locator('tbody tr').nth(1).waitFor();
    await replayed.click();
    await page.locator('.execution-status .badge', { hasText: /^success$/ }).waitFor();
    assert.equal(target.received.filter((r) => r.url === '/forwarded').length, forwardedBefore + 2);
    await tab.context.close();
  });

  test('an endpoint\'s verification preset: chosen in the form, its secret typed in a password box and never shown again', async () => {
    const tab = await openConsole();
    const { page } = tab;
    await signIn(tab, org.apiKey);
    target.release();
    const secret = 'whsec_console_stripe_secret';
    await go(page, '#/endpoints/new');
    await page.getByLabel('Name').fill('stripe hooks');
    await page.getByLabel('Forward URLs').fill(`${target.url}/stripe`);
    const secretBox = page.getByLabel('Secret (write-only, never shown again)');
    assert.equal(await secretBox.isVisible(), false, 'no secret without a preset');
    await page.getByLabel('Verify incoming requests').selectOption('stripe');
    assert.equal(await secretBox.getAttribute('type'), 'password');
    assert.equal(await page.getByLabel('Signature header').isVisible(), false, 'the HMAC settings are for Generic HMAC only');
    await secretBox.fill(secret);
    await page.getByRole('button', { name: 'Create endpoint' }).click();
    await page.getByRole('heading', { name: 'stripe hooks', level: 1 }).waitFor();
    await page.locator('dd', { hasText: /^Stripe$/ }).waitFor();
    assert.equal((await page.content()).includes(secret), false, 'the secret is not on the page');

    const inboundUrl = await page.getByLabel('Inbound URL', { exact: true }).inputValue();
    const payload = '{"type":"invoice.paid"}';
    const signed = await fetch(inboundUrl, { method: 'POST', body: payload, headers: { 'Stripe-Signature': Stripe.webhooks.generateTestHeaderString({ payload, secret }) } });
    const unsigned = await fetch(inboundUrl, { method: 'POST', body: payload });
    assert.deepEqual([signed.status, unsigned.status], [200, 403]);

    await page.getByRole('link', { name: 'Edit' }).click();
    await page.getByLabel('Verify incoming requests').waitFor();
    assert.equal(await page.getByLabel('Secret (write-only, never shown again)').inputValue(), '', 'never filled in');
    assert.equal((await page.content()).includes(secret), false);
    // A changed preset needs its secret again: the API's 422 is shown on the field.
    await page.getByLabel('Verify incoming requests').selectOption('hmac');
    await page.getByLabel('Signature header').fill('X-Signature');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.locator('.field.invalid[data-field="verification"] .field-error', { hasText: /verification\.secret/ }).waitFor();
    await tab.context.close();
  });

  test('the API\'s validation error is shown on the field it names', async () => {
    const tab = await openConsole();
    const { page } = tab;
    await signIn(tab, org.apiKey);
    await go(page, '#/schedules/new');
    await page.getByLabel('URL', { exact: true }).fill(`${target.url}/cron`);
    await page.getByLabel('Cron expression').fill('61 * * * *');
    await page.getByRole('button', { name: 'Create schedule' }).click();
    const cron = page.getByLabel('Cron expression');
    await page.locator('.field.invalid[data-field="cron"] .field-error').waitFor();
    assert.equal(await cron.getAttribute('aria-invalid'), 'true');
    assert.match((await page.locator('[data-field="cron"] .field-error').textContent())!, /cron/i);
    assert.equal(await page.locator('.field.invalid').count(), 1, 'only the named field');
    assert.ok(await cron.evaluate((el) => el === document.activeElement), 'focus moves to it');

    await cron.fill('*/5 * * * *');
    await page.getByLabel('Time zone').fill('Mars/Olympus');
    await page.getByRole('button', { name: 'Create schedule' }).click();
    await page.locator('.field.invalid[data-field="timezone"]').waitFor();
    assert.equal(await page.locator('[data-field="cron"] .field-error').isVisible(), false, 'the earlier error is gone');

    await page.getByLabel('Time zone').fill('Europe/Berlin');
    await page.getByRole('button', { name: 'Create schedule' }).click();
    await page.getByRole('heading', { name: 'Next runs' }).waitFor();
    assert.equal(await page.locator('.next-runs li').count(), 5);
    await tab.context.close();
  });

  test('a task named as markup shows as text and runs no script', async () => {
    const name = '<img src=x onerror=alert(1)>';
    const created = await org.api('POST', '/tasks', { name, url: `${target.url}/xss`, delay: '1d' });
    assert.equal(created.status, 201);
    const tab = await openConsole();
    const { page } = tab;
    await signIn(tab, org.apiKey);
    await go(page, '#/tasks');
    await page.getByRole('link', { name, exact: true }).click();
    await page.getByRole('heading', { name, level: 1 }).waitFor();
    assert.equal(await page.locator('main img').count(), 0, 'no element was made from the name');
    await go(page, '#/');
    await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
    await go(page, '#/tasks');
    await page.getByRole('link', { name, exact: true }).waitFor();
    assert.equal(await page.locator('img').count(), 0);
    assert.deepEqual(tab.dialogs, [], 'no dialog opened');
    await tab.context.close();
  });

  test('a second organization sees none of the first one\'s data, live or listed', async () => {
    const other = await svc.createOrg();
    const tab = await openConsole();
    const { page } = tab;
    await signIn(tab, other.apiKey);
    for (const [hash, empty] of [['#/tasks', 'No tasks yet.'], ['#/monitors', 'No monitors yet.'], ['#/endpoints', 'No endpoints yet.'], ['#/schedules', 'No schedules yet.']] as const) {
      await go(page, hash);
      await page.getByText(empty).waitFor();
    }
    await go(page, '#/');
    await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
    const executionCounts = page.getByRole('region', { name: 'Executions, last 24 h' }).locator('.n');
    await executionCounts.first().waitFor();
    assert.deepEqual(await executionCounts.allTextContents(), ['0', '0', '0', '0', '0', '0']);

    // The first organization's work while this one watches its executions list: nothing arrives.
    await go(page, '#/executions');
    await page.getByText('No executions match.').waitFor();
    target.release();
    const theirs = await org.api('POST', '/tasks', { name: 'not-yours', url: `${target.url}/theirs` });
    const mine = await other.api('POST', '/tasks', { name: 'mine', url: `${target.url}/mine` });
    assert.equal(theirs.status, 201);
    assert.equal(mine.status, 201);
    // This organization's own task arrives live; by then the other's would have too.
    await page.getByRole('link', { name: 'mine' }).waitFor();
    assert.equal(await page.getByText('not-yours').count(), 0);
    const direct = await other.api('GET', `/executions/${theirs.body.data.last_execution_id}`);
    assert.equal(direct.status, 404);
    await go(page, `#/executions/${theirs.body.data.last_execution_id}`);
    await page.getByRole('heading', { name: 'Not found', level: 1 }).waitFor();
    await tab.context.close();
  });

  test('flow-control keys: what waits and runs, the limits, paused and resumed from the list', async () => {
    const tab = await openConsole();
    const { page } = tab;
    await signIn(tab, org.apiKey);
    // Paused before its tasks come: they wait, and the page says how many.
    assert.equal((await org.api('POST', '/flow-control/partner-api/pause')).status, 200);
    for (let i = 0; i < 3; i++) {
      const res = await org.api('POST', '/tasks', { url: `${target.url}/flow/${i}`, flow_control: { key: 'partner-api', parallelism: 2, rate: 10, period: '1s' } });
      assert.equal(res.status, 201, JSON.stringify(res.body));
    }
    await go(page, '#/flow-control');
    const row = page.getByRole('row', { name: /partner-api/ });
    await row.getByRole('cell', { name: '2 at once, 10 per 1s' }).waitFor();
    await page.waitForFunction(() => [...document.querySelectorAll('tr')].some((tr) => /partner-api/.test(tr.textContent ?? '') && /\b3\b/.test(tr.cells[2]?.textContent ?? '')));
    await row.locator('.badge', { hasText: /^paused$/ }).waitFor();
    target.release();
    await row.getByRole('button', { name: 'Resume' }).click();
    await row.locator('.badge', { hasText: /^active$/ }).waitFor();
    await eventually(() => target.received.filter((r) => r.url.startsWith('/flow/')).length === 3 || null, WAIT_MS, 50);
    await row.getByRole('button', { name: 'Pause' }).waitFor();
    await tab.context.close();
  });

  test('channels: created in the form, its secret never shown again, "send test" shows what the receiver said, edited, deleted', async () => {
    const tab = await openConsole();
    const { page } = tab;
    await signIn(tab, org.apiKey);
    const secret = 'hooks-console-secret-path-0000000000abcd';
    target.release();
    await go(page, '#/channels');
    await page.getByRole('heading', { name: 'Channels', level: 1 }).waitFor();
    await page.getByRole('link', { name: 'New channel' }).click();
    await page.getByLabel('Kind').selectOption('mattermost');
    await page.getByLabel('Name').fill('ops chat');
    // A bad URL: the API's 422 names config.webhook_url and the form shows it on that field.
    await page.getByLabel('webhook_url *').fill('not a url');
    await page.getByRole('button', { name: 'Create channel' }).click();
    // Once the 422 has come back (the click does not wait for it).
    await eventually(async () => (await page.getByLabel('webhook_url *').getAttribute('aria-invalid')) === 'true' || null, WAIT_MS, 50);
    await page.getByLabel('webhook_url *').fill(`${target.url}/chat/${secret}`);
    await page.getByLabel('Every event').uncheck();
    await page.getByLabel('task.recovered', { exact: true }).uncheck();
    await page.getByRole('button', { name: 'Create channel' }).click();
    await page.getByRole('heading', { name: 'ops chat', level: 1 }).waitFor();
    await page.getByText('***abcd').waitFor();
    assert.ok(!(await page.content()).includes(secret), 'the secret is not on the page');

    await page.getByRole('button', { name: 'Send test' }).click();
    await page.getByText('Delivered: HTTP 200').waitFor();
    const sent = target.received.find((r) => r.url === `/chat/${secret}`);
    assert.match(JSON.parse(sent!.body).text, /test message for channel "ops chat"/);

    // Edit: a new name; the secret's box left empty keeps the stored value.
    await page.getByRole('link', { name: 'Edit' }).click();
    await page.getByLabel('Name').fill('ops alerts');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('heading', { name: 'ops alerts', level: 1 }).waitFor();
    const stored = (await org.api('GET', '/channels')).body.data.find((c: { name: string }) => c.name === 'ops alerts');
    assert.equal(stored.config.webhook_url, '***abcd');
    assert.ok(!stored.events.includes('task.recovered') && stored.events.includes('task.failed'));

    await go(page, '#/channels');
    const row = page.getByRole('row', { name: /ops alerts/ });
    await row.getByText('success').waitFor();
    assert.ok(!(await page.content()).includes(secret));
    await row.getByRole('link', { name: 'ops alerts' }).click();
    await page.getByRole('button', { name: 'Delete' }).click();
    await page.getByRole('button', { name: 'Delete this channel' }).click();
    await page.getByRole('heading', { name: 'Channels', level: 1 }).waitFor();
    await page.getByText(/No channels yet/).waitFor();
    await tab.context.close();
  });

  test('channels picker: a schedule, task, monitor and endpoint notify every channel or the ones checked', async () => {
    const own = await svc.createOrg();
    const made = async (name: string) => (await own.api('POST', '/channels', { kind: 'webhook', name, config: { url: `${target.url}/${name}` } })).body.data;
    const ops = await made('ops');
    const dev = await made('dev');
    const tab = await openConsole();
    const { page } = tab;
    await signIn(tab, own.apiKey);
    const picker = () => page.getByLabel('Notification channels', { exact: true });
    const pick = async (names: string[]) => {
      await picker().selectOption('some');
      // The channels arrive after the form is drawn.
      await page.getByLabel('ops (webhook)').waitFor();
      for (const [name, label] of [['ops', 'ops (webhook)'], ['dev', 'dev (webhook)']] as const) await page.getByLabel(label).setChecked(names.includes(name));
    };
    const forms: Array<{ section: string; fill: () => Promise<void>; submit: string }> = [
      { section: 'schedules', submit: 'Create schedule', fill: async () => {
        await page.getByLabel('URL', { exact: true }).fill(`${target.url}/s`);
        await page.getByLabel('Cron expression').fill('0 3 * * *');
      } },
      { section: 'tasks', submit: 'Create task', fill: async () => {
        await page.getByLabel('URL', { exact: true }).fill(`${target.url}/t`);
      } },
      { section: 'monitors', submit: 'Create monitor', fill: async () => {
        await page.getByLabel('Name', { exact: true }).fill('nightly backup');
        await page.getByLabel('Interval (seconds)').fill('3600');
      } },
      { section: 'endpoints', submit: 'Create endpoint', fill: async () => {
        await page.getByLabel('Name', { exact: true }).fill('hooks');
      } },
    ];
    for (const form of forms) {
      await go(page, `#/${form.section}/new`);
      await picker().waitFor();
      // A new resource notifies every channel unless told otherwise.
      assert.equal(await picker().inputValue(), 'all', form.section);
      await form.fill();
      await pick(['ops']);
      await page.getByRole('button', { name: form.submit }).click();
      await page.getByRole('link', { name: 'Edit' }).waitFor().catch(async (err) => {
        throw new Error(`${form.section}: ${err.message}\n${await page.locator('form').innerText().catch(() => '')}`);
      });
      const id = decodeURIComponent(page.url().split('/').at(-1)!);
      const stored = async () => (await own.api('GET', `/${form.section}/${encodeURIComponent(id)}`)).body.data.channels;
      assert.deepEqual(await stored(), [ops.id], `${form.section}: the channel checked`);

      // Edit: shown as stored; then both, then none, then every channel (null).
      for (const [names, expected] of [[['ops', 'dev'], [ops.id, dev.id]], [[], []]] as Array<[string[], string[]]>) {
        await page.getByRole('link', { name: 'Edit' }).click();
        await picker().waitFor();
        assert.equal(await picker().inputValue(), 'some');
        await page.getByLabel('ops (webhook)').waitFor();
        await pick(names);
        await page.getByRole('button', { name: 'Save' }).click();
        await page.getByRole('link', { name: 'Edit' }).waitFor();
        await eventually(async () => {
          const now: string[] | null = await stored();
          return now !== null && JSON.stringify([...now].sort()) === JSON.stringify([...expected].sort());
        }, WAIT_MS);
      }
      await page.getByRole('link', { name: 'Edit' }).click();
      await picker().selectOption('all');
      await page.getByRole('button', { name: 'Save' }).click();
      await page.getByRole('link', { name: 'Edit' }).waitFor();
      await eventually(async () => (await stored()) === null, WAIT_MS);
    }
    await tab.context.close();
  });

  test('destination health: the organization sets auto_disable_after; a disabled forward URL is enabled from its endpoint, with a replay of what it missed', async () => {
    const own = await svc.createOrg();
    const down = await startTarget(() => ({ status: 500, body: 'down' }));
    try {
      const tab = await openConsole();
      const { page } = tab;
      await signIn(tab, own.apiKey);
      await go(page, '#/organization');
      const setting = page.getByLabel('Disable failing destinations after');
      await setting.fill('1m');
      await page.getByRole('button', { name: 'Save settings' }).click();
      await eventually(async () => (await own.api('GET', '/organization')).body.data.auto_disable_after === '1m', WAIT_MS);

      // At scale 0.01 a minute is 0.6 s: failing that long, and 3 times in a row, disables the URL.
      const ep = (await own.api('POST', '/endpoints', { name: 'flaky hooks', forward_urls: [`${down.url}/hook`], retry_attempts: 0, use_lane: false })).body.data;
      const health = async () => (await own.api('GET', `/endpoints/${ep.id}`)).body.data.forward_health as Array<{ status: string }> | undefined;
      await eventually(async () => {
        if ((await health())?.[0]?.status === 'disabled') return true;
        await fetch(ep.inbound_url, { method: 'POST', body: '{}', headers: { 'Content-Type': 'application/json' } });
        await new Promise((r) => setTimeout(r, 300));
        return false;
      }, WAIT_MS * 2);

      await go(page, `#/endpoints/${ep.id}`);
      await page.getByRole('button', { name: 'Enable' }).waitFor();
      await page.getByLabel(`Replay what ${down.url}/hook missed since`).fill('1h');
      await page.getByRole('button', { name: 'Enable' }).click();
      await page.getByText(/enabled: replaying \d+ missed events, job rjb_/).waitFor();
      assert.equal((await health())?.[0]?.status, 'active');
      const jobs = (await own.api('GET', '/jobs')).body.data as Array<{ kind: string; total: number }>;
      assert.equal(jobs[0]?.kind, 'replay');
      assert.ok(jobs[0]!.total >= 3, `the job replays what the URL missed: ${jobs[0]!.total}`);
      await page.getByRole('button', { name: 'Enable' }).waitFor({ state: 'detached' });
      await tab.context.close();
    } finally {
      await down.close();
    }
  });

  test('failures: dead letters filtered, retry one, retry the selected, "retry all N matching" with the job\'s progress; an endpoint\'s "replay matching"', async () => {
    // An organization of its own: its dead letters are only these. A target that refuses (410) until told.
    const own = await svc.createOrg();
    let refusing = true;
    const failing = await startTarget(() => (refusing ? { status: 410, body: 'gone' } : { status: 200, body: 'ok' }));
    try {
      const tasks = [];
      for (const n of [1, 2, 3]) {
        const res = await own.api('POST', '/tasks', { url: `${failing.url}/dead-${n}`, name: `dead ${n}`, retry_attempts: 0 });
        assert.equal(res.status, 201, JSON.stringify(res.body));
        tasks.push(res.body.data);
      }
      const ep = (await own.api('POST', '/endpoints', { name: 'replayed hooks', forward_urls: [`${failing.url}/hook`], retry_attempts: 0 })).body.data;
      assert.equal((await fetch(ep.inbound_url, { method: 'POST', body: '{"a":1}', headers: { 'Content-Type': 'application/json' } })).status, 200);
      await eventually(async () => (await own.api('GET', '/executions?dead=true')).body.data.length === 4, WAIT_MS);
      refusing = false;

      const tab = await openConsole();
      const { page } = tab;
      await signIn(tab, own.apiKey);
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Failures' }).click();
      await page.getByRole('heading', { name: 'Failures', level: 1 }).waitFor();
      const rows = page.getByRole('region', { name: 'Dead letters' }).locator('tbody tr');
      await eventually(async () => (await rows.count()) === 4, WAIT_MS);

      // Filtered to the tasks' executions.
      await page.getByLabel('Kind').selectOption('task');
      await page.getByRole('button', { name: 'Apply' }).click();
      await eventually(async () => (await rows.count()) === 3, WAIT_MS);

      // Retry one: it leaves the list (no longer a dead letter).
      await page.getByRole('button', { name: `Retry ${tasks[0].last_execution_id}` }).click();
      await page.locator('.action-result').getByRole('link', { name: /^exe_/ }).waitFor();
      await eventually(async () => (await rows.count()) === 2, WAIT_MS);

      // Retry the selected.
      await page.getByLabel(`Select ${tasks[1].last_execution_id}`).check();
      await page.getByRole('button', { name: 'Retry selected' }).click();
      await page.locator('.action-result', { hasText: 'Retried 1 of 1 selected' }).waitFor();
      await eventually(async () => (await rows.count()) === 1, WAIT_MS);

      // Count, then retry all that match as a job, whose progress ends done.
      await page.getByRole('button', { name: 'Count matching dead letters' }).click();
      await page.getByRole('button', { name: 'Retry all 1 matching' }).click();
      await page.locator('.job-progress[data-status="done"]', { hasText: '1 of 1' }).waitFor();
      await page.getByText('No dead letters match.').waitFor();

      // The endpoint's failed event, replayed by "replay matching".
      await go(page, `#/endpoints/${ep.id}`);
      await page.getByRole('heading', { name: 'Replay matching events' }).waitFor();
      await page.getByRole('button', { name: 'Count matching events' }).click();
      await page.getByRole('button', { name: 'Replay all 1 matching' }).click();
      await page.locator('.job-progress[data-status="done"]', { hasText: '1 of 1 (1 replayed' }).waitFor();
      await eventually(async () => failing.received.filter((r) => r.path === '/hook').length === 2, WAIT_MS);
      assert.deepEqual(tab.dialogs, []);
      await tab.context.close();
    } finally {
      await failing.close();
    }
  });

  test('at phone width (375 px) no page is wider than the screen', async () => {
    const tab = await openConsole({ width: 375, height: 812 });
    const { page } = tab;
    await signIn(tab, org.apiKey);
    const tasks = (await org.api('GET', '/tasks')).body.data;
    const endpoints = (await org.api('GET', '/endpoints')).body.data;
    const executions = (await org.api('GET', '/executions?limit=1')).body.data;
    assert.ok(tasks.length && endpoints.length && executions.length, 'the earlier tests left data to show');
    for (const hash of ['#/', '#/executions', `#/executions/${executions[0].id}`, '#/tasks', `#/tasks/${tasks[0].id}`, '#/tasks/new', '#/monitors', `#/endpoints/${endpoints[0].id}`, '#/flow-control', '#/channels', '#/channels/new', '#/organization']) {
      await go(page, hash);
      await page.locator('.page h1').waitFor();
      await page.locator('.loading').waitFor({ state: 'detached' });
      const [scroll, width] = await page.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]);
      assert.ok(scroll <= width, `${hash}: ${scroll} px wide on a ${width} px screen`);
    }
    await tab.context.close();
  });

  test('screenshots of every page (JETCRON_SCREENSHOTS=1)', { skip: process.env.JETCRON_SCREENSHOTS ? false : 'set JETCRON_SCREENSHOTS=1 to write docs/console/*.png' }, async () => {
    await takeScreenshots({ svc, browser, targetUrl: target.url, release: target.release, signIn: async (page, key) => {
      const tab = { page, context: page.context(), dialogs: [], problems: [] };
      await tab.page.goto(`${svc.url}/`);
      await signIn(tab, key);
    } });
  });
});
