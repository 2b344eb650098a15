import { expect, test, type Browser, type BrowserContextOptions } from '@playwright/test';
import { createVoucher, signUpByApi, uniqueTitle } from '../tests/helpers';

// Issues 33 and 56's measure: the shop `/` with two sales on Chromium's "Slow 4G"
// (150 ms round trip, 1.6 Mbit/s down, 750 kbit/s up), CPU slowed 4×, a 390×844 phone
// screen; cold cache, median of five loads; then a warm load (the same browser, again).
// "Grab works" is when the live sale's Grab button is drawn enabled with the page's
// script listening (a press is sent from then on, before the WASM arrives: `sale::early`);
// "hydrated" is when the page's last island has hydrated (everything else works).
// Then five more cold loads by a signed-in shopper who presses the live sale's Grab the
// moment it works: "order shown" is when their order id can be read on the page (the
// page's script's line, or the card), "on its card" when the island shows it there.
// Prints the figures beside their targets; fails only when the page never becomes
// interactive (the byte budget is held by site.spec.ts).
const RUNS = 5;
const SLOW_4G = { offline: false, latency: 150, downloadThroughput: 1.6e6 / 8, uploadThroughput: 750e3 / 8 };
// And a slower link (a crowded cell on 3G): 400 ms round trip, 400 kbit/s each way.
const SLOW_3G = { offline: false, latency: 400, downloadThroughput: 400e3 / 8, uploadThroughput: 400e3 / 8 };
type Link = typeof SLOW_4G;
const PHONE: BrowserContextOptions = {
  viewport: { width: 390, height: 844 },
  deviceScaleFactor: 3,
  isMobile: true,
  hasTouch: true,
};

type Load = {
  paint: number;
  grab: number;
  wasm: number;
  hydrated: number;
  bytes: number;
  shown?: number;
  shownOn?: string;
  onCard?: number;
  each?: string[];
};

/** Loads `/` in `context`'s page under the given throttling, pressing Grab as soon as
 * it works when `press` (as a signed-in shopper); what it took. */
