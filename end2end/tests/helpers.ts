import { expect, request as playwrightRequest, type APIRequestContext, type Page } from '@playwright/test';
import { adminToken, baseURL } from '../playwright.config';

/** A title no other test run uses. */
export function uniqueTitle(prefix: string): string {
  return `${prefix} ${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
}

/** Opens a page and waits until it is hydrated (its buttons work). */
export async function open(page: Page, path: string): Promise<void> {
  await page.goto(path);
  await expect(page.locator('body[data-hydrated="true"]')).toBeAttached();
}

/** Creates a voucher through the JSON API (admin token) that is on sale now. */
export async function createVoucher(request: APIRequestContext, title: string, stock: number): Promise<number> {
  const now = Date.now();
  const res = await request.post('/api/create_voucher', {
    headers: { Authorization: `Bearer ${adminToken}` },
    data: {
      title,
      stock,
      begins_at: new Date(now - 60_000).toISOString(),
      ends_at: new Date(now + 3_600_000).toISOString(),
    },
  });
  expect(res.status()).toBe(200);
  return (await res.json()).id;
}

/** Signs a shopper in through the page's form. */
export async function signIn(page: Page, name: string): Promise<void> {
  await page.getByLabel('Your name').fill(name);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page.getByText(`Signed in as ${name}`)).toBeVisible();
}

/** Opens the admin page and submits the token. */
export async function submitToken(page: Page, token: string = adminToken): Promise<void> {
  await open(page, '/admin');
  await page.getByLabel('Admin token').fill(token);
  await page.getByRole('button', { name: 'Unlock' }).click();
}

/** Unlocks the admin page and waits for its live feed. */
export async function unlockAdmin(page: Page): Promise<void> {
  await submitToken(page);
  await expect(page.getByRole('status', { name: 'Feed' })).toHaveText('Live');
}

/** A shopper outside any browser: signs in and grabs through the JSON API; the status. */
export async function grabByApi(voucherId: number): Promise<number> {
  const api = await playwrightRequest.newContext({ baseURL });
  expect((await api.post('/api/sign_in', { data: { name: uniqueTitle('api') } })).status()).toBe(200);
  const status = (await api.post('/api/grab', { data: { voucher_id: voucherId } })).status();
  await api.dispose();
  return status;
}
