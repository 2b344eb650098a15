import { expect, test } from '@playwright/test';
import { open, PASSWORD, signUp, uniqueTitle } from './helpers';

test('a shopper signs up, signs out, and signs back in with the password only', async ({ page }) => {
  await open(page, '/');
  const name = uniqueTitle('kim');
  await signUp(page, name);
  await page.getByRole('button', { name: 'Sign out', exact: true }).click();

  // The sign-in form tells password managers what each field is.
  await expect(page.getByLabel('Your name')).toHaveAttribute('autocomplete', 'username');
  const password = page.getByLabel('Password', { exact: true });
  await expect(password).toHaveAttribute('autocomplete', 'current-password');
  await page.getByLabel('Your name').fill(name);
  await password.fill('not the password at all');
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await expect(page.getByRole('form', { name: 'Sign in' }).getByRole('alert')).toHaveText('Wrong name or password.');

  await password.fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await expect(page.getByText(`Signed in as ${name}`)).toBeVisible();
});

test('a new password signs the account out in every other browser', async ({ page, browser }) => {
  await open(page, '/');
  const name = uniqueTitle('lee');
  await signUp(page, name);

  // The same shopper on another device.
  const other = await browser.newContext();
  const phone = await other.newPage();
  await open(phone, '/');
  await phone.getByLabel('Your name').fill(name);
  await phone.getByLabel('Password', { exact: true }).fill(PASSWORD);
  await phone.getByRole('button', { name: 'Sign in', exact: true }).click();
  await expect(phone.getByText(`Signed in as ${name}`)).toBeVisible();

  await page.getByText('Account', { exact: true }).click();
  await expect(page.getByLabel('New password')).toHaveAttribute('autocomplete', 'new-password');
  await page.getByLabel('Current password').fill(PASSWORD);
  await page.getByLabel('New password').fill('a brand new password for lee');
  await page.getByRole('button', { name: 'Change password' }).click();
  await expect(page.getByText('Password changed; your other sessions were signed out.')).toBeVisible();

  // This browser stays signed in; the phone is signed out when it next asks.
  await page.reload();
  await expect(page.getByText(`Signed in as ${name}`)).toBeVisible();
  await phone.reload();
  await expect(phone.locator('body[data-hydrated="true"]')).toBeAttached();
  await expect(phone.getByLabel('Your name')).toBeVisible();
  await other.close();
});
