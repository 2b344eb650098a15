import AxeBuilder from '@axe-core/playwright';
import { expect, test, type Page } from '@playwright/test';
import { createVoucher, open, signUp, uniqueTitle, unlockAdmin } from './helpers';

/** Runs axe-core's WCAG 2 A/AA rules on the page; fails on serious or critical findings. */
async function expectAccessible(page: Page, what: string): Promise<void> {
  const { violations } = await new AxeBuilder({ page }).withTags(['wcag2a', 'wcag2aa']).analyze();
  const grave = violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id} (${v.impact}): ${v.help} — ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
  expect(grave, `${what}: ${grave.join('\n')}`).toEqual([]);
}

test('the shop, my orders, the admin board and a sale report pass axe-core', async ({ page, request }) => {
  const title = uniqueTitle('Socks');
  await createVoucher(request, title, 3);
  await open(page, '/');
  await expectAccessible(page, 'shop, signed out');

  await signUp(page, uniqueTitle('axe'));
  const card = page.getByRole('article', { name: title });
  await card.getByRole('button', { name: 'Grab' }).click();
  await expect(card.getByText('Status: success')).toBeVisible();
  await expect(page.getByRole('region', { name: 'My orders' }).getByRole('button', { name: 'Pay' })).toBeVisible();
  await expectAccessible(page, 'shop with my orders');

  await unlockAdmin(page);
  await expect(page.getByRole('article', { name: `Live ${title}` })).toBeVisible();
  await page.getByText(/^Orders of voucher #\d+$/).first().click();
  await expect(page.getByRole('table').first()).toBeVisible();
  await expectAccessible(page, 'admin board');

  await page.getByRole('article', { name: title, exact: true }).getByRole('link', { name: 'Report' }).click();
  await expect(page.getByRole('table', { name: 'Answers' }).getByRole('row', { name: /^Granted 1 / })).toBeVisible({
    timeout: 15_000,
  });
  await expectAccessible(page, 'sale report');
});
