import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createApiKey } from '../commands/api-key/handlers.ts';
import type { CommandDeps } from '../commands/execute.ts';
import { createOrganization } from '../commands/organization/handlers.ts';
import type { Db } from '../db/connect.ts';

/**
 * On the embedded default's first start, create an organization and print its
 * API key once, so a new user can curl right away. The marker file records that
 * it happened (never the key itself).
 */
export async function bootstrapFirstOrganization(deps: CommandDeps & { dataDir: string; db: Db; baseUrl: string; log: (m: string) => void }) {
  const marker = join(deps.dataDir, 'first-organization.json');
  if (existsSync(marker)) return;
  const org = await createOrganization(deps, 'default', 'free');
  const key = await createApiKey(deps, org.state!.id);
  writeFileSync(marker, JSON.stringify({ org_id: org.state!.id, created_at: new Date().toISOString() }) + '\n');
  const line = '='.repeat(72);
  process.stdout.write(
    `\n${line}\nCreated organization ${org.state!.id}. Its API key (shown only this once):\n\n  ${key.apiKey}\n\n` +
      `Try:\n  curl -H "Authorization: Bearer ${key.apiKey}" ${deps.baseUrl}/tasks\n${line}\n\n`,
  );
}
