// Notification channels (issue 38): the API, each kind's request as its vendor documents
// it (checked by a real receiver on 127.0.0.1), the notifications that reach them, one
// incident per failure for PagerDuty and Opsgenie, and secrets that never come back.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { after, before, describe, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { SUBJECTS } from '../streams/subjects.ts';
import { connectNats, type Nats } from '../src/nats/connection.ts';
import { notificationRecords, notifierIdle } from './support/positions.ts';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { startHangingTarget, startSmtp } from './support/smtp.ts';
import { startTarget, type ReceivedRequest } from './support/target.ts';

// Notification retries (5 s, 20 s) become 50 ms and 200 ms; a monitor's day stays long enough.
const SCALE = 0.01;

// The Adaptive Cards library of Microsoft, as its bundle (its ES modules do not load in Node).
const AdaptiveCards = createRequire(import.meta.url)('adaptivecards/dist/adaptivecards.js') as {
  AdaptiveCard: new () => { parse(json: unknown, ctx: unknown): void; validateProperties(): { validationEvents: Array<{ message: string }> } };
  SerializationContext: new () => { eventCount: number; getEventAt(i: number): { message: string } };
};

/** The problems Microsoft's Adaptive Cards library finds in a card (unknown elements, missing properties). */
function cardProblems(card: unknown): string[] {
  const c = new AdaptiveCards.AdaptiveCard();
  const ctx = new AdaptiveCards.SerializationContext();
  c.parse(card, ctx);
  const problems: string[] = [];
  for (let i = 0; i < ctx.eventCount; i++) problems.push(ctx.getEventAt(i).message);
  return [...problems, ...c.validateProperties().validationEvents.map((e) => e.message)];
}

// Secrets that must never come back: each long and unlike anything else in a response.
const SECRETS = {
  slack: 'hooks-slack-T000-B000-XXXXXXXXXXXXXXXXXXXXslk1',
  mattermost: 'hooks-mattermost-secretpathXXXXXmm22',
  google: 'hooks-gchat-key-AIzaSyXXXXXXXXXXXXgch3',
  discord: 'hooks-discord-1234567890-XXXXXXXXXXXXdsc4',
  teams: 'hooks-teams-workflow-sig-XXXXXXXXXXXXtms5',
  bot: '123456789:AAFakeTelegramBotTokenXXXXXXXXXtg66',
  ntfy: 'tk_ntfyaccesstokenXXXXXXXXXXXXXXnt77',
  pd: 'R0UT1NGKEYpagerdutyXXXXXXXXXXXXpd88',
  og: 'eb243592-faa2-4ba7-a551-1afdf565c889og99',
  poApp: 'azGDORePK8gMaC0QOYAMyEEuzJnyUiXXpoA1',
  poUser: 'uQiRzpo4DXghDmr9QzzfQu27cmVRsGXXpoU2',
  gotify: 'AGotifyAppTokenXXXXXXXXXXXXXXgtf3',
} as const;

const json = (r: ReceivedRequest) => JSON.parse(r.body);

