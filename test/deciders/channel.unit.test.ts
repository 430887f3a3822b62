import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { checkResourceChannels, decideChannels, evolveChannels } from '../../src/commands/channel/decide.ts';
import { maskSecret } from '../../src/commands/channel/kinds.ts';
import type { ChannelCommand, SealedConfig } from '../../src/commands/channel/types.ts';
import type { SealedSecrets } from '../../src/lib/sealed-secrets.ts';
import { deciderSpec, later, meta, NOW } from './spec.ts';

const spec = deciderSpec(decideChannels, evolveChannels);
const ORG = 'org_chn';
const sealed = (masks: Record<string, string>): SealedConfig => ({ sealed: Object.keys(masks).length ? ({ sealed: 'x' } as unknown as SealedSecrets) : null, masks });
const SLACK = { webhook_url: 'https://hooks.slack.com/services/T0/B0/secretsecret' };

const create = (input: Record<string, unknown>, masks: Record<string, string> = {}): ChannelCommand =>
  ({ type: 'CreateChannel', orgId: ORG, input: { name: 'ops', ...input } as never, secrets: sealed(masks) });
const update = (input: Record<string, unknown>, masks: Record<string, string>, id = 'chn_1'): ChannelCommand =>
  ({ type: 'UpdateChannel', id, input: input as never, secrets: sealed(masks) });

const slackCreated = decideChannels(create({ kind: 'slack', config: SLACK }, { webhook_url: '***cret' }), null, meta());
const set = spec.stateAfter(slackCreated)!;

describe('channel decider: create', () => {
  test('a channel in the set; plain config in the clear (defaults filled in), secrets as masks and sealed', () => {
    spec.given([]).when(create({ kind: 'ntfy', config: { topic: 'alerts', token: 'tk_abcdefghij' } }, { token: '***ghij' })).thenMatches([{
      type: 'ChannelCreated',
      org_id: ORG,
      data: {
        channel: { id: 'chn_1', kind: 'ntfy', name: 'ops', config: { topic: 'alerts', server_url: 'https://ntfy.sh' }, secrets: { token: '***ghij' }, events: null, created_at: NOW },
        set: { org_id: ORG, version: 1 },
      },
    }]);
  });

  test('422: an unknown kind names kind; a missing or bad config value names config.<name>; events are known ones, once', () => {
    spec.given([]).when(create({ kind: 'fax', config: {} })).thenRefuses({ status: 422, field: 'kind' });
    spec.given([]).when(create({ kind: 'slack', config: {} })).thenRefuses({ status: 422, field: 'config.webhook_url' });
    spec.given([]).when(create({ kind: 'telegram', config: { bot_token: '1:AA', chat_id: 'x y' } }, { bot_token: '***' })).thenRefuses({ status: 422, field: 'config.chat_id' });
    spec.given([]).when(create({ kind: 'gotify', config: { server_url: 'gopher://x', app_token: 'a' } }, { app_token: '***' })).thenRefuses({ status: 422, field: 'config.server_url' });
    spec.given([]).when(create({ kind: 'email', config: { to: 'a@b.c', cc: 'd@e.f' } })).thenRefuses({ status: 422, field: 'config.cc' });
    spec.given([]).when(create({ kind: 'slack', config: SLACK, events: ['task.failed', 'task.failed'] }, { webhook_url: '***' })).thenRefuses({ status: 422, field: 'events[1]' });
    spec.given([]).when(create({ kind: 'slack', config: SLACK, events: ['task.deleted'] }, { webhook_url: '***' })).thenRefuses({ status: 422, field: 'events[0]' });
    spec.given([]).when(create({ kind: 'slack', name: '', config: SLACK }, { webhook_url: '***' })).thenRefuses({ status: 422, field: 'name' });
  });

  test('an organization has at most 100 channels', () => {
    let events = [] as ReturnType<typeof decideChannels>;
    let state = null as ReturnType<typeof evolveChannels>;
    const at = meta();
    for (let i = 0; i < 100; i++) {
      events = decideChannels(create({ kind: 'email', config: { to: `a${i}@example.com` } }), state, at);
      state = evolveChannels(state, events[0]!);
    }
    assert.equal(state!.channels.length, 100);
    assert.equal(state!.version, 100);
    spec.givenState(state).when(create({ kind: 'email', config: { to: 'one@too.many' } })).thenRefuses({ status: 422, message: /at most 100 channels/ });
  });
});

