import path from 'node:path';

export function defaultDataDir(cwd: string = process.cwd(), env: NodeJS.ProcessEnv = process.env): string {
  const configured = env.JETCRON_DATA_DIR?.trim();
  return configured ? path.resolve(cwd, configured) : path.join(cwd, '.jetcron');
}
