// Organization: plan, notification settings, the webhook secret (shown on demand,
// rotated on confirmation) and API keys (the API mints and revokes them only through
// the admin CLI; the console shows which key this tab uses).
import { api } from '../api.js';
import { button, confirmButton, errorBox, facts, fill, h, pageHead, time, toast } from '../dom.js';
import { buildForm } from '../form.js';
import { currentKey, publicPart } from '../session.js';
import { sameAsLast } from './common.js';

const settingsFields = [
  { name: 'notification_email', label: 'Notification email', type: 'email', placeholder: 'ops@example.com', nullable: true },
  { name: 'notification_webhook_url', label: 'Notification webhook URL', type: 'url', placeholder: 'https://hooks.slack.com/…', nullable: true, help: 'Slack, Mattermost, Google Chat and Discord read its text' },
  { name: 'notify_on_failure', label: 'Notify on failure', type: 'checkbox', default: true },
  { name: 'notify_on_recovery', label: 'Notify on recovery', type: 'checkbox', default: true },
  {
    name: 'auto_disable_after', label: 'Disable failing destinations after', type: 'text', placeholder: '5d', nullable: true,
    help: 'A schedule or forward URL whose runs keep failing this long (and at least 3 times in a row) is disabled; empty: never',
  },
];

function secretField(secret) {
  const value = h('code', { class: 'secret', id: 'webhook-secret' }, '••••••••••••••••');
  let shown = false;
  const toggle = button('Show', () => {
    shown = !shown;
    value.textContent = shown ? secret : '••••••••••••••••';
    toggle.textContent = shown ? 'Hide' : 'Show';
    toggle.setAttribute('aria-pressed', String(shown));
  }, { class: 'quiet', 'aria-controls': 'webhook-secret', 'aria-pressed': 'false' });
  return h('span', { class: 'secret-field' }, value, ' ', toggle);
}

export async function organizationPage(ctx) {
  const body = h('div');
  const result = h('div', { class: 'action-result', role: 'status' });
  const unchanged = sameAsLast();
  const draw = async () => {
    const org = (await api('GET', '/organization')).data;
    if (!ctx.alive() || unchanged(org)) return;
    ctx.setTitle('Organization');
    const form = buildForm({
      fields: settingsFields, initial: org, mode: 'edit', submitLabel: 'Save settings',
      onSubmit: async (payload) => {
        if (Object.keys(payload).length === 0) return toast('Nothing changed');
        await api('PUT', '/organization', payload);
        toast('Settings saved');
        await draw();
      },
    });
    fill(body,
      pageHead(org.name || 'Organization'),
      result,
      facts([
        ['Id', h('code', {}, org.id)],
        ['Plan', h('span', { class: `plan plan-${org.plan}` }, org.plan === 'pro' ? 'Pro' : 'Free')],
        ['Created', time(org.created_at)],
      ]),
      h('section', { class: 'panel', 'aria-labelledby': 'secret-h' },
        h('h2', { id: 'secret-h' }, 'Webhook secret'),
        h('p', { class: 'help' }, 'Every request jetcron sends is signed with it (Standard Webhooks\' webhook-signature, and X-Jetcron-Signature). After a rotation X-Jetcron-Signature uses the new secret at once, and webhook-signature carries the old one beside it for 24 hours.'),
        secretField(org.webhook_secret),
        org.previous_webhook_secret_expires_at ? h('p', { class: 'help previous-secret' }, 'The previous secret also signs until ', time(org.previous_webhook_secret_expires_at), '.') : null,
        h('div', { class: 'actions' }, confirmButton('Rotate secret', 'Rotate now', async () => {
          try {
            await api('POST', '/organization/webhook-secret/rotate');
            toast('Webhook secret rotated');
            await draw();
          } catch (err) {
            fill(result, errorBox(err));
          }
        }, { class: 'danger' }))),
      h('section', { class: 'panel', 'aria-labelledby': 'notify-h' }, h('h2', { id: 'notify-h' }, 'Notifications'), form),
      h('section', { class: 'panel', 'aria-labelledby': 'keys-h' },
        h('h2', { id: 'keys-h' }, 'API keys'),
        facts([['This tab uses', h('code', {}, `${publicPart(currentKey())}.sk_…`)]]),
        h('p', { class: 'help' }, 'Keys are created and revoked with the admin CLI on the server (the API does not list them):'),
        h('pre', { class: 'block' }, `npx jetcron key create --org ${org.id}\nnpx jetcron key revoke --key pk_…`)));
  };
  await draw();
  fill(ctx.main, body);
  ctx.live((m) => m.kind === 'organization', draw);
}
