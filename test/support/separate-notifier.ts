/**
 * A service with every role but the notifier, whose notifiers run as processes of their
 * own (`spawn`), so a test can kill -9 one and start the next: for the tests of what the
 * notifier guarantees across a crash. `started` resolves once a first notifier's reader
 * has marked where it starts (the end of the log, when it first runs).
 */
import { Kvm } from '@nats-io/kv';
import { connectNats, type Nats } from '../../src/nats/connection.ts';
import { spawnJetcron, type JetcronProcess } from './jetcron-process.ts';
import { eventually, startTestService, type TestService } from './service.ts';

export interface SeparateNotifier {
  svc: TestService;
  nats: Nats;
  spawn(label: string): Promise<JetcronProcess>;
  /** Waits until a notifier's reader holds its checkpoint: what is appended after it is read. */
  started(): Promise<void>;
  stop(): Promise<void>;
}

export async function startWithSeparateNotifier(scale = '0.01'): Promise<SeparateNotifier> {
  const svc = await startTestService({ JETCRON_ROLES: 'api,projector,scheduler,dispatcher', JETCRON_TIME_SCALE: scale });
  const nats = await connectNats(svc.natsUrl, 'separate notifier test');
  const spawned: JetcronProcess[] = [];
  return {
    svc,
    nats,
    async spawn(label) {
      const p = await spawnJetcron({ roles: 'notifier', natsUrl: svc.natsUrl, databaseUrl: svc.databaseUrl, label, env: { JETCRON_TIME_SCALE: scale } });
      spawned.push(p);
      return p;
    },
    async started() {
      const checkpoints = await new Kvm(nats.nc).open('checkpoints');
      await eventually(async () => (await checkpoints.get('notifier'))?.operation === 'PUT', 60_000);
    },
    async stop() {
      for (const p of spawned) await p.cleanup();
      await nats.close();
      await svc.stop();
    },
  };
}
