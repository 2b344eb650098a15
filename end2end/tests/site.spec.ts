import { expect, test, type Page } from '@playwright/test';
import { signUp, uniqueTitle } from './helpers';

// The server under test is the release build `npm run bench` runs too (.ci/release.sh
// builds both in one run): each page names the script, the WASM and the stylesheet it
// loads, by content-hashed names, and each must be served, compressed when the
// browser asks for it, and kept a year; pages and API answers by no shared cache.
const HASHED = /^\/pkg\/seckill\.[A-Za-z0-9_-]{22}\.(js|wasm|css)$/;

test('pages load the script, the WASM and the stylesheet they name', async ({ request }) => {
  const admin = await (await request.get('/admin')).text();
  const linked = admin.match(/<link[^>]* href="([^"]+\.css)"/)?.[1];
  for (const path of ['/', '/admin']) {
    const page = await request.get(path);
    expect(page.headers()['cache-control'], path).toBe('private, no-cache');
    const html = await page.text();
    const js = html.match(/<link[^>]* href="([^"]+\.js)"/)?.[1];
    const wasm = html.match(/<link[^>]* href="([^"]+\.wasm)"/)?.[1];
    let css = html.match(/<link[^>]* href="([^"]+\.css)"/)?.[1];
    if (path === '/') {
      // The shop carries the stylesheet inline (a round trip less on a slow link),
      // the same text as the file the other pages link.
      expect(css, 'the shop links no stylesheet').toBeUndefined();
      const inline = html.match(/<style id="leptos">([\s\S]*?)<\/style>/)?.[1] ?? '';
      const file = await (await request.get(linked!, { headers: { 'accept-encoding': 'identity' } })).text();
      expect(inline.length, 'the shop carries its stylesheet').toBeGreaterThan(1000);
      expect(inline === file, 'the inline stylesheet is the linked one').toBe(true);
      css = linked;
    }
    for (const [url, type] of [[js, 'javascript'], [wasm, 'application/wasm'], [css, 'text/css']]) {
      expect(url, `${path} names its ${type}`).toMatch(HASHED);
      const res = await request.get(url!, { headers: { 'accept-encoding': 'identity' } });
      expect(res.status(), url).toBe(200);
      expect(res.headers()['content-type'], url).toContain(type);
      expect(res.headers()['cache-control'], url).toBe('public, max-age=31536000, immutable');
      expect((await res.body()).length, url).toBeGreaterThan(1000);
    }
  }
});

test('site files come compressed as the browser asks, and carry no cookie', async ({ request }) => {
  const html = await (await request.get('/')).text();
  const wasm = html.match(/<link[^>]* href="([^"]+\.wasm)"/)![1];
  const plain = await request.get(wasm, { headers: { 'accept-encoding': 'identity' } });
  const size = Number(plain.headers()['content-length']);
  for (const encoding of ['br', 'gzip']) {
    // Read raw: the client must not undo the encoding before it is measured.
    const res = await fetch(new URL(wasm, test.info().project.use.baseURL).toString(), {
      headers: { 'accept-encoding': encoding },
    });
    expect(res.headers.get('content-encoding'), encoding).toBe(encoding);
    expect(res.headers.get('vary')?.toLowerCase(), encoding).toContain('accept-encoding');
    expect(res.headers.get('set-cookie'), encoding).toBeNull();
    const sent = Number(res.headers.get('content-length'));
    expect(sent, `${encoding} is smaller`).toBeLessThan(size * 0.6);
    await res.arrayBuffer();
  }
  // The shop page too, compressed once per render; no cookie on it.
  const shop = await fetch(new URL('/', test.info().project.use.baseURL).toString(), {
    headers: { 'accept-encoding': 'gzip, deflate, br' },
  });
  expect(shop.headers.get('content-encoding')).toBe('br');
  expect(shop.headers.get('vary')?.toLowerCase()).toContain('accept-encoding');
  expect(shop.headers.get('set-cookie')).toBeNull();
  expect(await shop.text()).toContain('Flash sales');
  const api = await request.post('/api/list_vouchers', { data: {} });
  expect(api.headers()['cache-control']).toBe('no-store');
});

test("the operator's pages come in WASM of their own, fetched when one is opened", async ({ page }) => {
  const wasm = wasmFetched(page);
  await page.goto('/');
  await expect(page.locator('body[data-hydrated="true"]')).toBeAttached();
  expect(wasm, 'the shop loads one WASM file').toHaveLength(1);
  // The admin page's island is lazy: its code arrives when that page opens.
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Admin' }).click();
  await expect(page.getByLabel('Admin token', { exact: true })).toBeVisible();
  expect(wasm.length, `${wasm}`).toBeGreaterThan(1);
});