describe('channel decider: changes', () => {
  test('PUT changes what it names: a name, the events; the config values given over the stored ones', () => {
    spec.given(slackCreated).when(update({ name: 'alerts', events: ['monitor.down'] }, { webhook_url: '***cret' }), meta(later(1000))).thenMatches([{
      type: 'ChannelUpdated',
      data: { channel: { id: 'chn_1', kind: 'slack', name: 'alerts', events: ['monitor.down'], secrets: { webhook_url: '***cret' }, updated_at: later(1000) }, changed: ['name', 'events'], set: { version: 2 } },
    }]);
    const tg = spec.stateAfter(decideChannels(create({ kind: 'telegram', config: { bot_token: '1:AA', chat_id: '42' } }, { bot_token: '***' }), null, meta()))!;
    spec.givenState(tg).when(update({ config: { chat_id: '@ops_chat' } }, { bot_token: '***' }))
      .thenMatches([{ data: { channel: { config: { chat_id: '@ops_chat' }, secrets: { bot_token: '***' } } } }]);
    // An optional value removed with null; a required one cannot be.
    spec.givenState(tg).when(update({ config: { chat_id: null } }, { bot_token: '***' })).thenRefuses({ status: 422, field: 'config.chat_id' });
  });

  test('a new kind starts from nothing: the old kind\'s values are gone, the new one\'s required', () => {
    spec.given(slackCreated).when(update({ kind: 'email' }, {})).thenRefuses({ status: 422, field: 'config.to' });
    spec.given(slackCreated).when(update({ kind: 'email', config: { to: 'ops@example.com' } }, {}))
      .thenMatches([{ data: { channel: { kind: 'email', config: { to: 'ops@example.com' }, secrets: {}, sealed_secrets: null } } }]);
  });

  test('delete removes it from the set; an unknown id is not found', () => {
    spec.given(slackCreated).when({ type: 'DeleteChannel', id: 'chn_1' }).thenMatches([{ type: 'ChannelDeleted', data: { channel: { id: 'chn_1' }, set: { channels: [], version: 2 } } }]);
    spec.given(slackCreated).when({ type: 'DeleteChannel', id: 'chn_2' }).thenRefuses({ status: 404 });
    spec.given([]).when(update({ name: 'x' }, {})).thenRefuses({ status: 404, message: 'Channel not found' });
  });

  test('the set keeps its order: a changed channel stays where it was', () => {
    const second = meta();
    second.newId('chn');
    const two = [...slackCreated, ...decideChannels(create({ kind: 'email', config: { to: 'a@b.co' } }), set, second)];
    const after = spec.stateAfter([...two, ...decideChannels(update({ name: 'renamed' }, { webhook_url: '***' }), spec.stateAfter(two), meta())])!;
    assert.deepEqual(after.channels.map((c) => c.name), ['renamed', 'ops']);
  });
});

describe('a resource\'s channels and masks', () => {
  test('null and [] are fine; ids are chn_ ids, each once', () => {
    checkResourceChannels(null);
    checkResourceChannels([]);
    checkResourceChannels(['chn_01abcdefghij']);
    assert.throws(() => checkResourceChannels(['slack']), { field: 'channels[0]' });
    assert.throws(() => checkResourceChannels(['chn_01abcdefghij', 'chn_01abcdefghij']), { field: 'channels[1]' });
  });

  test('*** and the last 4 characters; a short value shows *** alone', () => {
    assert.equal(maskSecret('https://hooks.slack.com/services/T0/B0/abcd1234'), '***1234');
    assert.equal(maskSecret('short'), '***');
  });
});
