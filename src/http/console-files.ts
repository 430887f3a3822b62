import { createHash } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import express, { type NextFunction, type Request, type Response } from 'express';

/** The console's pages, styles and modules: the package's top-level `console/` directory. */
export const CONSOLE_DIR = fileURLToPath(new URL('../../console/', import.meta.url));

/** Every console answer carries these; the CSP is why the console has no inline script or style. */
export const CONSOLE_HEADERS: Readonly<Record<string, string>> = {
  'Content-Security-Policy':
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'",
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'X-Frame-Options': 'DENY',
};

// Only these kinds of file are served; anything else in the directory stays private.
// `.js` must be text/javascript: browsers refuse to run a module served as anything else under nosniff.
const CONTENT_TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
};

/** The page itself is checked on every load, so a new release's modules are picked up at once. */
const PAGE_CACHE = 'no-cache';
/** Modules, styles and images: reused for a minute, then revalidated with their ETag. */
const ASSET_CACHE = 'public, max-age=60';

/** Where the vendored libraries are served, from node_modules (nothing comes from a CDN). */
export const VENDOR_FILES: Readonly<Record<string, string>> = {
  '/console/vendor/uPlot.esm.js': 'uplot/dist/uPlot.esm.js',
  '/console/vendor/uPlot.min.css': 'uplot/dist/uPlot.min.css',
};

interface ConsoleFile {
  body: Buffer;
  type: string;
  etag: string;
  cacheControl: string;
}

function entry(file: string, cacheControl: string): ConsoleFile | undefined {
  const type = CONTENT_TYPES[path.extname(file).toLowerCase()];
  if (!type) return undefined;
  const body = readFileSync(file);
  return { body, type, cacheControl, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"` };
}

/** Regular files only: dot files, symbolic links and other kinds are left out. */
function* filesUnder(dir: string, rel = ''): Generator<string> {
  for (const d of readdirSync(path.join(dir, rel), { withFileTypes: true })) {
    if (d.name.startsWith('.')) continue;
    const name = rel ? `${rel}/${d.name}` : d.name;
    if (d.isDirectory()) yield* filesUnder(dir, name);
    else if (d.isFile()) yield name;
  }
}

/**
 * URL path → file, read once at start. A request is answered only when its decoded
 * path is a key of this table, so no path (`..`, encoded or not, a directory, a
 * link) can reach a file that was not put here.
 */
export function loadConsoleFiles(dir: string = CONSOLE_DIR): Map<string, ConsoleFile> {
  const files = new Map<string, ConsoleFile>();
  for (const rel of filesUnder(dir)) {
    const file = entry(path.join(dir, rel), rel === 'index.html' ? PAGE_CACHE : ASSET_CACHE);
    if (file) files.set(rel === 'index.html' ? '/' : `/console/${rel}`, file);
  }
  const require = createRequire(import.meta.url);
  for (const [url, module] of Object.entries(VENDOR_FILES)) files.set(url, entry(require.resolve(module), ASSET_CACHE)!);
  return files;
}

function matchesEtag(header: string | undefined, etag: string): boolean {
  if (!header) return false;
  return header.split(',').some((tag) => {
    const t = tag.trim();
    return t === '*' || t.replace(/^W\//, '') === etag;
  });
}

function decodedPath(req: Request): string | undefined {
  try {
    return decodeURIComponent(req.path);
  } catch {
    return undefined;
  }
}

/** `GET /` (the console's page) and `GET /console/…` (its files and the vendored libraries). */
export function consoleRoutes(files: Map<string, ConsoleFile> = loadConsoleFiles()) {
  const router = express.Router();
  const answer = (req: Request, res: Response, next: NextFunction) => {
    for (const [name, value] of Object.entries(CONSOLE_HEADERS)) res.setHeader(name, value);
    const key = decodedPath(req);
    const file = key === undefined ? undefined : files.get(key);
    if (!file) return next();
    res.setHeader('Content-Type', file.type);
    res.setHeader('Cache-Control', file.cacheControl);
    res.setHeader('ETag', file.etag);
    if (matchesEtag(req.headers['if-none-match'], file.etag)) return void res.status(304).end();
    res.setHeader('Content-Length', String(file.body.length));
    res.status(200).end(req.method === 'HEAD' ? undefined : file.body);
  };
  router.get('/', answer);
  router.get('/console/*', answer);
  return router;
}
