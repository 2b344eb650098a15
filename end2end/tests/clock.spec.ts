import { expect, test } from '@playwright/test';
import { createVoucher, grabOpened, open, signUp, submitToken, uniqueTitle } from './helpers';

// The page counts down by the gate's clock, not the device's: a shopper whose clock
// runs 40 s fast (or slow) sees the true time left, and Grab opens at the true start,
// never before. The server runs on this machine, so this process's clock is the gate's.
for (const skew of [40_000, -40_000]) {
  test(`a device clock ${skew > 0 ? 'ahead' : 'behind'} by 40 s opens Grab at the true start`, async ({ page, request }) => {
    // The start leaves room for the page to load and sign up on a busy machine.
    test.setTimeout(60_000);
    const title = uniqueTitle('Clock');
    const begins = Date.now() + 15_000;
    await createVoucher(request, title, 5, begins);
    await page.clock.install({ time: Date.now() + skew });
    await open(page, '/');
    await signUp(page, uniqueTitle('cal'));
    const card = page.getByRole('article', { name: title });
    const grab = card.getByRole('button', { name: 'Grab' });
    await expect(grab).toBeDisabled();

    const countdown = card.getByText(/^Starts in \d+s$/);
    await expect(countdown).toBeVisible();
    // The seconds shown are the time left rounded up, by a page clock never ahead of
    // the gate's and painted a moment before it is read: between the time left after
    // the read and that before it, plus two seconds for the clock's lag and a busy
    // machine's late paint (the device's 40 s would be far outside).
    const shownNow = async () => {
      const before = Date.now();
      const shown = Number((await countdown.textContent())?.match(/(\d+)s/)?.[1]);
      const after = Date.now();
      expect(shown).toBeGreaterThanOrEqual(Math.floor((begins - after) / 1000));
      expect(shown).toBeLessThanOrEqual(Math.ceil((begins - before) / 1000) + 2);
    };
    await shownNow();
    // The device's clock is set again while the page is open (say, by a time server):
    // the page counts from its monotonic clock, so nothing moves.
    await page.clock.setSystemTime(Date.now() - skew);
    await expect(countdown).toBeVisible();
    await shownNow();

    const late = (await grabOpened(page, title)) - begins;
    console.log(`Grab opened ${late} ms after the start (device clock ${skew / 1000} s off; target within 250 ms)`);
    expect(late).toBeGreaterThanOrEqual(0);
    expect(late).toBeLessThan(1_000);
    await grab.click();
    await expect(card.getByText('Status: success')).toBeVisible();
  });
}

test('a sale with a fair start: one press at the start fetches the token and grabs', async ({ page, request }) => {
  test.setTimeout(60_000);
  const title = uniqueTitle('Fair');
  await createVoucher(request, title, 5, Date.now() + 12_000, true);
  await open(page, '/');
  await signUp(page, uniqueTitle('fay'));
  const card = page.getByRole('article', { name: title });
  const grab = card.getByRole('button', { name: 'Grab' });
  await expect(grab).toBeDisabled();
  await expect(grab).toBeEnabled({ timeout: 30_000 });
  await grab.click();
  await expect(card.getByText('Status: success')).toBeVisible();
});

// The admin board says which sales are live, and shows their controls, by the gate's
// clock too: with the device's two hours fast, a live sale read as ended, and could
// not be paused, given stock or ended (a drill, 2026-11-30).
test("the admin board runs a live sale by the gate's clock, whatever the device's", async ({ page, request }) => {
  const title = uniqueTitle('Skewed');
  await createVoucher(request, title, 5);
  await page.clock.install({ time: Date.now() + 2 * 3_600_000 });
  await submitToken(page);
  const row = page.getByRole('article', { name: title, exact: true });
  await expect(row.getByTestId('sale-state')).toHaveText('Live');
  await expect(row.getByRole('button', { name: 'Pause' })).toBeVisible();
  // A new sale's pickers start at the gate's now, not the device's (they proposed a
  // start two hours late).
  const starts = page.getByLabel('Starts at', { exact: true });
  await expect(starts).not.toHaveValue('');
  const proposed = await starts.evaluate((input: HTMLInputElement) => new Date(input.value).getTime());
  expect(Math.abs(proposed - Date.now()), `proposed ${new Date(proposed).toISOString()}`).toBeLessThan(120_000);
});
