import module from 'node:module';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { CommandError } from '../lib/errors.ts';
import type { Projection } from './projection.ts';

/** What `jetcron` names (package.json `exports`). */
const PACKAGE_ENTRY = new URL('./index.ts', import.meta.url).href;
let hooked = false;

/**
 * A projection file may live anywhere (a home directory, a notebook's folder): it names
 * the package as `jetcron` (`import { defineProjection, sql } from 'jetcron'`), which no
 * node_modules near it holds. A resolve hook answers `jetcron` (and `jetcron/…`) from
 * this package, and any other bare name the file's own place cannot resolve (`kysely`)
 * from this package's dependencies. tsx loads the file: an analyst's TypeScript may use
 * what Node's own type stripping refuses (enums, extensionless imports).
 */
function hookResolution(): void {
  if (hooked) return;
  hooked = true;
  module.registerHooks({
    resolve(specifier, context, nextResolve) {
      if (specifier === 'jetcron') return { url: PACKAGE_ENTRY, format: 'module', shortCircuit: true };
      try {
        return nextResolve(specifier, context);
      } catch (err) {
        const bare = !/^(\.|\/|file:|node:|data:)/.test(specifier);
        const code = (err as { code?: string }).code;
        if (!bare || (code !== 'ERR_MODULE_NOT_FOUND' && code !== 'MODULE_NOT_FOUND')) throw err;
        // Resolved as this module would: from inside the package, among its dependencies.
        return { url: import.meta.resolve(specifier), shortCircuit: true };
      }
    },
  });
}

function isProjection(p: unknown): p is Projection {
  const o = p as Partial<Projection> | null;
  return !!o && typeof o.name === 'string' && typeof o.setup === 'function' && typeof o.teardown === 'function' && typeof o.apply === 'function';
}

export class BadProjectionFile extends CommandError {}

/** FILE's default export (or `projection`), which must be a `Projection`. */
export async function loadProjection(file: string): Promise<Projection> {
  hookResolution();
  const { register } = await import('tsx/esm/api');
  register();
  let mod: { default?: unknown; projection?: unknown };
  try {
    mod = (await import(pathToFileURL(resolve(file)).href)) as typeof mod;
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === 'ERR_MODULE_NOT_FOUND' && (err as Error).message.includes(resolve(file))) throw new BadProjectionFile(`${file}: no such file`);
    throw err;
  }
  // A file outside any ESM package loads as CommonJS: its exports object is the default, holding `default`.
  const exported = (mod.default as { default?: unknown } | undefined)?.default ?? mod.default ?? mod.projection;
  const projection = exported;
  if (!isProjection(projection)) throw new BadProjectionFile(`${file} must export a projection (name, setup, teardown, apply) as its default export`);
  return projection;
}
