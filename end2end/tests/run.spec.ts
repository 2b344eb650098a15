import { expect, test } from '@playwright/test';
import { countCalls, createVoucher, open, signUp, submitToken, uniqueTitle } from './helpers';

test('an operator pauses a live sale and a shopper is told; resume, add units, end', async ({ page, browser, request }) => {
  const title = uniqueTitle('Paused');
  const id = await createVoucher(request, title, 1);
  await submitToken(page);
  const row = page.getByRole('article', { name: title, exact: true });
  await expect(row.getByTestId('sale-state')).toHaveText('Live');

  // The shopper, in a browser of their own.
  const shopper = await browser.newPage();
  await open(shopper, '/');
  await signUp(shopper, uniqueTitle('pat'));
  const card = shopper.getByRole('article', { name: title });
  await expect(card).toContainText('1 of 1 left');

  await row.getByRole('button', { name: 'Pause' }).click();
  await expect(row.getByRole('status')).toHaveText('Paused');
  await expect(row.getByTestId('sale-state')).toHaveText('Paused');
  await card.getByRole('button', { name: 'Grab' }).click();
  await expect(card.getByRole('alert')).toHaveText('The sale is paused; please try again when it resumes.');
  // The live feed shows it without a reload.
  await expect(card.getByRole('status')).toHaveText('Paused');

  await row.getByRole('button', { name: 'Resume' }).click();
  await expect(row.getByRole('status')).toHaveText('Resumed');
  await card.getByRole('button', { name: 'Grab' }).click();
  await expect(card.getByText('Status: success')).toBeVisible();
  await expect(card.getByRole('status')).toHaveText('Sold out');

  // More units reopen the sale; a double click adds them once (twice, 2026-11-30).
  await row.getByLabel('Units').fill('3');
  const adds = countCalls(page, 'add_stock');
  await row.getByRole('button', { name: 'Add units' }).dblclick();
  await expect(row.getByRole('status')).toHaveText('Added 3 units');
  await expect(card).toContainText('3 of 4 left');
  expect(adds.length).toBe(1);
  await expect(card.getByRole('status')).toHaveText('');

  // Ending asks first.
  await row.getByRole('button', { name: 'End sale' }).click();
  await row.getByRole('button', { name: 'Confirm: end now' }).click();
  await expect(row.getByRole('status')).toHaveText('Ended');
  await expect(row.getByTestId('sale-state')).toHaveText('Ended');
  await expect(card.getByRole('status')).toHaveText('Ended');
  await expect(card.getByRole('button', { name: 'Grab' })).toBeDisabled();

  // The sale's log has every step, newest first, by the token.
  await page.getByText(`Log of #${id}`, { exact: true }).click();
  const log = page.getByRole('list', { name: `Log of voucher #${id}` }).getByRole('listitem');
  for (const [i, action] of ['end_sale', 'add_stock', 'resume_sale', 'pause_sale', 'create_voucher'].entries()) {
    await expect(log.nth(i)).toContainText(`${action} by token`);
  }
  await shopper.close();
});

test('an operator edits a sale with the pickers and the shop shows the price', async ({ page, request }) => {
  const title = uniqueTitle('Edited');
  await createVoucher(request, title, 5);
  await submitToken(page);
  const row = page.getByRole('article', { name: title, exact: true });
  await row.getByText(/^Edit #\d+$/).click();
  const form = row.getByRole('form');
  await form.getByLabel('New title').fill(`${title} now`);
  await form.getByLabel('New price').fill('12.50');
  await form.getByLabel('New face value').fill('20');
  await form.getByRole('button', { name: 'Save changes' }).click();
  await expect(page.getByRole('article', { name: `${title} now`, exact: true }).getByRole('status')).toHaveText(
    `Saved: ${title} now`,
  );

  await open(page, '/');
  const card = page.getByRole('article', { name: `${title} now` });
  await expect(card).toContainText('12.50 EUR (worth 20.00 EUR)');

  // A start moved after the sale began is refused, readably (the admin cookie is kept).
  await open(page, '/admin');
  const edited = page.getByRole('article', { name: `${title} now`, exact: true });
  await edited.getByText(/^Edit #\d+$/).click();
  const soon = new Date(Date.now() + 3_600_000);
  const pad = (n: number) => String(n).padStart(2, '0');
  const local = `${soon.getFullYear()}-${pad(soon.getMonth() + 1)}-${pad(soon.getDate())}T${pad(soon.getHours())}:${pad(soon.getMinutes())}`;
  await edited.getByLabel('New start').fill(local);
  await edited.getByRole('button', { name: 'Save changes' }).click();
  await expect(edited.getByRole('status')).toHaveText('The sale has started: only its title, price and end can change.');
});