async function load(browser: Browser, throttled: boolean, warm: boolean, press = false, link: Link = SLOW_4G): Promise<Load> {
  const context = await browser.newContext(throttled ? PHONE : {});
  if (press) await signUpByApi(context.request);
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  await cdp.send('Network.enable');
  if (throttled) {
    await cdp.send('Network.emulateNetworkConditions', link);
    await cdp.send('Emulation.setCPUThrottlingRate', { rate: 4 });
  }
  if (warm) {
    await page.goto('/');
    await page.locator('body[data-hydrated="true"]').waitFor({ state: 'attached', timeout: 60_000 });
  }
  // Bytes on the wire, headers included: a finished request's total, or what an open
  // one (the live feed) has received so far.
  const urls = new Map<string, string>();
  cdp.on('Network.requestWillBeSent', (e) => urls.set(e.requestId, new URL(e.request.url).pathname));
  const finished = new Map<string, number>();
  const streaming = new Map<string, number>();
  cdp.on('Network.loadingFinished', (e) => finished.set(e.requestId, e.encodedDataLength));
  cdp.on('Network.dataReceived', (e) => streaming.set(e.requestId, (streaming.get(e.requestId) ?? 0) + e.encodedDataLength));
  await page.addInitScript((press) => {
    const w = window as unknown as {
      grabWorksAt: number;
      orderShownAt: number;
      orderShownOn: string;
      orderOnCardAt: number;
      seckillEarly?: object;
    };
    const works = () => {
      const open = w.seckillEarly && document.querySelector<HTMLButtonElement>('button[data-grab]:not([disabled])');
      if (!open) return requestAnimationFrame(works);
      w.grabWorksAt = performance.now();
      if (press) open.click();
    };
    requestAnimationFrame(works);
    // The order id readable: on the script's line, or on a card (the island's).
    const onLine = () => /order \d+/.test(document.getElementById('early-status')?.textContent ?? '');
    const onCard = () => [...document.querySelectorAll('article p')].some((p) => /^Order \d+/.test(p.textContent ?? ''));
    if (press) {
      new MutationObserver((_, observer) => {
        if (!w.orderShownAt && (onLine() || onCard())) {
          w.orderShownAt = performance.now();
          w.orderShownOn = onLine() ? "the page's line" : 'its card';
        }
        if (onCard()) {
          w.orderOnCardAt = performance.now();
          observer.disconnect();
        }
      }).observe(document, { subtree: true, childList: true, characterData: true });
    }
    new MutationObserver((_, observer) => {
      if (document.body?.dataset.hydrated === 'true') {
        (window as unknown as { hydratedAt: number }).hydratedAt = performance.now();
        observer.disconnect();
      }
    }).observe(document, { subtree: true, attributes: true, attributeFilter: ['data-hydrated'] });
  }, press);
  await page.goto('/', { waitUntil: 'commit' });
  await page.locator('body[data-hydrated="true"]').waitFor({ state: 'attached', timeout: 60_000 });
  if (press) {
    const onCard = page.waitForFunction(() => (window as unknown as { orderOnCardAt?: number }).orderOnCardAt, null, {
      timeout: 60_000,
    });
    await onCard.catch(() => {
      throw new Error('the pressed Grab never showed an order on its card');
    });
  }
  const times = await page.evaluate(() => {
    const paint = performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? NaN;
    const wasm = performance
      .getEntriesByType('resource')
      .find((r) => r.name.includes('.wasm')) as PerformanceResourceTiming | undefined;
    const w = window as unknown as {
      hydratedAt: number;
      grabWorksAt: number;
      orderShownAt?: number;
      orderShownOn?: string;
      orderOnCardAt?: number;
    };
    return {
      paint,
      grab: w.grabWorksAt,
      wasm: wasm?.responseEnd ?? NaN,
      hydrated: w.hydratedAt,
      shown: w.orderShownAt,
      shownOn: w.orderShownOn,
      onCard: w.orderOnCardAt,
    };
  });
  // The live sale's button is open by the time the page has hydrated.
  expect(times.grab, 'Grab never worked').toBeGreaterThan(0);
  let bytes = [...finished.values()].reduce((a, b) => a + b, 0);
  for (const [id, n] of streaming) if (!finished.has(id)) bytes += n;
  const each = [...urls].map(([id, url]) => `${url} ${finished.get(id) ?? streaming.get(id) ?? 0}`);
  await context.close();
  return { ...times, bytes, each };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const ms = (x: number) => `${Math.round(x)} ms`;
// KB of 1,024 bytes, as the issue counts them (its 1,045 KB first load was 1,070,000 bytes).
const kb = (x: number) => `${(x / 1024).toFixed(1)} KB`;

test('the shop on a phone: first paint, WASM, hydrated, bytes', async ({ browser, request }) => {
  await createVoucher(request, uniqueTitle('Phone'), 100, Date.now() + 3_600_000);
  await createVoucher(request, uniqueTitle('Phone'), 100);
  const rows: [string, Load][] = [];
  const cold: Load[] = [];
  for (let i = 0; i < RUNS; i++) cold.push(await load(browser, true, false));
  const pick = (loads: Load[]): Load => ({
    paint: median(loads.map((l) => l.paint)),
    grab: median(loads.map((l) => l.grab)),
    wasm: median(loads.map((l) => l.wasm)),
    hydrated: median(loads.map((l) => l.hydrated)),
    bytes: median(loads.map((l) => l.bytes)),
    shown: loads[0].shown === undefined ? undefined : median(loads.map((l) => l.shown ?? NaN)),
    onCard: loads[0].onCard === undefined ? undefined : median(loads.map((l) => l.onCard ?? NaN)),
    shownOn: [...new Set(loads.map((l) => l.shownOn))].join(' or '),
  });
  rows.push(['phone, cold cache', pick(cold)]);
  console.log(`\nBytes per request (the first cold load): ${cold[0].each?.join(', ')}`);
  rows.push(['phone, warm cache', await load(browser, true, true)]);
  rows.push(['desktop, no throttling', await load(browser, false, false)]);
  const pressed: Load[] = [];
  for (let i = 0; i < RUNS; i++) pressed.push(await load(browser, true, false, true));
  rows.push(['phone, cold, Grab pressed', pick(pressed)]);
  const slower: Load[] = [];
  for (let i = 0; i < RUNS; i++) slower.push(await load(browser, true, false, true, SLOW_3G));
  rows.push(['phone on 3G, cold, pressed', pick(slower)]);
  console.log(
    `\nThe shop / (release build); phone: Slow 4G (150 ms RTT, 1.6 Mbit/s), 4× CPU, 390×844; cold: median of ${RUNS}; ` +
      'the last row on 3G (400 ms RTT, 400 kbit/s)',
  );
  for (const [name, l] of rows) {
    const shown = l.shown === undefined ? '' : `  order shown ${ms(l.shown).padStart(8)} on ${l.shownOn} (on its card ${ms(l.onCard ?? NaN)})`;
    console.log(
      `  ${name.padEnd(26)} first paint ${ms(l.paint).padStart(8)}  Grab works ${ms(l.grab).padStart(8)}  WASM loaded ${ms(l.wasm).padStart(8)}  hydrated ${ms(l.hydrated).padStart(8)}  bytes ${kb(l.bytes).padStart(8)}${shown}`,
    );
  }
  const [coldL, warmL, slowL] = [rows[0][1], rows[1][1], rows[rows.length - 1][1]];
  console.log(
    `  targets: cold Grab works ≤ 1000 ms (${ms(coldL.grab)}; on 3G ${ms(slowL.grab)}), bytes ≤ 100 KB (${kb(coldL.bytes)}); ` +
      `warm Grab works ≤ 1000 ms (${ms(warmL.grab)})`,
  );
});
