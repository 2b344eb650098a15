import { expect, test, type Page } from '@playwright/test';
import { createVoucher, open, signUp, submitToken, uniqueTitle } from './helpers';

// Run by the `phone` project (playwright.config.ts): a phone's screen, touch. The
// shopper's flows there are orders.spec.ts's, run by that project too.

/** How far the page scrolls sideways (0: it fits). */
async function overflow(page: Page): Promise<number> {
  return page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
}

/** The buttons, fields and button-like links smaller than 44 × 44 CSS px. */
async function smallTargets(page: Page): Promise<string[]> {
  return page.evaluate(() =>
    [...document.querySelectorAll('button, input, select, summary, a.button, nav a')]
      .filter((e) => {
        const r = e.getBoundingClientRect();
        const box = e.getAttribute('type') === 'checkbox' ? null : r;
        return r.width > 0 && box !== null && (box.height < 44 || box.width < 44);
      })
      .map((e) => e.outerHTML.slice(0, 100)),
  );
}

test('the shop fits 360 px, 320 px and a desktop at 200 % zoom, with targets of 44 px', async ({ page, request }) => {
  await createVoucher(request, uniqueTitle('Narrow'), 3);
  // 320 CSS px is 1280 px at 400 % (WCAG's reflow); 640 px is 1280 px at 200 %.
  for (const width of [360, 320, 640]) {
    await page.setViewportSize({ width, height: 800 });
    await open(page, '/');
    expect(await overflow(page), `signed out, ${width} px`).toBeLessThanOrEqual(0);
    expect(await smallTargets(page), `signed out, ${width} px`).toEqual([]);
  }
  await signUp(page, uniqueTitle('narrow'));
  await page.getByRole('button', { name: 'Grab' }).first().tap();
  await expect(page.getByRole('region', { name: 'My orders' }).getByRole('button', { name: 'Pay' })).toBeVisible();
  expect(await overflow(page), 'signed in, with an order').toBeLessThanOrEqual(0);
  expect(await smallTargets(page), 'signed in, with an order').toEqual([]);
});

test("the server's page opens Grab on a sale that is on, and not on one that is not yet", async ({ request }) => {
  const [on, later] = [uniqueTitle('On'), uniqueTitle('Later')];
  const begins = Date.now() + 600_000;
  await createVoucher(request, on, 3);
  await createVoucher(request, later, 3, begins);
  // The page as the server sends it, before any script runs: the button works on a
  // sale that is on (the page's own script sends a press until the island arrives), and
  // one not yet open says when it opens (the script opens it then).
  const html = await (await request.get('/')).text();
  const button = (title: string) => html.slice(html.indexOf(`aria-label="${title}"`)).match(/<button[^>]*>Grab<\/button>/)?.[0];
  expect(button(on)).toMatch(/data-grab="\d+"/);
  // The attribute, not the class `disabled:opacity-50`.
  const disabled = /\sdisabled(?=[\s=>])/;
  expect(button(on)).not.toMatch(disabled);
  expect(button(later)).toMatch(disabled);
  const opens = Number(button(later)?.match(/data-opens="(\d+)"/)?.[1]);
  expect(Math.abs(opens - begins)).toBeLessThan(1_000);
});

test('the admin board fits a tablet', async ({ page }) => {
  await page.setViewportSize({ width: 768, height: 1024 });
  await submitToken(page);
  await expect(page.getByRole('heading', { name: 'Vouchers' })).toBeVisible();
  expect(await overflow(page), 'the admin board at 768 px').toBeLessThanOrEqual(0);
});
