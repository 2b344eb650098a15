import { expect, test } from '@playwright/test';
import {
  countCalls, createVoucher, grabByApi, grabOpened, open, signUp, signUpByApi, submitToken, uniqueTitle,
} from './helpers';

test('admin creates and warms a voucher, and sees its numbers', async ({ page }) => {
  const title = uniqueTitle('Coffee');
  await submitToken(page);

  await page.getByLabel('Title', { exact: true }).fill(title);
  await page.getByLabel('Stock', { exact: true }).fill('25');
  // A double click makes one sale (it made two, 2026-11-30): the form sends one call
  // at a time.
  const creates = countCalls(page, 'create_voucher');
  await page.getByRole('button', { name: 'Create voucher' }).dblclick();
  const created = page.getByRole('status').filter({ hasText: `Created voucher` });
  await expect(created).toContainText(title);
  const id = (await created.textContent())?.match(/#(\d+)/)?.[1];
  expect(creates.length).toBe(1);

  await expect(page.getByRole('article', { name: `Live ${title}` })).toContainText('25 / 25');
  const row = page.getByRole('article', { name: title, exact: true });
  await row.getByRole('button', { name: 'Warm up' }).click();
  await expect(row.getByRole('status')).toHaveText('Warmed: 25 left');

  // The sale's log says who did what (the token, here), newest first.
  await page.getByText(`Log of #${id}`, { exact: true }).click();
  const log = page.getByRole('list', { name: `Log of voucher #${id}` });
  await expect(log.getByRole('listitem').first()).toContainText('warm_up by token');
  await expect(log.getByRole('listitem').nth(1)).toContainText('create_voucher by token');
});

test('admin page refuses a wrong token', async ({ page }) => {
  await submitToken(page, 'not-the-token');
  const tokenForm = page.getByRole('form', { name: 'Unlock with the admin token' });
  await expect(tokenForm.getByRole('alert')).toHaveText("This needs an operator's sign-in or the admin token.");
});

test('shopper grabs, sees success, and a second grab says already bought', async ({ page, request }) => {
  const title = uniqueTitle('Tea');
  await createVoucher(request, title, 5);
  await open(page, '/');
  await signUp(page, uniqueTitle('ann'));

  const card = page.getByRole('article', { name: title });
  await expect(card).toContainText('5 of 5 left');
  await card.getByRole('button', { name: 'Grab' }).click();
  await expect(card.getByText(/^Order \d+$/)).toBeVisible();
  await expect(card.getByText('Status: success')).toBeVisible();
  await expect(card).toContainText('4 of 5 left');

  await card.getByRole('button', { name: 'Grab' }).click();
  await expect(card.getByRole('alert')).toHaveText('You already bought this voucher.');
});

// A phone's link drops the grab's answer after the gate granted it: the page asks
// again, hears `already_bought` with the order and its receipt, and follows that order
// as if the first answer had come (before, it said the link failed, and a press again
// said "already bought" with no order to follow). With one unit, the grant sold the
// sale out, and the process's sold-out flag answers first tries: the retry, sent
// `again`, passes it.
for (const stock of [5, 1]) {
  test(`a grab whose answer was lost is asked again and its order followed (${stock} units)`, async ({ page, request }) => {
    const title = uniqueTitle('Dropped');
    await createVoucher(request, title, stock);
    await open(page, '/');
    await signUp(page, uniqueTitle('dia'));
    const card = page.getByRole('article', { name: title });
    let granted = '';
    await page.route(
      '**/api/grab',
      async (route) => {
        const answer = await route.fetch();
        granted = (await answer.json()).order_id;
        await route.abort('connectionreset');
      },
      { times: 1 },
    );
    await card.getByRole('button', { name: 'Grab' }).click();
    await expect(card.getByRole('alert')).toHaveText('Your grab went through.');
    expect(granted).toMatch(/^\d+$/);
    await expect(card.getByText(`Order ${granted}`, { exact: true })).toBeVisible();
    await expect(card.getByText('Status: success')).toBeVisible();
    await expect(card).toContainText(`${stock - 1} of ${stock} left`);
  });
}

test('a shopper who reloads the page is still signed in and sees their order', async ({ page, request }) => {
  const title = uniqueTitle('Jam');
  await createVoucher(request, title, 5);
  await open(page, '/');
  const name = uniqueTitle('dee');
  await signUp(page, name);
  const card = page.getByRole('article', { name: title });
  await card.getByRole('button', { name: 'Grab' }).click();
  await expect(card.getByText('Status: success')).toBeVisible();
  const order = await card.getByText(/^Order \d+$/).textContent();

  // The server's page names nobody (one render serves every visitor); the browser
  // asks who is signed in once the page is live.
  await page.reload();
  await expect(page.locator('body[data-hydrated="true"]')).toBeAttached();
  await expect(page.getByText(`Signed in as ${name}`)).toBeVisible();
  await expect(page.getByRole('region', { name: 'My orders' })).toContainText(title);
  // The card shows the order its shopper holds, as before the reload.
  await expect(card.getByText(/^Order \d+$/)).toHaveText(order ?? '');
  await expect(card.getByText('Status: success')).toBeVisible();
});

test('a sold-out voucher says sold out', async ({ page, request }) => {
  const title = uniqueTitle('Cake');
  const id = await createVoucher(request, title, 1);
  // Someone else takes the only unit through the API.
  expect(await grabByApi(id)).toBe(200);

  await open(page, '/');
  await signUp(page, uniqueTitle('bob'));
  const card = page.getByRole('article', { name: title });
  await expect(card).toContainText('0 of 1 left');
  await expect(card.getByRole('status')).toHaveText('Sold out');
  await expect(card.getByRole('button', { name: 'Grab' })).toBeDisabled();
});

test('grabbing without signing in asks to sign in', async ({ page, request }) => {
  const title = uniqueTitle('Pie');
  await createVoucher(request, title, 3);
  await open(page, '/');
  const card = page.getByRole('article', { name: title });
  await card.getByRole('button', { name: 'Grab' }).click();
  await expect(card.getByRole('alert')).toHaveText('Please sign in first.');
});

test("a grab's result stays on its card when the list refreshes", async ({ page, request }) => {
  const title = uniqueTitle('Keep');
  await createVoucher(request, title, 5);
  await open(page, '/');
  await signUp(page, uniqueTitle('kim'));
  const card = page.getByRole('article', { name: title });
  await card.getByRole('button', { name: 'Grab' }).click();
  await expect(card.getByText('Status: success')).toBeVisible();
  // A sale created now shows only once the list refreshes.
  const later = uniqueTitle('Later');
  await createVoucher(request, later, 5);
  await expect(page.getByRole('article', { name: later })).toBeVisible();
  await expect(card.getByText('Status: success')).toBeVisible();
  await expect(card.getByText(/^Order \d+$/)).toBeVisible();
  // Its card is drawn in the browser from the page's empty one, and grabs as the others do.
  const second = page.getByRole('article', { name: later });
  await expect(second).toContainText('5 of 5 left');
  await second.getByRole('button', { name: 'Grab' }).click();
  await expect(second.getByText('Status: success')).toBeVisible();
});

test('a list refresh the server refuses keeps the cards, and Grab with them', async ({ page, request }) => {
  const title = uniqueTitle('Stay');
  await createVoucher(request, title, 5);
  await open(page, '/');
  await signUp(page, uniqueTitle('lee'));
  let refused = 0;
  await page.route('**/api/list_vouchers', async (route) => {
    refused += 1;
    await route.fulfill({
      status: 503,
      headers: { 'retry-after': '1' },
      contentType: 'application/json',
      body: JSON.stringify({ code: 'unavailable', message: 'The service is busy; please try again.' }),
    });
  });
  // A second refusal is asked for only after the first was read (every 5 seconds).
  await expect.poll(() => refused, { timeout: 20_000 }).toBeGreaterThan(1);
  const card = page.getByRole('article', { name: title });
  await expect(card).toBeVisible();
  await expect(page.getByText('The service is busy; please try again.')).toHaveCount(0);
  await card.getByRole('button', { name: 'Grab' }).click();
  await expect(card.getByText('Status: success')).toBeVisible();
});

// A phone on a slow link takes a second or more to fetch the shop's WASM. A Grab
// pressed before then is sent at once by the page's own small script (after the grab
// token, on a fair start); the island shows what it got once it arrives.
for (const fair of [false, true]) {
  test(`a Grab pressed before the shop's code arrives is sent at once, and its order shown${fair ? ' (fair start)' : ''}`, async ({ page, request }) => {
    const title = uniqueTitle('Early');
    await createVoucher(request, title, 3, Date.now() - 60_000, fair);
    await signUpByApi(page.context().request);
    // The WASM is held back until the press has its answer.
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    await page.route('**/*.wasm', async (route) => {
      await held;
      await route.continue();
    });
    const calls: string[] = [];
    page.on('request', (r) => calls.push(new URL(r.url()).pathname));
    // Not `load`: that waits for the preloaded WASM.
    await page.goto('/', { waitUntil: 'commit' });
    const card = page.getByRole('article', { name: title });
    const answered = page.waitForResponse((r) => new URL(r.url()).pathname === '/api/grab');
    await card.getByRole('button', { name: 'Grab' }).click();
    const answer = await answered;
    expect(answer.status()).toBe(200);
    expect(calls.filter((c) => c.startsWith('/api/grab'))).toEqual(fair ? ['/api/grab_token', '/api/grab'] : ['/api/grab']);
    const orderId = (await answer.json()).order_id;
    // The page's script says the order at once, with no WASM yet.
    const said = page.getByRole('status', { name: 'Your grab' });
    await expect(said).toHaveText(`Got it: order ${orderId} (queued).`);
    release();
    await expect(page.locator('body[data-hydrated="true"]')).toBeAttached();
    // The card says it from here on.
    await expect(said).toHaveText('');
    await expect(card.getByText(`Order ${orderId}`)).toBeVisible();
    await expect(card.getByText('Status: success')).toBeVisible();
    // One grab, the early one: pressing again says so.
    await card.getByRole('button', { name: 'Grab' }).click();
    await expect(card.getByRole('alert')).toHaveText('You already bought this voucher.');
  });
}

test("Grabs pressed before the shop's code arrives and refused say why at once, each sale its own", async ({ page, request }) => {
  const titles = [uniqueTitle('EarlyNo'), uniqueTitle('EarlyNo')];
  for (const title of titles) await createVoucher(request, title, 3, Date.now() - 60_000);
  // Not signed in, and no WASM until the refusals are read.
  let release = () => {};
  const held = new Promise<void>((resolve) => (release = resolve));
  await page.route('**/*.wasm', async (route) => {
    await held;
    await route.continue();
  });
  await page.goto('/', { waitUntil: 'commit' });
  const said = page.getByRole('status', { name: 'Your grab' });
  const cards = titles.map((title) => page.getByRole('article', { name: title }));
  await cards[0].getByRole('button', { name: 'Grab' }).click();
  await expect(said).toHaveText('Please sign in first.');
  // A second sale's press does not hide the first's answer: each is named.
  await cards[1].getByRole('button', { name: 'Grab' }).click();
  for (const title of titles) await expect(said).toContainText(`${title}: Please sign in first.`);
  release();
  // The island shows the same refusals on the cards, and the line empties.
  for (const card of cards) await expect(card.getByRole('alert')).toHaveText('Please sign in first.');
  await expect(said).toHaveText('');
});

test("a sale that opens before the shop's code arrives opens its Grab then, by the gate's clock", async ({ page, request }) => {
  test.setTimeout(60_000);
  const title = uniqueTitle('Opens');
  await signUpByApi(page.context().request);
  // Room for the page to load first on a busy machine (as the clock tests leave).
  const begins = Date.now() + 15_000;
  await createVoucher(request, title, 3, begins);
  // The device's clock 40 s ahead: a page that trusted it would open at once.
  await page.clock.install({ time: Date.now() + 40_000 });
  // No WASM at all: the page's script alone.
  await page.route('**/*.wasm', (route) => route.abort());
  await page.goto('/', { waitUntil: 'commit' });
  const grab = page.getByRole('article', { name: title }).getByRole('button', { name: 'Grab' });
  await expect(grab).toBeDisabled();
  // This process's clock is the gate's (one machine): never before the start, and soon after.
  const late = (await grabOpened(page, title)) - begins;
  console.log(`Grab opened by the page's script ${late} ms after the start (device clock 40 s ahead)`);
  expect(late).toBeGreaterThanOrEqual(0);
  expect(late).toBeLessThan(1_000);
  const answered = page.waitForResponse((r) => new URL(r.url()).pathname === '/api/grab');
  await grab.click();
  const answer = await answered;
  expect(answer.status()).toBe(200);
  // With no WASM at all, the shopper still reads their order.
  const orderId = (await answer.json()).order_id;
  await expect(page.getByRole('status', { name: 'Your grab' })).toHaveText(`Got it: order ${orderId} (queued).`);
});

// The island draws the cards from the start the page carries (`#shop-start`). A page
// something rewrote on its way without it leaves Grab with the page's own script: a
// press is still sent and answered.
// A page something rewrote on its way (a proxy, an extension): when the island cannot
// read its start, or a card, it takes nothing over and the page's script answers Grab.
const rewrites: [string, (html: string) => string][] = [
  ["a page that lost the island's start", (html) => html.replace(/<script type="application\/json" id="shop-start">.*?<\/script>/s, '')],
  ['a page with a card the island cannot read', (html) => html.replaceAll('data-part="countdown"', '')],
];
for (const [what, rewrite] of rewrites) {
  test(`${what} still grabs through the page's script`, async ({ page, request }) => {
    const title = uniqueTitle('Rewritten');
    await createVoucher(request, title, 3);
    await signUpByApi(page.context().request);
    await page.route(
      (url) => url.pathname === '/',
      async (route) => {
        const response = await route.fetch();
        const body = rewrite(await response.text());
        await route.fulfill({ status: response.status(), contentType: 'text/html; charset=utf-8', body });
      },
    );
    const warned = page.waitForEvent('console', (m) => m.text().includes("the shop's start"));
    await page.goto('/', { waitUntil: 'commit' });
    await warned;
    const answered = page.waitForResponse((r) => new URL(r.url()).pathname === '/api/grab');
    await page.getByRole('article', { name: title }).getByRole('button', { name: 'Grab' }).click();
    const orderId = (await (await answered).json()).order_id;
    await expect(page.getByRole('status', { name: 'Your grab' })).toHaveText(`Got it: order ${orderId} (queued).`);
  });
}
