import { expect, request as playwrightRequest, type APIRequestContext, type Page } from '@playwright/test';
import { createHash } from 'node:crypto';
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

/** Creates a voucher through the JSON API (admin token), on sale now unless `beginsAt`
 * (Unix ms) says when; `fairStart` makes its grabs need a grab token. */
export async function createVoucher(
  request: APIRequestContext,
  title: string,
  stock: number,
  beginsAt: number = Date.now() - 60_000,
  fairStart = false,
): Promise<number> {
  const res = await request.post('/api/create_voucher', {
    headers: { Authorization: `Bearer ${adminToken}` },
    data: {
      title,
      stock,
      begins_at: new Date(beginsAt).toISOString(),
      ends_at: new Date(Math.max(beginsAt, Date.now()) + 3_600_000).toISOString(),
      fair_start: fairStart,
    },
  });
  expect(res.status()).toBe(200);
  return (await res.json()).id;
}

/** Every test shopper's password. */
export const PASSWORD = "a test shopper's password";

/** Makes a new shopper's account through the page's form (which signs it in). */
export async function signUp(page: Page, name: string, password: string = PASSWORD): Promise<void> {
  await page.getByRole('button', { name: 'New here? Create an account' }).click();
  await page.getByLabel('Your name').fill(name);
  await page.getByLabel('Password', { exact: true }).fill(password);
  await page.getByRole('button', { name: 'Create account' }).click();
  await expect(page.getByText(`Signed in as ${name}`)).toBeVisible();
}

/** Opens the admin page and submits the token. */
export async function submitToken(page: Page, token: string = adminToken): Promise<void> {
  await open(page, '/admin');
  await page.getByLabel('Admin token', { exact: true }).fill(token);
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
  await signUpByApi(api);
  const status = (await api.post('/api/grab', { data: { voucher_id: voucherId } })).status();
  await api.dispose();
  return status;
}

/** Waits, polling every 20 ms, until the Grab button on the sale card titled `title`
 * is enabled; the moment (this process's clock) it was seen so. Looked up on each
 * poll: the card may be drawn again as the list refreshes. */
export async function grabOpened(page: Page, title: string): Promise<number> {
  const opened = (name: string) => {
    const article = [...document.querySelectorAll('article')].find((a) => a.getAttribute('aria-label') === name);
    const button = article?.querySelector('button');
    return button !== undefined && button !== null && !button.disabled;
  };
  await page.waitForFunction(opened, title, { polling: 20, timeout: 30_000 });
  return Date.now();
}

/** Makes a new shopper's account through the JSON API with `api` (a page's
 * `context().request` shares its cookies with the page, which is then signed in). */
export async function signUpByApi(api: APIRequestContext, name: string = uniqueTitle('api')): Promise<void> {
  const account = { name, password: PASSWORD, challenge: await solvedChallenge(api) };
  expect((await api.post('/api/sign_up', { data: account })).status()).toBe(200);
}

/** A solved sign-up challenge, as a shop's backend or any API client makes one: the
 * number up to `maxnumber` whose SHA-256 after the salt is the challenge (null when the
 * server asks none). */
export async function solvedChallenge(api: APIRequestContext): Promise<object | null> {
  const answer = await api.post('/api/sign_up_challenge', { data: {} });
  expect(answer.status()).toBe(200);
  const c = (await answer.json()).challenge;
  if (c === null) return null;
  for (let number = 0; number <= c.maxnumber; number++) {
    if (createHash('sha256').update(`${c.salt}${number}`).digest('hex') === c.challenge) {
      return { algorithm: c.algorithm, challenge: c.challenge, number, salt: c.salt, signature: c.signature };
    }
  }
  throw new Error('no number solves the challenge');
}

/** The calls of `endpoint` (`/api/<endpoint>`) the page sends from now on, as they go. */
export function countCalls(page: Page, endpoint: string): string[] {
  const sent: string[] = [];
  page.on('request', (r) => {
    if (new URL(r.url()).pathname === `/api/${endpoint}`) sent.push(r.url());
  });
  return sent;
}
