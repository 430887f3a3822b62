import type { Express } from 'express';

export interface RegisteredRoute {
  method: string;
  /** OpenAPI style: `/api/v1/tasks/{id}`. */
  path: string;
}

// express 4 keeps no public route table; these are the fields of its Layer and Route objects.
interface Layer {
  name?: string;
  regexp?: RegExp & { fast_slash?: boolean };
  route?: { path: unknown; methods: Record<string, boolean> };
  handle?: { stack?: Layer[] };
}

/** Every method + path an express 4 app answers, nested routers included, `:id` written `{id}`. */
export function registeredRoutes(app: Express): RegisteredRoute[] {
  const stack = (app as unknown as { _router?: { stack: Layer[] } })._router?.stack;
  if (!stack) throw new Error('the app has no router (no route registered)');
  return walk(stack, '');
}

function walk(stack: Layer[], prefix: string): RegisteredRoute[] {
  return stack.flatMap((layer): RegisteredRoute[] => {
    if (layer.route) {
      const { path, methods } = layer.route;
      if (typeof path !== 'string') throw new Error(`a route's path is not a string: ${String(path)}`);
      if (methods._all) throw new Error(`${path} is registered with .all(): list its methods instead`);
      const openApiPath = `${prefix}${path}`.replace(/:(\w+)/g, '{$1}');
      return Object.keys(methods).filter((m) => methods[m]).map((m) => ({ method: m.toUpperCase(), path: openApiPath }));
    }
    if (layer.name === 'router' && layer.handle?.stack) return walk(layer.handle.stack, prefix + mountPath(layer));
    return [];
  });
}

/**
 * A router mounted with `use(path, router)` keeps only the regexp path-to-regexp 0.1
 * made of the path; literal mount paths are read back from it. Anything else (a
 * parameter, a pattern) throws, so a new kind of mount fails the test instead of
 * hiding its routes.
 */
function mountPath(layer: Layer): string {
  const re = layer.regexp;
  if (!re || re.fast_slash) return '';
  const literal = /^\^((?:\\\/[\w.~-]+)+)\\\/\?\(\?=\\\/\|\$\)$/.exec(re.source);
  if (!literal) throw new Error(`cannot read the mount path back from ${re.source}`);
  return literal[1]!.replace(/\\\//g, '/');
}