test('the sign-up challenge is solved by WASM fetched only when an account is made', async ({ page }) => {
  const wasm = wasmFetched(page);
  await page.goto('/');
  await expect(page.locator('body[data-hydrated="true"]')).toBeAttached();
  expect(wasm, 'the shop loads one WASM file').toHaveLength(1);
  await signUp(page, uniqueTitle('solver').slice(0, 32));
  expect(wasm.some((path) => path.includes('create_account')), `${wasm}`).toBe(true);
});

// Issue 56's budget for the shop's first load, compressed as served: what a phone on a
// slow link downloads before the whole page works (Grab works before that, from the
// page's own script: `sale::early`). The target is 100 KB in all. The page itself grows
// with the sales listed (this run's database holds every test's), and so do the API's
// answers (the live feed sends every sale's stock, a frame a second for as long as the
// page is open): both are counted apart and printed. The rest, the code, is held to
// the target less a shop page with a few sales: two sales, 3.9 KB, and the stylesheet
// the page carries inline, 3.7 KB (until 2026-11-30 it was linked, and counted with
// the code). (Until 2026-11-30 the feed was counted with the code: a test that made
// one more sale took the suite's count past the budget.)
const TARGET_KB = 100;
const HELD_KB = TARGET_KB - 9;

test("the shop's first load stays within its byte budget", async ({ page, context }) => {
  const cdp = await context.newCDPSession(page);
  await cdp.send('Network.enable');
  const urls = new Map<string, string>();
  const bytes = new Map<string, number>();
  cdp.on('Network.requestWillBeSent', (e) => urls.set(e.requestId, new URL(e.request.url).pathname));
  cdp.on('Network.dataReceived', (e) => bytes.set(e.requestId, (bytes.get(e.requestId) ?? 0) + e.encodedDataLength));
  cdp.on('Network.loadingFinished', (e) => bytes.set(e.requestId, e.encodedDataLength));
  await page.goto('/');
  await expect(page.locator('body[data-hydrated="true"]')).toBeAttached();
  let document = 0;
  let data = 0;
  let rest = 0;
  for (const [id, path] of urls) {
    if (path === '/') document += bytes.get(id) ?? 0;
    else if (path.startsWith('/api/')) data += bytes.get(id) ?? 0;
    else rest += bytes.get(id) ?? 0;
  }
  const kb = (n: number) => (n / 1024).toFixed(1);
  console.log(
    `first load: page ${kb(document)} KB, API answers ${kb(data)} KB, code ${kb(rest)} KB; ` +
      `target ${TARGET_KB} KB in all, code held to ${HELD_KB} KB`,
  );
  expect(rest / 1024, [...urls.values()].join(', ')).toBeLessThanOrEqual(HELD_KB);
});

/** The paths of the WASM files `page` fetches from now on, as they are asked for. */
function wasmFetched(page: Page): string[] {
  const wasm: string[] = [];
  page.on('request', (r) => {
    const path = new URL(r.url()).pathname;
    if (path.endsWith('.wasm')) wasm.push(path);
  });
  return wasm;
}

// The API's reference is rendered from the app's own document by the app's own copy of
// the renderer: a shop's integrator reads it offline. The renderer's attribution asks
// for a logo on its maker's host; the page's policy blocks it, so nothing is fetched
// from another host (a blocked request fails, it never finishes).
test('the API reference renders every call from the server alone', async ({ page }) => {
  test.setTimeout(60_000);
  const base = new URL(test.info().project.use.baseURL!);
  const elsewhere: string[] = [];
  page.on('requestfinished', (req) => {
    const url = new URL(req.url());
    if (url.protocol.startsWith('http') && url.host !== base.host) elsewhere.push(req.url());
  });
  const answer = await page.goto('/api/docs');
  expect(answer?.headers()['content-security-policy']).toContain("default-src 'self'");
  // Redoc parses a megabyte of script and renders every call: give a loaded machine time.
  await expect(page.getByRole('heading', { name: /Seckill/ }).first()).toBeVisible({ timeout: 30_000 });
  await expect(page.getByText('/api/grab_result', { exact: false }).first()).toBeAttached();
  expect(elsewhere).toEqual([]);
});
