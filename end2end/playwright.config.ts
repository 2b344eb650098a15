import { defineConfig } from '@playwright/test';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// The app under test is the release build from `cargo leptos build --release` (what
// users deploy), started here on
// loopback with its own SQLite file. REDIS_URL comes from `npm test` (.ci/test);
// without it the app starts a private redis-server itself.
const port = Number(process.env.E2E_PORT ?? 3917);
export const baseURL = `http://127.0.0.1:${port}`;
export const adminToken = 'e2e-admin-token-0001';
export const payTimeoutMs = 10_000;
// Set once in the main process; workers inherit it.
process.env.SECKILL_E2E_DIR ??= mkdtempSync(join(tmpdir(), 'seckill-e2e-'));

export default defineConfig({
  testDir: './tests',
  // A test is a few page loads and clicks (seconds); the one that waits out an order's
  // deadline sets its own limit. An expectation waits for what the server does within
  // about a second (a feed frame, a poll of the order's status every second, a sweep
  // every 200 ms): ten times that.
  timeout: 30_000,
  expect: { timeout: 10_000 },
  fullyParallel: false,
  workers: 1,
  retries: 0,
  reporter: [['list']],
  use: {
    baseURL,
    trace: 'retain-on-failure',
    launchOptions: {
      executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
      args: [
        '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
        '--disable-background-networking', '--disable-component-update', '--disable-sync',
      ],
    },
  },
  // Every spec on a desktop screen; the shopper's flows again on a phone's (390 × 844,
  // touch), where the layout and the tap targets are checked too (phone.spec.ts).
  projects: [
    { name: 'desktop', testIgnore: /phone\.spec\.ts/ },
    {
      name: 'phone',
      testMatch: /(phone|orders)\.spec\.ts/,
      use: { viewport: { width: 390, height: 844 }, deviceScaleFactor: 3, isMobile: true, hasTouch: true },
    },
  ],
  webServer: {
    command: './target/release/seckill',
    cwd: '..',
    url: `${baseURL}/`,
    // The release server starts in about a second (migrations, Redis, warm-up).
    timeout: 60_000,
    reuseExistingServer: false,
    stdout: 'pipe',
    env: {
      ...process.env,
      LEPTOS_SITE_ADDR: `127.0.0.1:${port}`,
      LEPTOS_SITE_ROOT: 'target/site',
      DATABASE_URL: `sqlite://${process.env.SECKILL_E2E_DIR}/e2e.db`,
      SECKILL_ADMIN_TOKEN: adminToken,
      SECKILL_REDIS_NAMESPACE: `e2e${process.pid}`,
      // Short enough for a test to watch an unpaid order time out; long enough that
      // no other test's order does.
      SECKILL_PAY_TIMEOUT_MS: String(payTimeoutMs),
      SECKILL_SWEEP_MS: '200',
      // The whole suite calls from one address, several pages at once, and makes an
      // account in most tests (each solving its sign-up challenge in the page).
      SECKILL_RATE_PER_ADDRESS: '0',
      SECKILL_SIGN_UP_QUOTA: '0',
      // Cheap password hashes: every test makes accounts (the cost is each hash's own).
      SECKILL_PASSWORD_MEMORY_KIB: '64',
      SECKILL_PASSWORD_ITERATIONS: '1',
    } as Record<string, string>,
  },
});