describe('notification channels', () => {
  let svc: TestService;
  let nats: Nats;
  let smtp: Awaited<ReturnType<typeof startSmtp>>;
  let vendor: Awaited<ReturnType<typeof startTarget>>;
  const logs: string[] = [];
  /** Every API answer this file read, as text: no secret may appear in any. */
  const answers: string[] = [];

  before(async () => {
    smtp = await startSmtp();
    // One receiver stands in for every vendor: each channel's URL names its own path.
    vendor = await startTarget((r) => (r.path.startsWith('/telegram/') ? { status: 200, body: '{"ok":true,"result":{}}' } : { status: r.path.includes('/pd/') ? 202 : 200, body: '{}' }));
    svc = await startTestService({ JETCRON_TIME_SCALE: String(SCALE), SMTP_URL: smtp.url }, { log: (m) => logs.push(m) });
    nats = await connectNats(svc.natsUrl, 'channels test');
  });
  after(async () => {
    await nats.close();
    await svc.stop();
    await vendor.close();
    await smtp.close();
  });

  /** An API client that keeps every answer's text. */
  const recording = (api: Api): Api => async (...args) => {
    const res = await api(...args);
    answers.push(JSON.stringify(res.body));
    return res;
  };
  async function org() {
    const o = await svc.createOrg();
    return { ...o, api: recording(o.api) };
  }

  /** Each kind with a config whose URLs point at the receiver, and what its test send must look like there. */
  const kinds = () => ({
    slack: { webhook_url: `${vendor.url}/slack/${SECRETS.slack}` },
    mattermost: { webhook_url: `${vendor.url}/mattermost/${SECRETS.mattermost}` },
    google_chat: { webhook_url: `${vendor.url}/gchat/${SECRETS.google}` },
    discord: { webhook_url: `${vendor.url}/discord/${SECRETS.discord}` },
    teams: { webhook_url: `${vendor.url}/teams/${SECRETS.teams}` },
    telegram: { bot_token: SECRETS.bot, chat_id: -1001234567890, api_url: `${vendor.url}/telegram` },
    ntfy: { server_url: `${vendor.url}/ntfy/`, topic: 'jetcron-alerts', token: SECRETS.ntfy },
    pagerduty: { routing_key: SECRETS.pd, api_url: `${vendor.url}/pd` },
    opsgenie: { api_key: SECRETS.og, region: 'eu', api_url: `${vendor.url}/og` },
    pushover: { app_token: SECRETS.poApp, user_key: SECRETS.poUser, api_url: `${vendor.url}/po` },
    gotify: { server_url: `${vendor.url}/gotify`, app_token: SECRETS.gotify },
    webhook: { url: `${vendor.url}/webhook/in` },
    email: { to: 'oncall@example.com' },
  });

  const since = (n: number) => vendor.received.slice(n);
  async function createChannel(api: Api, body: Record<string, unknown>) {
    const res = await api('POST', '/channels', body);
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body.data;
  }

  test('create, read, change and delete; secrets write-only and masked; the errors name the field', async () => {
    const o = await org();
    const created = await createChannel(o.api, { kind: 'telegram', name: 'ops chat', config: kinds().telegram });
    assert.match(created.id, /^chn_[0-9a-z]+$/);
    assert.deepEqual(created.config, { bot_token: `***${SECRETS.bot.slice(-4)}`, chat_id: '-1001234567890', api_url: `${vendor.url}/telegram` });
    assert.equal(created.events, null);
    assert.equal(created.last_delivery, null);
    assert.deepEqual((await o.api('GET', `/channels/${created.id}`)).body.data, created);
    assert.deepEqual((await o.api('GET', '/channels')).body.data.map((c: { id: string }) => c.id), [created.id]);

    // PUT changes what it names: a new chat keeps the stored token; events narrowed.
    const put = await o.api('PUT', `/channels/${created.id}`, { config: { chat_id: '@jetcron_alerts' }, events: ['task.failed', 'monitor.down'] });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    assert.equal(put.body.data.config.chat_id, '@jetcron_alerts');
    assert.equal(put.body.data.config.bot_token, `***${SECRETS.bot.slice(-4)}`);
    assert.equal(put.body.data.name, 'ops chat');
    assert.deepEqual(put.body.data.events, ['task.failed', 'monitor.down']);
    // A new kind takes its whole config: what it needs and has not been given is named.
    const toSlack = await o.api('PUT', `/channels/${created.id}`, { kind: 'slack' });
    assert.equal(toSlack.status, 422);
    assert.equal(toSlack.body.error.field, 'config.webhook_url');
    const slack = await o.api('PUT', `/channels/${created.id}`, { kind: 'slack', config: kinds().slack });
    assert.equal(slack.status, 200, JSON.stringify(slack.body));
    assert.deepEqual(slack.body.data.config, { webhook_url: `***${SECRETS.slack.slice(-4)}` });

    const refusals: Array<[unknown, number, string | null]> = [
      [{ kind: 'carrier-pigeon', name: 'x', config: {} }, 422, 'kind'],
      [{ kind: 'slack', name: 'x', config: {} }, 422, 'config.webhook_url'],
      [{ kind: 'slack', name: 'x', config: { webhook_url: 'ftp://example.com/x' } }, 422, 'config.webhook_url'],
      [{ kind: 'telegram', name: 'x', config: { bot_token: SECRETS.bot, chat_id: 'not a chat' } }, 422, 'config.chat_id'],
      [{ kind: 'opsgenie', name: 'x', config: { api_key: SECRETS.og, region: 'mars' } }, 422, 'config.region'],
      [{ kind: 'ntfy', name: 'x', config: { topic: 't', colour: 'red' } }, 422, 'config.colour'],
      [{ kind: 'email', name: 'x', config: { to: 'nobody' } }, 422, 'config.to'],
      [{ kind: 'slack', name: 'x', config: kinds().slack, events: ['task.exploded'] }, 422, 'events[0]'],
      [{ kind: 'slack', config: kinds().slack }, 422, 'name'],
    ];
    for (const [body, status, field] of refusals) {
      const res = await o.api('POST', '/channels', body);
      assert.equal(res.status, status, `${JSON.stringify(body)}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error.field, field, JSON.stringify(body));
    }
    assert.equal((await o.api('PUT', `/channels/${created.id}`, { config: { webhook_url: 'not a url' } })).body.error.field, 'config.webhook_url');

    // Another organization's channel is not found, nor is a deleted one.
    const other = await org();
    assert.equal((await other.api('GET', `/channels/${created.id}`)).status, 404);
    assert.equal((await other.api('PUT', `/channels/${created.id}`, { name: 'mine' })).status, 404);
    assert.equal((await other.api('POST', `/channels/${created.id}/test`)).status, 404);
    assert.equal((await o.api('DELETE', `/channels/${created.id}`)).status, 204);
    assert.equal((await o.api('GET', `/channels/${created.id}`)).status, 404);
    assert.deepEqual((await o.api('GET', '/channels')).body.data, []);

    // The log holds the secrets only sealed.
    const m = await nats.jsm.direct.getMessage('EVENTS', { last_by_subj: SUBJECTS.channels(o.orgId) });
    const stored = new TextDecoder().decode(m!.data);
    for (const secret of [SECRETS.bot, SECRETS.slack]) assert.ok(!stored.includes(secret), 'a secret in the clear in the log');
  });

  test("each kind's test message is its vendor's documented request; last_delivery records it", async () => {
    const o = await org();
    const ids: Record<string, string> = {};
    for (const [kind, config] of Object.entries(kinds())) ids[kind] = (await createChannel(o.api, { kind, name: `${kind} channel`, config })).id;

    const test = async (kind: string) => {
      const before = vendor.received.length;
      const res = await o.api('POST', `/channels/${ids[kind]}/test`);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.data.ok, true, `${kind}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.data.error, null);
      return { got: since(before), res: res.body.data };
    };
    const linkTo = (id: string) => `${svc.url}/#/channels/${id}`;
    const postJson = (r: ReceivedRequest, path: string) => {
      assert.equal(r.method, 'POST');
      assert.equal(r.path, path);
      assert.match(String(r.headers['content-type']), /^application\/json/);
      return json(r);
    };

    {
      const { got, res } = await test('slack');
      assert.equal(res.status_code, 200);
      const body = postJson(got[0]!, `/slack/${SECRETS.slack}`);
      assert.match(body.text, /test message for channel "slack channel"/);
      assert.equal(body.blocks[0].type, 'section');
      assert.equal(body.blocks[0].text.type, 'mrkdwn');
      assert.ok(body.blocks[1].elements[0].text.includes(`<${linkTo(ids.slack!)}|Open in jetcron>`));
    }
    {
      const body = postJson((await test('mattermost')).got[0]!, `/mattermost/${SECRETS.mattermost}`);
      assert.deepEqual(Object.keys(body), ['text']);
      assert.ok(body.text.includes(`[Open in jetcron](${linkTo(ids.mattermost!)})`));
    }
    {
      const r = (await test('google_chat')).got[0]!;
      const body = postJson(r, `/gchat/${SECRETS.google}`);
      assert.equal(r.headers['content-type'], 'application/json; charset=UTF-8');
      assert.deepEqual(Object.keys(body), ['text']);
      assert.ok(body.text.includes(`<${linkTo(ids.google_chat!)}|Open in jetcron>`));
    }
    {
      const body = postJson((await test('discord')).got[0]!, `/discord/${SECRETS.discord}`);
      assert.match(body.content, /test message/);
      assert.equal(body.embeds.length, 1);
      assert.equal(body.embeds[0].url, linkTo(ids.discord!));
      assert.equal(typeof body.embeds[0].color, 'number');
      assert.ok(!Number.isNaN(Date.parse(body.embeds[0].timestamp)));
      assert.deepEqual(body.allowed_mentions, { parse: [] });
    }
    {
      const body = postJson((await test('teams')).got[0]!, `/teams/${SECRETS.teams}`);
      assert.equal(body.type, 'message');
      assert.equal(body.attachments.length, 1);
      const [attachment] = body.attachments;
      assert.equal(attachment.contentType, 'application/vnd.microsoft.card.adaptive');
      assert.equal(attachment.content.type, 'AdaptiveCard');
      assert.deepEqual(cardProblems(attachment.content), [], 'the Adaptive Card parses and validates');
      assert.equal(attachment.content.actions[0].url, linkTo(ids.teams!));
    }
    {
      const body = postJson((await test('telegram')).got[0]!, `/telegram/bot${SECRETS.bot}/sendMessage`);
      assert.equal(body.chat_id, -1001234567890);
      assert.ok(body.text.endsWith(`\n${linkTo(ids.telegram!)}`));
      assert.equal(body.parse_mode, undefined);
    }
    {
      const r = (await test('ntfy')).got[0]!;
      assert.equal(r.method, 'POST');
      assert.equal(r.path, '/ntfy/jetcron-alerts');
      assert.match(r.body, /^jetcron: a test message/);
      assert.equal(r.headers.title, 'Test message for "ntfy channel"');
      assert.equal(r.headers.priority, 'default');
      assert.equal(r.headers.tags, 'information_source,test');
      assert.equal(r.headers.click, linkTo(ids.ntfy!));
      assert.equal(r.headers.authorization, `Bearer ${SECRETS.ntfy}`);
    }
    {
      // A test opens its own incident and resolves it at once.
      const { got, res } = await test('pagerduty');
      assert.equal(res.status_code, 202);
      const [trigger, resolve] = got.map((r) => postJson(r, '/pd/v2/enqueue'));
      assert.equal(got.length, 2);
      assert.equal(trigger.routing_key, SECRETS.pd);
      assert.equal(trigger.event_action, 'trigger');
      assert.equal(trigger.payload.severity, 'info');
      assert.equal(typeof trigger.payload.summary, 'string');
      assert.equal(typeof trigger.payload.source, 'string');
      assert.deepEqual(resolve, { routing_key: SECRETS.pd, event_action: 'resolve', dedup_key: trigger.dedup_key });
    }
    {
      const { got } = await test('opsgenie');
      assert.equal(got.length, 2);
      const create = postJson(got[0]!, '/og/v2/alerts');
      assert.equal(got[0]!.headers.authorization, `GenieKey ${SECRETS.og}`);
      assert.ok(create.message.length <= 130);
      assert.equal(create.alias, `jetcron-test-${ids.opsgenie}`);
      postJson(got[1]!, `/og/v2/alerts/${encodeURIComponent(create.alias)}/close?identifierType=alias`);
      assert.equal(got[1]!.headers.authorization, `GenieKey ${SECRETS.og}`);
    }
    {
      const r = (await test('pushover')).got[0]!;
      assert.equal(r.method, 'POST');
      assert.equal(r.path, '/po/1/messages.json');
      assert.equal(r.headers['content-type'], 'application/x-www-form-urlencoded');
      const form = new URLSearchParams(r.body);
      assert.equal(form.get('token'), SECRETS.poApp);
      assert.equal(form.get('user'), SECRETS.poUser);
      assert.match(form.get('message')!, /test message/);
      assert.equal(form.get('url'), linkTo(ids.pushover!));
      assert.equal(form.get('priority'), '0');
    }
    {
      const r = (await test('gotify')).got[0]!;
      const body = postJson(r, '/gotify/message');
      assert.equal(r.headers['x-gotify-key'], SECRETS.gotify);
      assert.equal(typeof body.priority, 'number');
      assert.equal(body.extras['client::notification'].click.url, linkTo(ids.gotify!));
    }
    {
      const org = (await o.api('GET', '/organization')).body.data;
      const r = (await test('webhook')).got[0]!;
      const body = postJson(r, '/webhook/in');
      assert.equal(body.event, 'test');
      assert.equal(body.text, body.content);
      new Webhook(org.webhook_secret).verify(r.body, r.headers as Record<string, string>);
    }
    {
      await test('email');
      const mail = await eventually(async () => smtp.mails.find((m) => m.to.includes('oncall@example.com')));
      assert.equal(mail.subject, '[jetcron] Test message for channel "email channel"');
    }

    // Every test counts as the channel's last delivery.
    const listed = (await o.api('GET', '/channels')).body.data as Array<{ kind: string; last_delivery: { ok: boolean; at: string } | null }>;
    assert.equal(listed.length, Object.keys(kinds()).length);
    for (const c of listed) assert.equal(c.last_delivery?.ok, true, c.kind);

    // A receiver that refuses: the answer says so, and so does last_delivery.
    vendor.setResponder((r) => (r.path.startsWith('/slack/') ? { status: 403, body: 'invalid_token' } : { status: 200 }));
    try {
      const refused = await o.api('POST', `/channels/${ids.slack}/test`);
      assert.deepEqual(refused.body.data, { ok: false, status_code: 403, error: 'HTTP 403' });
      const c = (await o.api('GET', `/channels/${ids.slack}`)).body.data;
      assert.equal(c.last_delivery.ok, false);
      assert.equal(c.last_delivery.status_code, 403);
    } finally {
      vendor.setResponder((r) => ({ status: r.path.includes('/pd/') ? 202 : 200, body: '{}' }));
    }
  });

  test("a failure reaches the channels that hear it: the resource's channels and each channel's events choose", async () => {
    const o = await org();
    const hook = await startTarget();
    const failing = await startTarget(() => ({ status: 500 }));
    try {
      assert.equal((await o.api('PUT', '/organization', { notification_webhook_url: `${hook.url}/org` })).status, 200);
      const all = await createChannel(o.api, { kind: 'mattermost', name: 'all', config: { webhook_url: `${hook.url}/all/${SECRETS.mattermost}` } });
      const recoveries = await createChannel(o.api, { kind: 'slack', name: 'recoveries', config: { webhook_url: `${hook.url}/recoveries/${SECRETS.slack}` }, events: ['task.recovered'] });
      const named = await createChannel(o.api, { kind: 'discord', name: 'named', config: { webhook_url: `${hook.url}/named/${SECRETS.discord}` } });

      // Every channel (null), then one named channel, then none ([]).
      const everyone = (await o.api('POST', '/tasks', { name: 'nightly-report', url: failing.url, retry_attempts: 0 })).body.data;
      assert.equal(everyone.channels, null);
      const onlyNamed = (await o.api('POST', '/tasks', { name: 'only-named', url: failing.url, retry_attempts: 0, channels: [named.id] })).body.data;
      assert.deepEqual(onlyNamed.channels, [named.id]);
      const nobody = (await o.api('POST', '/tasks', { name: 'nobody', url: failing.url, retry_attempts: 0, channels: [] })).body.data;
      const refused = await o.api('POST', '/tasks', { url: failing.url, channels: ['slack'] });
      assert.equal(refused.status, 422);
      assert.equal(refused.body.error.field, 'channels[0]');

      const tasks = [everyone, onlyNamed, nobody];
      // Each task's failure: the organization webhook (as before) and its channels.
      await eventually(async () => hook.received.filter((r) => r.path === '/org').length === 3);
      await notifierIdle(svc.natsUrl, o.orgId);
      const to = (prefix: string) => hook.received.filter((r) => r.path.startsWith(prefix));
      const text = (r: ReceivedRequest) => (json(r).text ?? json(r).content) as string;
      assert.deepEqual(to('/all/').map(text).map((t) => /"(.*?)"/.exec(t)![1]).sort(), ['nightly-report']);
      assert.deepEqual(to('/named/').map((r) => /"(.*?)"/.exec(json(r).content)![1]).sort(), ['nightly-report', 'only-named']);
      assert.equal(to('/recoveries/').length, 0, 'a channel of task.recovered only hears no failure');

      // The line: the resource's name, the event, the status code, the time; the link to its page.
      const line = text(to('/all/')[0]!);
      assert.match(line, /Task "nightly-report" failed: HTTP 500 .*\[task\.failed, \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\]/);
      assert.ok(line.includes(`[Open in jetcron](${svc.url}/#/tasks/${everyone.id})`), line);

      // Delivery records name the channel; each is the channel's last_delivery.
      const records = await eventually(async () => {
        const d = await notificationRecords(nats, o.orgId, tasks[0].last_execution_id);
        return d.length === 3 ? d : null;
      });
      assert.deepEqual(records.map((e) => e.data.channel_id ?? e.data.channel).sort(), [all.id, named.id, 'org_webhook'].sort());
      const shown = (await o.api('GET', `/channels/${all.id}`)).body.data;
      assert.equal(shown.last_delivery.ok, true);
      assert.equal(shown.last_delivery.status_code, 200);

      // The recovery: heard by the recoveries channel too.
      failing.setResponder(() => ({ status: 200 }));
      assert.equal((await o.api('POST', `/tasks/${everyone.id}/trigger`)).status, 202);
      const rec = await eventually(async () => to('/recoveries/')[0]);
      assert.match(json(rec).text, /nightly-report.*recovered.*\[task\.recovered/);
    } finally {
      await hook.close();
      await failing.close();
    }
  });

  test('a monitor down and up again is one PagerDuty incident and one Opsgenie alert, opened then resolved and closed', async () => {
    const o = await org();
    const pd = await startTarget(() => ({ status: 202, body: '{"status":"success","message":"Event processed"}' }));
    const og = await startTarget(() => ({ status: 202, body: '{"result":"Request will be processed"}' }));
    try {
      await createChannel(o.api, { kind: 'pagerduty', name: 'pager', config: { routing_key: SECRETS.pd, api_url: `${pd.url}/pagerduty` } });
      await createChannel(o.api, { kind: 'opsgenie', name: 'genie', config: { api_key: SECRETS.og, api_url: og.url } });
      const m = (await o.api('POST', '/monitors', { name: 'db-backup', schedule_type: 'interval', interval_seconds: 86_400, grace_period_seconds: 3600 })).body.data;
      assert.equal((await fetch(m.ping_url)).status, 200);
      assert.equal((await fetch(`${m.ping_url}/fail`)).status, 200);
      const trigger = json(await eventually(async () => pd.received[0]));
      const created = og.received[0] ?? await eventually(async () => og.received[0]);
      assert.equal(pd.received[0]!.path, '/pagerduty/v2/enqueue');
      assert.equal(trigger.event_action, 'trigger');
      assert.equal(trigger.dedup_key, m.id);
      assert.equal(trigger.payload.severity, 'error');
      assert.equal(trigger.payload.class, 'monitor.down');
      assert.match(trigger.payload.summary, /Monitor "db-backup" is down: the job signalled a failure/);
      assert.equal(trigger.links[0].href, `${svc.url}/#/monitors/${m.id}`);
      assert.equal(created.path, '/v2/alerts');
      assert.equal(json(created).alias, m.id);
      assert.equal(created.headers.authorization, `GenieKey ${SECRETS.og}`);

      assert.equal((await fetch(m.ping_url)).status, 200);
      const resolve = json(await eventually(async () => pd.received[1]));
      assert.deepEqual(resolve, { routing_key: SECRETS.pd, event_action: 'resolve', dedup_key: m.id });
      const closed = await eventually(async () => og.received[1]);
      assert.equal(closed.path, `/v2/alerts/${m.id}/close?identifierType=alias`);
      assert.equal(closed.headers.authorization, `GenieKey ${SECRETS.og}`);
      await notifierIdle(svc.natsUrl, o.orgId);
      assert.equal(pd.received.length, 2);
      assert.equal(og.received.length, 2);
    } finally {
      await pd.close();
      await og.close();
    }
  });

  test('a channel that hangs or answers 500 delays no other channel and no execution', async () => {
    const o = await org();
    const hanging = await startHangingTarget();
    const down = await startTarget(() => ({ status: 500 }));
    const fine = await startTarget();
    const target = await startTarget(() => ({ status: 500 }));
    try {
      await createChannel(o.api, { kind: 'slack', name: 'hangs', config: { webhook_url: `${hanging.url}/hook/${SECRETS.slack}` } });
      const failing = await createChannel(o.api, { kind: 'gotify', name: 'fails', config: { server_url: down.url, app_token: SECRETS.gotify } });
      await createChannel(o.api, { kind: 'mattermost', name: 'fine', config: { webhook_url: `${fine.url}/hook/${SECRETS.mattermost}` } });
      // Ten tasks failing at once: ten deliveries to a receiver that never answers.
      const tasks = await Promise.all(Array.from({ length: 10 }, (_, i) => o.api('POST', '/tasks', { name: `t-${i}`, url: target.url, retry_attempts: 0 })));
      await eventually(async () => hanging.received >= 10, 30_000);
      // The working channel has them all while the hanging one still holds every request.
      await eventually(async () => fine.received.length === 10, 30_000);
      assert.equal(hanging.received, 10);
      // The failing channel: three tries each (now, 5 s, 20 s scaled), then given up, recorded.
      const first = tasks[0]!.body.data;
      const failed = await eventually(async () => (await notificationRecords(nats, o.orgId, first.last_execution_id)).find((e) => e.data.channel_id === failing.id && e.type === 'NotificationFailed'), 30_000);
      assert.equal(failed.data.attempts, 3);
      assert.equal(failed.data.status_code, 500);
      // Executions go on while the hanging channel holds its requests (a new task's success notifies no one).
      const next = (await o.api('POST', '/tasks', { name: 'next', url: `${fine.url}/run`, retry_attempts: 0 })).body.data;
      const done = await eventually(async () => {
        const e = (await o.api('GET', `/executions/${next.last_execution_id}`)).body.data;
        return e.status === 'success' ? e : null;
      });
      assert.equal(done.status, 'success');
      assert.equal(hanging.received, 10, 'the hanging requests are still open');
      assert.ok(!(await notificationRecords(nats, o.orgId, first.last_execution_id)).some((e) => e.data.channel_kind === 'slack'), 'no hanging delivery has ended yet');
    } finally {
      await hanging.close();
      await down.close();
      await fine.close();
      await target.close();
    }
  });

  test("no channel's secret appears in a response or a log line", () => {
    assert.ok(answers.length > 50);
    assert.ok(logs.length > 0);
    for (const secret of Object.values(SECRETS)) {
      assert.ok(!answers.some((a) => a.includes(secret)), `a response holds ${secret}`);
      assert.ok(!logs.some((l) => l.includes(secret)), `a log line holds ${secret}`);
    }
  });
});
