import base from './playwright.config';
import { defineConfig } from '@playwright/test';

// `npm run phone`: the shop loaded as a mid-range phone on a slow link would, against
// the same release server the end-to-end tests start (its own port and data).
export default defineConfig({
  ...base,
  testDir: './phone',
  projects: [{ name: 'phone measure' }],
  timeout: 300_000,
});
