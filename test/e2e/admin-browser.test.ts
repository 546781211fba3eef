import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser } from 'playwright-core';
import { buildTestApi, type TestApi } from '../helpers/api';
import { TEST_TOKEN } from '../helpers/env';

/** A real browser signs in to the queue dashboard with the management token (no header tricks). */
describe('the queue dashboard in a real browser', () => {
  jest.setTimeout(60_000);
  let t: TestApi;
  let server: http.Server;
  let browser: Browser;
  let base: string;

  beforeAll(async () => {
    t = buildTestApi();
    server = http.createServer(t.app).listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    browser = await chromium.launch({
      executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync'],
    });
  });
  afterAll(async () => {
    await browser?.close();
    server.closeAllConnections();
    server.close();
    await t.close();
  });

  it('redirects to the login form, refuses a wrong token, then shows every queue', async () => {
    const page = await browser.newPage();
    await page.goto(`${base}/admin/queues`);
    expect(new URL(page.url()).pathname).toBe('/admin/login');

    await page.fill('#token', 'not-the-token');
    await page.click('button[type=submit]');
    await page.waitForSelector('[role=alert]');
    expect(await page.textContent('[role=alert]')).toMatch(/not valid/);

    await page.fill('#token', TEST_TOKEN);
    await Promise.all([page.waitForURL(`${base}/admin/queues**`), page.click('button[type=submit]')]);
    // bull-board renders its queue list client-side from its own API (cookie-authenticated).
    for (const q of ['maintenance', 'extraction', 'embedding', 'reindex']) await page.getByText(q, { exact: true }).first().waitFor({ timeout: 20_000 });
    const cookies = await page.context().cookies();
    const session = cookies.find((c) => c.name === 'engram_mgmt');
    expect(session).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/' });
    expect(session?.value).not.toBe(TEST_TOKEN);
  });

  it('/docs renders the API reference from local files only (every other origin is blocked)', async () => {
    const page = await browser.newPage();
    const foreign: string[] = [];
    await page.route('**/*', (route) => {
      const u = new URL(route.request().url());
      if (u.origin === base) return route.continue();
      foreign.push(u.origin);
      return route.abort();
    });
    await page.goto(`${base}/docs`);
    // Swagger UI builds its page from /openapi.json: the API's title and a memory operation appear.
    await page.getByText('/api/memory/{id}/history', { exact: true }).first().waitFor({ timeout: 20_000 });
    await page.locator('.info .title').filter({ hasText: 'Engram' }).first().waitFor();
    expect(await page.locator('.opblock').count()).toBeGreaterThan(25);
    expect(foreign).toEqual([]);
  });
});
