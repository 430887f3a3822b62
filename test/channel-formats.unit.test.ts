// Each vendor's format, checked against the vendor's own definitions: Slack's Block Kit
// types (@slack/types), Discord's webhook body (discord-api-types), Telegram's sendMessage
// parameters (@grammyjs/types), PagerDuty's Events API v2 payload (@pagerduty/pdjs) at
// compile time (`npm run typecheck`), and Teams' Adaptive Card by Microsoft's library at
// run time. The e2e test (channels.e2e.test.ts) checks the requests as a receiver sees them.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { describe, test } from 'node:test';
import type { KnownBlock } from '@slack/types';
import type { RESTPostAPIWebhookWithTokenJSONBody } from 'discord-api-types/v10';
import type { Opts } from '@grammyjs/types';
import type { EventPayloadV2 } from '@pagerduty/pdjs/build/src/events.js';
import { channelMessage, testMessage, type ChannelMessage } from '../src/notifier/channels/message.ts';
import type { NotifySource } from '../src/notifier/message.ts';
import { slackPayload } from '../src/notifier/channels/slack.ts';
import { discordPayload } from '../src/notifier/channels/discord.ts';
import { telegram, telegramPayload } from '../src/notifier/channels/telegram.ts';
import { pagerduty, pagerdutyResolve, pagerdutyTrigger } from '../src/notifier/channels/pagerduty.ts';
import { opsgenie } from '../src/notifier/channels/opsgenie.ts';
import { ntfy } from '../src/notifier/channels/ntfy.ts';
import { teamsCard } from '../src/notifier/channels/teams.ts';
import { pushover } from '../src/notifier/channels/pushover.ts';
import { redactor } from '../src/notifier/channels/send.ts';

const AdaptiveCards = createRequire(import.meta.url)('adaptivecards/dist/adaptivecards.js') as {
  AdaptiveCard: new () => { parse(json: unknown, ctx: unknown): void; validateProperties(): { validationEvents: Array<{ message: string }> } };
  SerializationContext: new () => { eventCount: number; getEventAt(i: number): { message: string } };
};

const ROOT = 'https://jetcron.example.com';
const AT = '2026-12-06T10:00:05.000Z';
const PREFIX = { task: 'tsk', schedule: 'sch', monitor: 'mon', endpoint: 'ep' } as const;
const source = (type: NotifySource['type'], extra: Partial<NotifySource> = {}): NotifySource => ({
  type, id: `${PREFIX[type]}_01abcdefgh`, org_id: 'org_1', name: 'nightly <report> & @everyone', url: type === 'task' || type === 'schedule' ? 'https://example.com/run' : null,
  notify_on_failure: null, notify_on_recovery: null, on_failure_url: null, on_recovery_url: null, ...extra,
});
const execution = { id: 'exe_01abc', status: 'failed', status_code: 503, error_message: 'HTTP 503', attempt: 3, scheduled_for: AT, finished_at: AT };

const MESSAGES: Record<string, ChannelMessage> = {
  'task.failed': channelMessage({ source: source('task'), transition: 'failed', execution, at: AT, rootUrl: ROOT }),
  'task.recovered': channelMessage({ source: source('task'), transition: 'recovered', execution: { ...execution, status: 'success', status_code: 200, error_message: null }, at: AT, rootUrl: ROOT }),
  'monitor.down': channelMessage({ source: source('monitor', { down: { down_reason: 'exit_status', exit_status: 3 } }), transition: 'failed', execution: null, at: AT, rootUrl: ROOT }),
  'schedule.disabled': channelMessage({ source: source('schedule'), transition: 'disabled', execution, at: AT, rootUrl: ROOT }),
  'endpoint.disabled': channelMessage({ source: source('endpoint'), transition: 'disabled', execution: null, at: AT, rootUrl: ROOT }),
  test: testMessage({ id: 'chn_01abcdefgh', name: 'ops', kind: 'slack' }, AT, ROOT),
};

