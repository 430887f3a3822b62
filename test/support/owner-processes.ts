import { startTestService, type Api, type TestService } from './service.ts';
import { spawnJetcron, type JetcronProcess } from './jetcron-process.ts';

/**
 * A service whose API, projector, scheduler and notifier run in the test's process and
 * whose partition owners run only in dispatcher child processes the test starts (to
 * kill, freeze or replace them). `stop` resumes any frozen child, ends them all, and
 * stops the service.
 */
export async function serviceWithOwnersApart(env: Record<string, string> = {}): Promise<{ svc: TestService; api: Api; dispatcher: (label: string) => Promise<JetcronProcess>; stop: () => Promise<void> }> {
  const svc = await startTestService({ JETCRON_ROLES: 'api,projector,scheduler,notifier', JETCRON_DISPATCH: 'owners', ...env });
  const { api } = await svc.createOrg();
  const procs: JetcronProcess[] = [];
  return {
    svc,
    api,
    async dispatcher(label) {
      const p = await spawnJetcron({ roles: 'dispatcher', natsUrl: svc.natsUrl, databaseUrl: svc.databaseUrl, label, env: { JETCRON_DISPATCH: 'owners', ...env } });
      procs.push(p);
      return p;
    },
    async stop() {
      await endProcesses(procs);
      await svc.stop();
    },
  };
}

/** Resumes any frozen child (SIGCONT), then ends each and removes its data dir. */
export async function endProcesses(procs: JetcronProcess[]): Promise<void> {
  for (const p of procs) {
    try {
      process.kill(p.pid, 'SIGCONT');
    } catch {
      // gone already
    }
    await p.cleanup();
  }
}
