import { expect, test } from '@playwright/test';

// The server under test is the release build `npm run bench` runs too (.ci/release.sh
// builds both in one run): each page names the script and the WASM it hydrates with,
// and both must be served, or no button on it works.
test('pages load the script and the WASM they name', async ({ request }) => {
  for (const path of ['/', '/admin']) {
    const html = await (await request.get(path)).text();
    const js = html.match(/<link[^>]* href="([^"]+\.js)"/)?.[1];
    const wasm = html.match(/<link[^>]* href="([^"]+\.wasm)"/)?.[1];
    expect(js, `${path} names its script`).toMatch(/^\/pkg\/seckill\.js$/);
    expect(wasm, `${path} names its WASM`).toMatch(/^\/pkg\/seckill\.wasm$/);
    for (const [url, type] of [[js!, 'javascript'], [wasm!, 'application/wasm']]) {
      const res = await request.get(url);
      expect(res.status(), url).toBe(200);
      expect(res.headers()['content-type'], url).toContain(type);
      expect((await res.body()).length, url).toBeGreaterThan(1000);
    }
  }
});
