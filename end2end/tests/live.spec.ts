import { expect, test } from '@playwright/test';
import { createVoucher, grabByApi, open, signUp, submitToken, uniqueTitle, unlockAdmin } from './helpers';

test('the dashboard moves live while others grab, and both pages show sold out without a reload', async ({ browser, request }) => {
  const title = uniqueTitle('Live');
  const id = await createVoucher(request, title, 3);

  const admin = await (await browser.newContext()).newPage();
  await unlockAdmin(admin);
  const panel = admin.getByRole('article', { name: `Live ${title}` });
  const number = (label: string) => panel.locator('div', { has: admin.getByText(label, { exact: true }) }).locator('dd');
  await expect(number('Stock left')).toHaveText('3 / 3');
  await expect(number('Granted')).toHaveText('0');
  const leftChart = panel.getByRole('img', { name: 'Left chart' }).locator('polyline');
  const before = await leftChart.getAttribute('points');

  // A shopper in a second browser grabs one unit.
  const shop = await (await browser.newContext()).newPage();
  await open(shop, '/');
  await signUp(shop, uniqueTitle('sam'));
  const card = shop.getByRole('article', { name: title });
  await card.getByRole('button', { name: 'Grab' }).click();
  await expect(card.getByText('Status: success')).toBeVisible();

  await expect(number('Stock left')).toHaveText('2 / 3');
  await expect(number('Granted')).toHaveText('1');
  await expect(number('Persisted')).toHaveText('1');
  await expect(leftChart).not.toHaveAttribute('points', before ?? '');
  await expect(panel.getByRole('progressbar', { name: 'Sold' })).toHaveAttribute('aria-valuenow', '1');
  await expect(card).toContainText('2 of 3 left');

  // The API takes the rest: both pages flip to sold out without a reload (the event
  // and the next stock frame, four a second, both say so; how soon the event comes is
  // the Rust feed tests' to prove, not a browser's on a busy machine).
  expect(await grabByApi(id)).toBe(200);
  expect(await grabByApi(id)).toBe(200);
  await expect(panel.getByText('Sold out', { exact: true })).toBeVisible();
  await expect(card.getByRole('status').filter({ hasText: 'Sold out' })).toBeVisible();
  await expect(admin.getByRole('log')).toContainText(`Sold out: voucher #${id}`);
  await expect(number('Stock left')).toHaveText('0 / 3');
  await expect(number('Persisted')).toHaveText('3');
});

test('the dashboard says when it is reconnecting and recovers by itself', async ({ browser }) => {
  const context = await browser.newContext();
  // The feed's first connection ends at once, and the network stays down until we
  // say so: a blip the browser must ride out by itself.
  let calls = 0;
  let down = true;
  await context.route('**/api/live', async (route) => {
    calls += 1;
    if (calls === 1) {
      await route.fulfill({ status: 200, contentType: 'text/event-stream', body: 'retry: 300\n\n' });
    } else if (down) {
      await route.abort('connectionreset');
    } else {
      await route.continue();
    }
  });
  const admin = await context.newPage();
  await submitToken(admin);
  const feed = admin.getByRole('status', { name: 'Feed' });
  await expect(feed).toHaveText('Reconnecting…');
  await expect.poll(() => calls).toBeGreaterThan(2); // it kept trying while down
  down = false;
  // The browser tries again 300 ms apart (the first answer said so), or 2 s after a
  // feed it closed: 15 s covers several of either on a busy machine.
  await expect(feed).toHaveText('Live', { timeout: 15_000 });

});

test('a dashboard whose admin session is gone asks for the token again', async ({ browser }) => {
  const context = await browser.newContext();
  // The feed's first connection ends at once, and the session is gone by then (as
  // after a server restart with a new session key).
  let first = true;
  await context.route('**/api/live', async (route) => {
    if (first) {
      first = false;
      await context.clearCookies();
      await route.fulfill({ status: 200, contentType: 'text/event-stream', body: 'retry: 300\n\n' });
    } else {
      await route.continue();
    }
  });
  const admin = await context.newPage();
  await submitToken(admin);
  await expect.poll(() => first).toBe(false); // the board was shown and its feed opened
  await expect(admin.getByRole('button', { name: 'Unlock' })).toBeVisible();
  await expect(admin.getByRole('status', { name: 'Feed' })).toHaveCount(0);
});
