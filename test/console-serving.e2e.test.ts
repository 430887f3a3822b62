import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { CONSOLE_DIR, CONSOLE_HEADERS, loadConsoleFiles } from '../src/http/console-files.ts';
import { rawRequest } from './support/raw-http.ts';
import { startTestService, type TestService } from './support/service.ts';

const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'";
const PACKAGE_JSON = path.resolve(fileURLToPath(new URL('../package.json', import.meta.url)));

function assertSecurityHeaders(what: string, headers: Headers) {
  assert.equal(headers.get('content-security-policy'), CSP, what);
  assert.equal(headers.get('x-content-type-options'), 'nosniff', what);
  assert.equal(headers.get('referrer-policy'), 'no-referrer', what);
  assert.equal(headers.get('x-frame-options'), 'DENY', what);
}

/** The local files a page loads: module scripts and stylesheets. */
function assetsOf(html: string): { scripts: string[]; styles: string[] } {
  const attr = (tag: string, name: string) => new RegExp(`\\b${name}\\s*=\\s*"([^"]*)"`, 'i').exec(tag)?.[1];
  const scripts = [...html.matchAll(/<script\b[^>]*>/gi)].map((m) => attr(m[0], 'src')).filter((s): s is string => !!s);
  const styles = [...html.matchAll(/<link\b[^>]*>/gi)].filter((m) => /\brel\s*=\s*"stylesheet"/i.test(m[0])).map((m) => attr(m[0], 'href')).filter((s): s is string => !!s);
  return { scripts, styles };
}

