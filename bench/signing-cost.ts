/**
 * What signing costs per outgoing request, measured in the bench process with the
 * service's own `signedHeaders`: X-Jetcron-* alone (one HMAC), with Standard Webhooks
 * (two), and during a rotation's 24 hours (three). A task-sized JSON body.
 */
import { generateWebhookSecret } from '../src/commands/api-key/secret.ts';
import { signedHeaders } from '../src/dispatchers/signing.ts';
import { fmt } from './stats.ts';

const ROUNDS = 5;
const PER_ROUND = 20_000;

/** Best of 5 rounds of 20,000 calls each, the variants interleaved, so a busy moment of the shared machine weighs least. */
export function signingCost(body: string) {
  const [current, previous] = [generateWebhookSecret(), generateWebhookSecret()];
  const variants = [
    { secrets: [current], webhookId: null },
    { secrets: [current], webhookId: 'exe_01' },
    { secrets: [current, previous], webhookId: 'exe_01' },
  ];
  const best = variants.map(() => Infinity);
  for (let round = 0; round < ROUNDS; round++) {
    variants.forEach(({ secrets, webhookId }, v) => {
      const t0 = performance.now();
      for (let i = 0; i < PER_ROUND; i++) signedHeaders({ secrets, taskId: 'tsk_01', executionId: `exe_${i}`, webhookId, body, nowMs: Date.now() });
      best[v] = Math.min(best[v]!, ((performance.now() - t0) * 1000) / PER_ROUND);
    });
  }
  const [jetcronOnly, standard, rotating] = best as [number, number, number];
  return {
    jetcronOnly,
    standard,
    rotating,
    describe: () =>
      `${fmt.int(Buffer.byteLength(body))}-byte body: X-Jetcron-* only ${jetcronOnly.toFixed(1)} µs; + Standard Webhooks ${standard.toFixed(1)} µs ` +
      `(+${(standard - jetcronOnly).toFixed(1)} µs); during a rotation (2 entries) ${rotating.toFixed(1)} µs`,
  };
}