describe('the one line and the link', () => {
  test('name, event, status code or down reason, time; the console page of the resource', () => {
    const failed = MESSAGES['task.failed']!;
    assert.equal(failed.line, 'jetcron: Task "nightly <report> & @everyone" failed: HTTP 503 after 3 attempts (https://example.com/run) [task.failed, 2026-12-06 10:00:05 UTC]');
    assert.equal(failed.link, `${ROOT}/#/tasks/tsk_01abcdefgh`);
    assert.equal(failed.incident_key, 'tsk_01abcdefgh');
    assert.match(MESSAGES['monitor.down']!.line, /Monitor ".*" is down: the job exited with status 3 \[monitor\.down, 2026-12-06 10:00:05 UTC\]$/);
    assert.equal(MESSAGES['monitor.down']!.down_reason, 'exit_status');
    assert.equal(MESSAGES['monitor.down']!.link, `${ROOT}/#/monitors/mon_01abcdefgh`);
  });

  test('schedule.disabled and endpoint.disabled have a message of their own, a failure to pagers', () => {
    const s = MESSAGES['schedule.disabled']!;
    assert.equal(s.event, 'schedule.disabled');
    assert.equal(s.severity, 'failure');
    assert.match(s.line, /Schedule ".*" was disabled after failing again and again; the last: HTTP 503 .*\[schedule\.disabled, /);
    assert.equal(MESSAGES['endpoint.disabled']!.event, 'endpoint.disabled');
    assert.equal(MESSAGES['endpoint.disabled']!.title, 'Endpoint "nightly <report> & @everyone" was disabled');
    assert.equal(s.payload.event, 'schedule.disabled');
  });
});

describe("the vendors' own definitions", () => {
  for (const [name, m] of Object.entries(MESSAGES)) {
    test(`${name}: Slack Block Kit, Discord webhook body, Telegram sendMessage, PagerDuty event, Adaptive Card`, () => {
      const slack = slackPayload(m);
      const blocks: KnownBlock[] = slack.blocks;
      assert.equal(blocks.length, 2);
      // Slack's mrkdwn controls are escaped: a name is never a link or a mention.
      assert.ok(!JSON.stringify(blocks[0]).includes('<report>'));

      const discord: RESTPostAPIWebhookWithTokenJSONBody = discordPayload(m);
      assert.ok(discord.content!.length <= 2000);
      assert.deepEqual(discord.allowed_mentions, { parse: [] });

      const sendMessage: Opts<never>['sendMessage'] = telegramPayload(m, { chat_id: '-100123', bot_token: 't' });
      assert.equal(sendMessage.chat_id, -100123);

      const trigger: EventPayloadV2 = pagerdutyTrigger(m, { routing_key: 'rk' });
      const resolve: Omit<EventPayloadV2, 'payload'> = pagerdutyResolve(m, { routing_key: 'rk' });
      assert.equal(trigger.dedup_key, resolve.dedup_key);

      const card = new AdaptiveCards.AdaptiveCard();
      const ctx = new AdaptiveCards.SerializationContext();
      card.parse(teamsCard(m), ctx);
      assert.equal(ctx.eventCount, 0);
      assert.deepEqual(card.validateProperties().validationEvents.map((e) => e.message), []);
    });
  }
});

describe('URLs, headers and actions', () => {
  const failed = MESSAGES['task.failed']!;
  const recovered = MESSAGES['task.recovered']!;
  const urls = (rs: ReturnType<typeof pagerduty>) => rs.map((r) => (r.type === 'http' ? r.url : ''));

  test('api_url replaces the vendor host and goes before its path; Opsgenie by region', () => {
    assert.deepEqual(urls(pagerduty(failed, { routing_key: 'k' })), ['https://events.pagerduty.com/v2/enqueue']);
    assert.deepEqual(urls(pagerduty(failed, { routing_key: 'k', api_url: 'http://h:1/pd/' })), ['http://h:1/pd/v2/enqueue']);
    assert.deepEqual(urls(telegram(failed, { bot_token: '1:AA', chat_id: '1' })), ['https://api.telegram.org/bot1:AA/sendMessage']);
    assert.deepEqual(urls(opsgenie(failed, { api_key: 'k', region: 'eu' })), ['https://api.eu.opsgenie.com/v2/alerts']);
    assert.deepEqual(urls(opsgenie(recovered, { api_key: 'k' })), ['https://api.opsgenie.com/v2/alerts/tsk_01abcdefgh/close?identifierType=alias']);
    assert.deepEqual(urls(pushover(failed, { app_token: 'a', user_key: 'u' })), ['https://api.pushover.net/1/messages.json']);
  });

  test('a failure triggers, its recovery resolves the same incident; a test resolves its own at once', () => {
    const [trigger] = pagerduty(failed, { routing_key: 'k' });
    const [resolve] = pagerduty(recovered, { routing_key: 'k' });
    assert.equal(JSON.parse(trigger!.type === 'http' ? trigger!.body : '').event_action, 'trigger');
    assert.deepEqual(JSON.parse(resolve!.type === 'http' ? resolve!.body : ''), { routing_key: 'k', event_action: 'resolve', dedup_key: 'tsk_01abcdefgh' });
    assert.equal(pagerduty(MESSAGES.test!, { routing_key: 'k' }).length, 2);
    assert.equal(opsgenie(MESSAGES.test!, { api_key: 'k' }).length, 2);
  });

  test('ntfy: priority high for failures, default otherwise; a title outside ASCII as an RFC 2047 word; the token as a bearer', () => {
    const r = ntfy({ ...failed, title: 'Tâche "é" failed' }, { server_url: 'https://ntfy.sh', topic: 't', token: 'tk_1' })[0]!;
    assert.ok(r.type === 'http');
    assert.equal(r.url, 'https://ntfy.sh/t');
    assert.equal(r.headers.Priority, 'high');
    assert.equal(r.headers.Authorization, 'Bearer tk_1');
    assert.equal(r.headers.Title, `=?UTF-8?B?${Buffer.from('Tâche "é" failed').toString('base64')}?=`);
    const quiet = ntfy(recovered, { server_url: 'https://ntfy.sh', topic: 't' })[0]!;
    assert.ok(quiet.type === 'http' && quiet.headers.Priority === 'default' && !('Authorization' in quiet.headers));
  });

  test('a secret is hidden from an error text, URL-encoded too', () => {
    const hide = redactor(['1:AA/bc', 'abc']);
    assert.equal(hide('GET https://api/bot1:AA/bc/sendMessage and bot1%3AAA%2Fbc'), 'GET https://api/bot***/sendMessage and bot***');
  });
});