describe('the web console is served by the service', () => {
  let svc: TestService;
  before(async () => {
    svc = await startTestService();
  });
  after(() => svc?.stop());

  test('GET / is the console page: HTML, never cached without a check, with the security headers', async () => {
    const res = await fetch(`${svc.url}/`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'text/html; charset=utf-8');
    assert.equal(res.headers.get('cache-control'), 'no-cache');
    assertSecurityHeaders('GET /', res.headers);
    const html = await res.text();
    assert.equal(html, readFileSync(path.join(CONSOLE_DIR, 'index.html'), 'utf8'));
    // Revalidation: the same page is 304 with its ETag, still with the headers.
    const etag = res.headers.get('etag');
    assert.ok(etag);
    const again = await fetch(`${svc.url}/`, { headers: { 'If-None-Match': etag } });
    assert.equal(again.status, 304);
    assertSecurityHeaders('GET / (304)', again.headers);
    assert.equal((await fetch(`${svc.url}/`, { headers: { 'If-None-Match': '"other"' } })).status, 200);
  });

  test("the page's modules and styles are served with their content types, a short cache and an ETag", async () => {
    const { scripts, styles } = assetsOf(await (await fetch(`${svc.url}/`)).text());
    assert.ok(scripts.length > 0, 'the page loads at least one module');
    const check = async (url: string, type: string) => {
      assert.match(url, /^\/console\//, `${url} is served by the service, not from elsewhere`);
      const res = await fetch(`${svc.url}${url}`);
      assert.equal(res.status, 200, url);
      assert.equal(res.headers.get('content-type'), type, url);
      assert.equal(res.headers.get('cache-control'), 'public, max-age=60', url);
      assertSecurityHeaders(url, res.headers);
      const etag = res.headers.get('etag');
      assert.match(etag ?? '', /^"[\w-]+"$/, url);
      assert.equal((await fetch(`${svc.url}${url}`, { headers: { 'If-None-Match': `W/${etag}, "x"` } })).status, 304, url);
      assert.equal(Buffer.from(await res.arrayBuffer()).equals(readFileSync(path.join(CONSOLE_DIR, url.slice('/console/'.length)))), true, url);
    };
    for (const s of scripts) await check(s, 'text/javascript; charset=utf-8');
    for (const s of styles) await check(s, 'text/css; charset=utf-8');
  });

  test('uPlot is served from node_modules at /console/vendor/', async () => {
    const require = createRequire(import.meta.url);
    for (const [url, file, type] of [
      ['/console/vendor/uPlot.esm.js', 'uplot/dist/uPlot.esm.js', 'text/javascript; charset=utf-8'],
      ['/console/vendor/uPlot.min.css', 'uplot/dist/uPlot.min.css', 'text/css; charset=utf-8'],
    ] as const) {
      const res = await fetch(`${svc.url}${url}`);
      assert.equal(res.status, 200, url);
      assert.equal(res.headers.get('content-type'), type, url);
      assertSecurityHeaders(url, res.headers);
      assert.ok(Buffer.from(await res.arrayBuffer()).equals(readFileSync(require.resolve(file))), url);
    }
    const head = await fetch(`${svc.url}/console/vendor/uPlot.esm.js`, { method: 'HEAD' });
    assert.equal(head.status, 200);
    assert.equal(head.headers.get('content-length'), String(readFileSync(require.resolve('uplot/dist/uPlot.esm.js')).length));
  });

  test('no page of the console has an inline script, handler or style (the CSP would block it)', () => {
    const pages = [...loadConsoleFiles()].filter(([, f]) => f.type.startsWith('text/html'));
    assert.ok(pages.length > 0);
    for (const [url, file] of pages) {
      const html = file.body.toString('utf8');
      for (const m of html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/gi)) {
        assert.match(m[1]!, /\bsrc\s*=/i, `${url}: a <script> without src`);
        assert.equal(m[2]!.trim(), '', `${url}: a <script src> with inline content`);
      }
      assert.doesNotMatch(html, /<[^>]+\son[a-z]+\s*=/i, `${url}: an inline event handler`);
      assert.doesNotMatch(html, /<style\b|<[^>]+\sstyle\s*=/i, `${url}: an inline style`);
      assert.doesNotMatch(html, /javascript:/i, `${url}: a javascript: URL`);
      assert.doesNotMatch(html, /\b(src|href)\s*=\s*"(https?:)?\/\//i, `${url}: something loaded from another origin`);
    }
  });

  test('no path, however encoded, reaches a file outside the console', async () => {
    const absolute = encodeURIComponent(PACKAGE_JSON);
    const paths = [
      '/console/../package.json',
      '/console/%2e%2e/package.json',
      '/console/%2E%2E/package.json',
      '/console/.%2e/package.json',
      '/console/..%2fpackage.json',
      '/console/..%2Fpackage.json',
      '/console/%2e%2e%2fpackage.json',
      '/console/..%5cpackage.json',
      '/console/..\\package.json',
      '/console/%252e%252e/package.json',
      '/console/%c0%ae%c0%ae/package.json',
      '/console/vendor/../../package.json',
      '/console/vendor/%2e%2e/%2e%2e/package.json',
      '/console/vendor/..%2f..%2fpackage.json',
      '/console/vendor/uPlot.esm.js/../../../package.json',
      '/console/../node_modules/uplot/package.json',
      '/console/../src/config.ts',
      `/console/${absolute}`,
      `/console/%2f${absolute}`,
      '/console//etc/passwd',
      '/../package.json',
      '/%2e%2e/package.json',
      '/package.json',
      '/console/package.json',
    ];
    for (const p of paths) {
      const res = await rawRequest(svc.url, { path: p });
      assert.ok(res.status === 404 || res.status === 400, `${p}: ${res.status}`);
      assert.doesNotMatch(res.text, /"dependencies"|"devDependencies"|root:x:0|loadConfig/, `${p} leaked a file`);
      assert.equal(res.headers['content-type'], 'application/json; charset=utf-8', p);
    }
  });

  test('directories are not listed', async () => {
    for (const p of ['/console/', '/console', '/console/vendor/', '/console/vendor', '/console/.', '/console/vendor/.']) {
      const res = await rawRequest(svc.url, { path: p });
      assert.equal(res.status, 404, p);
      assert.doesNotMatch(res.text, /app\.js|uPlot|index\.html/, p);
    }
  });

  test('only regular files of the served kinds are in the table: no dot files, links or other types', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'jetcron-console-'));
    try {
      writeFileSync(path.join(dir, 'index.html'), '<!doctype html>');
      writeFileSync(path.join(dir, 'app.js'), 'export {}');
      writeFileSync(path.join(dir, '.env'), 'SECRET=1');
      writeFileSync(path.join(dir, '.hidden.js'), 'export {}');
      writeFileSync(path.join(dir, 'notes.md'), '# notes');
      writeFileSync(path.join(dir, 'server.ts'), 'export {}');
      mkdirSync(path.join(dir, 'pages', 'deep'), { recursive: true });
      writeFileSync(path.join(dir, 'pages', 'deep', 'list.js'), 'export {}');
      mkdirSync(path.join(dir, '.git'));
      writeFileSync(path.join(dir, '.git', 'config.js'), 'export {}');
      symlinkSync(PACKAGE_JSON, path.join(dir, 'package.json'));
      symlinkSync(path.dirname(PACKAGE_JSON), path.join(dir, 'root'));
      const urls = [...loadConsoleFiles(dir).keys()].sort();
      assert.deepEqual(urls, ['/', '/console/app.js', '/console/pages/deep/list.js', '/console/vendor/uPlot.esm.js', '/console/vendor/uPlot.min.css']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('the API keeps its JSON answers and no console headers', async () => {
    const res = await fetch(`${svc.url}/api/v1/tasks`);
    assert.equal(res.status, 401);
    for (const name of Object.keys(CONSOLE_HEADERS)) assert.equal(res.headers.get(name), null, name);
  });
});
