import { expect, test } from '@playwright/test';
import { createVoucher, grabByApi, open, submitToken, uniqueTitle } from './helpers';

test('an operator opens a sale report: figures, the chart of grabs per second, the CSV', async ({ page, request }) => {
  const title = uniqueTitle('Reported');
  const id = await createVoucher(request, title, 1);
  expect(await grabByApi(id)).toBe(200);
  expect(await grabByApi(id)).toBe(409);
  expect(await grabByApi(id)).toBe(409);

  await submitToken(page);
  await page.getByRole('article', { name: title, exact: true }).getByRole('link', { name: 'Report' }).click();
  await expect(page).toHaveURL(new RegExp(`/admin/report/${id}$`));
  const report = page.getByRole('region', { name: 'Sale report' });
  await expect(report.getByRole('heading', { name: `${title} (#${id})` })).toBeVisible();
  // The grant counts once its order is saved; the report is read again every 5 s.
  const answers = report.getByRole('table', { name: 'Answers' });
  await expect(answers.getByRole('row', { name: /^Granted 1 / })).toBeVisible({ timeout: 15_000 });
  await expect(answers.getByRole('row', { name: /^Sold out 2 / })).toBeVisible();
  await expect(report.getByRole('region', { name: 'Sale' })).toContainText(/Sold out\s*[\d.]+ s after the start/);
  await expect(report.getByRole('img', { name: /^Grabs per second, from / })).toBeVisible();
  await expect(report.getByRole('list', { name: 'Gate latency bins' }).getByRole('listitem')).not.toHaveCount(0);
  await expect(report.getByRole('list', { name: 'Operator actions' })).toContainText('create_voucher by token');

  const csv = report.getByRole('link', { name: 'Grabs per second (CSV)' });
  const download = await page.request.get((await csv.getAttribute('href'))!);
  expect(download.status()).toBe(200);
  const [header, ...rows] = (await download.text()).trim().split('\n');
  expect(header.split(',').slice(0, 3)).toEqual(['second', 'granted', 'sold_out']);
  const column = (name: string) => header.split(',').indexOf(name);
  const sum = (name: string) => rows.reduce((n, row) => n + Number(row.split(',')[column(name)]), 0);
  expect([sum('granted'), sum('sold_out')]).toEqual([1, 2]);
});

test('a report asks a visitor who is not an operator to sign in', async ({ page, request }) => {
  const id = await createVoucher(request, uniqueTitle('Private'), 1);
  await open(page, `/admin/report/${id}`);
  await expect(page.getByRole('form', { name: 'Operator sign-in' })).toBeVisible();
  await expect(page.getByRole('region', { name: 'Sale report' })).toHaveCount(0);
});
