import fs from 'node:fs';
import path from 'node:path';
import type { Browser, BrowserContext, Locator, Page } from 'playwright-core';
import { launchChromium, seriousViolations, unlabelledControls, unreachableControls } from '../helpers/browser';
import { TEST_TOKEN, tempDir, testEnv } from '../helpers/env';
import { startFakeQdrant, type FakeQdrant } from '../helpers/fake-qdrant';
import { topicModelSpec, writeModel2VecFolder } from '../helpers/model-fixtures';
import { ROOT, childEnv, spawnEngram, type Child } from '../helpers/processes';
import { freePort } from '../helpers/redis-server';
import { waitUntil } from '../helpers/wait';

const SCREENSHOTS = path.join(ROOT, 'test/e2e/screenshots');
const QDRANT_KEY = 'qdrant-e2e-secret-key-9f3a';
const CARD = 'section[aria-labelledby="qd-title"]';
const ALIAS = 'studio_e2e';

/**
 * The Engine tab's Qdrant card in Debian's Chromium, against real api + worker processes and the
 * fake Qdrant (which validates every request against Qdrant's OpenAPI document): settings through the
 * form (key masked), connection test, backfill and cleanup followed to 100 % through the job event
 * streams, a tenant-scoped test search, errors in words, axe and keyboard reachability.
 */
describe('Memory Studio: the Qdrant card against the real Qdrant routes', () => {
  jest.setTimeout(180_000);
  const children: Child[] = [];
  let fake: FakeQdrant;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let card: Locator;
  let base: string;
  let tenantA: string;
  let tenantB: string;
  const H = { authorization: `Bearer ${TEST_TOKEN}`, 'content-type': 'application/json' };
  const call = async (method: string, p: string, body?: unknown) => {
    const r = await fetch(base + p, { method, headers: H, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: r.status, body: await r.json() };
  };
  const errors: string[] = [];
  /** Every answer of a Qdrant route the page read (the key must never be in one). */
  const qdrantAnswers: string[] = [];
  const requests: string[] = [];
  /** Qdrant holds the first points upsert of the backfill queued at enable until this is called. */
  let releaseUpserts: () => void = () => undefined;
  let upsertHeld = false;

  beforeAll(async () => {
    fs.mkdirSync(SCREENSHOTS, { recursive: true });
    fake = await startFakeQdrant({ apiKey: QDRANT_KEY });
    const folder = writeModel2VecFolder(path.join(tempDir('models'), 'm'), topicModelSpec(16));
    const env = testEnv();
    const port = await freePort();
    const extra = { MEMORY_STATIC_MODEL: folder, PORT: String(port), LOG_LEVEL: 'info' };
    children.push(spawnEngram('api', childEnv(env, extra)), spawnEngram('worker', childEnv(env, extra)));
    base = `http://127.0.0.1:${port}`;
    await waitUntil(async () => (await fetch(`${base}/readyz`)).status === 200, 30_000, `api ready: ${children[0].output()}`);

    tenantA = (await call('POST', '/api/keys', { name: 'tenant-a' })).body.id;
    tenantB = (await call('POST', '/api/keys', { name: 'tenant-b' })).body.id;
    expect((await call('PUT', '/api/settings/memory', { embeddingSource: 'static', staticEnabled: true })).status).toBe(200);
    const facts = [
      ['pet', 'my cat sleeps on the sofa'],
      ['lunch', 'pizza and pasta for lunch'],
      ['weather', 'snow and storm and cloud'],
    ];
    for (let i = 0; i < 12; i++) {
      const [key, content] = facts[i % facts.length];
      expect((await call('POST', '/api/memory', { apiKeyId: tenantA, key: `${key}-${i}`, content })).status).toBe(201);
    }
    // Tenant B's kitten is nearer to "kitten" than anything of A: it must still never reach A's search.
    expect((await call('POST', '/api/memory', { apiKeyId: tenantB, key: 'secret-pet', content: 'my kitten is a secret' })).status).toBe(201);
    await waitUntil(async () => {
      const s = (await call('GET', '/api/memory/engine-status')).body;
      return s.vectorStore.rowCount === 13 && s.vectorStore.needsReindex === 0;
    }, 60_000, 'seeded memories embedded by the worker');

    browser = await launchChromium();
    context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    page = await context.newPage();
    page.on('pageerror', (e) => errors.push(e.message));
    page.on('console', (m) => {
      // 4xx/5xx answers are provoked on purpose below (invalid input, Qdrant down).
      if (m.type() === 'error' && !/the server responded with a status of [45]\d\d/.test(m.text())) errors.push(m.text());
    });
    page.on('request', (r) => {
      const u = new URL(r.url());
      if (u.pathname.startsWith('/api/')) requests.push(`${r.method()} ${u.pathname}`);
    });
    page.on('response', async (r) => {
      if (!new URL(r.url()).pathname.includes('/qdrant')) return;
      qdrantAnswers.push(await r.text().catch(() => ''));
    });

    // The card's first read of the stored settings answers late (as on a slow link): the form must not be
    // fillable before it, or that answer overwrites what the first test types (a race CI once lost).
    let firstRead = true;
    await page.route('**/api/settings/qdrant', async (route) => {
      if (firstRead && route.request().method() === 'GET') {
        firstRead = false;
        await new Promise((r) => setTimeout(r, 1_500));
      }
      await route.continue();
    });
    await page.goto(`${base}/dashboard/#/engine`);
    await page.getByLabel('Management token').fill(TEST_TOKEN);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('tab', { name: 'Engine', selected: true }).waitFor();
    card = page.locator(CARD);
    await card.getByLabel('Host').waitFor();
  });

  afterAll(async () => {
    releaseUpserts();
    await browser?.close();
    for (const c of children) if (c.proc.exitCode === null) c.proc.kill('SIGTERM');
    await Promise.all(children.map((c) => Promise.race([c.exited, new Promise((r) => setTimeout(r, 10_000))])));
    for (const c of children) if (c.proc.exitCode === null) c.proc.kill('SIGKILL');
    await fake?.close();
  });

  it('shows a server validation error in words and changes nothing', async () => {
    await card.getByLabel('Collection (alias)').fill('not a name!');
    // The late first read (held in beforeAll) has been answered and shown before the save.
    await card.getByText('Loading Qdrant settings…').waitFor({ state: 'detached' });
    // Past the browser's own pattern check, so the server's answer is what the operator reads.
    await card.getByRole('form', { name: 'Qdrant settings' }).evaluate((el) => ((el as HTMLFormElement).noValidate = true));
    await card.getByRole('button', { name: 'Save Qdrant settings' }).click();
    expect(await card.getByRole('alert').textContent()).toMatch(/collection: letters, digits, _ and - only.*\[400\]/);
    expect((await call('GET', '/api/settings/qdrant')).body).toMatchObject({ enabled: false, collection: 'engram_memory', hasApiKey: false });
  });

  it('points the settings at Qdrant through the form (which queues a backfill); the key comes back masked only', async () => {
    // The backfill queued at enable is held at its first upsert, so the alias cannot exist before the tests below look.
    const gate = new Promise<void>((r) => (releaseUpserts = r));
    fake.beforeAnswer = async (req) => {
      if (req.method === 'PUT' && /\/points$/.test(req.path)) {
        upsertHeld = true;
        await gate;
      }
    };
    await card.getByLabel('Use Qdrant as the vector tier').check();
    await card.getByLabel('Host').fill('127.0.0.1');
    await card.getByLabel('Port').fill(String(fake.port));
    await card.getByLabel('Collection (alias)').fill(ALIAS);
    await card.getByLabel('Qdrant API key').fill(QDRANT_KEY);
    await card.getByRole('button', { name: 'Save Qdrant settings' }).click();
    await card.getByText(/Qdrant settings saved\. New memories now go to Qdrant as well; a backfill copies the ones already stored \(progress below\)\. Searches use Qdrant once it completes\./).waitFor();
    const stored = (await call('GET', '/api/settings/qdrant')).body;
    expect(stored).toMatchObject({ enabled: true, host: '127.0.0.1', port: fake.port, collection: ALIAS, hasApiKey: true, apiKeyMasked: '***9f3a' });
    expect((await call('GET', '/api/settings/memory')).body.vectorStore).toBe('qdrant');
    // The field is emptied after saving; the hint shows the mask, never the key.
    expect(await card.getByLabel('Qdrant API key').inputValue()).toBe('');
    await card.getByText('A key is stored (***9f3a).', { exact: false }).waitFor();
    expect(await page.content()).not.toContain(QDRANT_KEY);
  });

  it('tests the connection: reachable, but not serving until the backfill completes (no alias yet)', async () => {
    await waitUntil(() => upsertHeld, 30_000, 'the backfill queued at enable reached its first upsert');
    await card.getByRole('button', { name: 'Test connection' }).click();
    const status = card.getByRole('status', { name: 'Qdrant connection test' });
    await status.getByText('Connection: ok').waitFor();
    expect(await status.textContent()).toMatch(/Qdrant answered in [\d.]+ ms/);
    expect(await status.textContent()).toMatch(/Not serving searches yet: qdrant index not built yet \(backfill pending\): the alias studio_e2e does not exist yet/);
    expect(fake.aliases.has(ALIAS)).toBe(false);
    // The fake saw the key in its header (and nowhere else).
    expect(fake.requests.some((r) => r.path === '/readyz' && r.apiKey === QDRANT_KEY)).toBe(true);
  });

  it('follows the backfill queued at enable (job events on its queue) to 100 %; a click meanwhile meets the running one', async () => {
    const seen = new Set<string>();
    // Qdrant still holds the enable backfill's first upsert: the click meets a running backfill.
    const bar = card.getByRole('progressbar', { name: 'Backfill progress' });
    try {
      await card.getByRole('button', { name: 'Backfill existing memories' }).click();
      // 409: the card says so and follows the running job instead of failing.
      await card.getByText('A backfill is already running; following it.').waitFor();
      // Nothing written yet: the bar is at 0, or still indeterminate (no value) until the job's first progress event arrives.
      expect([null, '0']).toContain(await bar.getAttribute('value'));
      expect(requests.filter((r) => r === 'POST /api/memory/qdrant/backfill')).toHaveLength(1);
    } finally {
      fake.beforeAnswer = null;
      releaseUpserts();
    }
    await waitUntil(
      async () => {
        const v = await bar.getAttribute('value').catch(() => null);
        if (v !== null) seen.add(v);
        return v === '100';
      },
      60_000,
      'backfill progress at 100%',
      20,
    );
    await card.getByText('Backfill: completed').waitFor();
    await card.getByText(/Finished: 13 of 13 memories copied into studio_e2e_\S+, 0 failed; the alias points there\./).waitFor();
    expect([...seen].every((v) => Number(v) >= 0 && Number(v) <= 100)).toBe(true);
    expect(await card.getByRole('link', { name: /Open job qdrant-backfill-enable-.+ in bull-board/ }).getAttribute('href')).toMatch(/^\/admin\/queues\/queue\/reindex\/qdrant-backfill-enable-/);
    expect(requests.some((r) => /^GET \/api\/jobs\/reindex\/qdrant-backfill-enable-[^/]+\/events$/.test(r))).toBe(true);
    // Every memory is a point behind the alias; the finished job refreshed the shown connection test.
    expect(fake.points(ALIAS)).toHaveLength(13);
    const status = card.getByRole('status', { name: 'Qdrant connection test' });
    await status.getByText(/Qdrant ready, 13 points in studio_e2e_/).waitFor({ timeout: 15_000 });
    // The Engine status chip turns green (its next 10 s refresh, or the one the finished job asked for).
    await page.getByText('Qdrant: ok').waitFor({ timeout: 15_000 });
  });

  it('a test search answers with the chosen tenant’s memories only', async () => {
    const results = card.getByRole('list', { name: 'Qdrant test search results' });
    await card.getByLabel('Query').fill('kitten');
    await card.getByRole('button', { name: 'Test search' }).click();
    // No key chosen: said in words, nothing sent.
    await card.getByText(/Choose the API key to search as/).waitFor();
    expect(requests.filter((r) => r === 'POST /api/settings/qdrant/search')).toHaveLength(0);

    await card.getByLabel('Search as API key').selectOption(tenantA);
    await card.getByLabel('Hits (top K)').fill('20');
    await card.getByRole('button', { name: 'Test search' }).click();
    await results.waitFor();
    const a = await results.getByRole('listitem').allTextContents();
    expect(a).toHaveLength(12);
    expect(a[0]).toMatch(/#1 pet-\d+/);
    for (const item of a) expect(item).toMatch(/API keytenant-a \(/);
    expect(await results.textContent()).not.toContain('secret');
    await card.getByText(/12 hits from Qdrant in [\d.]+ ms/).waitFor();
    // The hits came from Qdrant: the fake answered a query filtered on tenant A.
    const queries = fake.requests.filter((r) => r.method === 'POST' && /\/points\/(query|search)$/.test(r.path));
    expect(JSON.stringify(queries.at(-1)!.body)).toContain(tenantA);

    await card.getByLabel('Search as API key').selectOption(tenantB);
    await card.getByRole('button', { name: 'Test search' }).click();
    await waitUntil(async () => (await results.getByRole('listitem').count()) === 1, 10_000, 'tenant B’s single hit');
    expect(await results.getByRole('listitem').textContent()).toMatch(/#1 secret-pet.*my kitten is a secret.*API keytenant-b/);
  });

  it('cleans up an orphaned point with progress to 100 %', async () => {
    // A point whose memory is gone, as a missed sync would leave it.
    const target = fake.aliases.get(ALIAS)!;
    const sample = fake.points(target)[0]!;
    fake.collections.get(target)!.points.set('n:999999', { id: 999999, vector: sample.vector, payload: { ...sample.payload, rowId: 999999 } });
    await card.getByRole('button', { name: 'Clean up points' }).click();
    const bar = card.getByRole('progressbar', { name: 'Cleanup progress' });
    await waitUntil(async () => (await bar.getAttribute('value').catch(() => null)) === '100', 30_000, 'cleanup at 100%');
    await card.getByText('Cleanup: completed').waitFor();
    await card.getByText('Finished: deleted 1 point (0 expired, 1 without a memory) after scanning 14 points in 1 collection.').waitFor();
    expect(await card.getByRole('link', { name: /Open job qdrant-cleanup-.+ in bull-board/ }).getAttribute('href')).toMatch(/^\/admin\/queues\/queue\/maintenance\/qdrant-cleanup-/);
    expect(fake.points(target)).toHaveLength(13);
  });

  it('axe finds nothing serious on the tab with the card open; every card control is labelled and reachable by Tab; screenshots', async () => {
    await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
    await page.mouse.move(1, 1);
    await card.screenshot({ path: path.join(SCREENSHOTS, 'engine-qdrant-card-desktop.png') });
    await page.screenshot({ path: path.join(SCREENSHOTS, 'engine-qdrant-desktop-full.png'), fullPage: true });
    expect(await seriousViolations(page)).toEqual([]);
    expect(await unlabelledControls(page, CARD)).toEqual([]);
    expect(await unreachableControls(page, CARD)).toEqual([]);
    await page.setViewportSize({ width: 390, height: 844 });
    await card.screenshot({ path: path.join(SCREENSHOTS, 'engine-qdrant-card-phone.png') });
    expect(await seriousViolations(page, CARD)).toEqual([]);
    // Nothing in the card is wider than the phone's screen.
    const overflow = await page.evaluate((sel) => Array.from(document.querySelectorAll<HTMLElement>(`${sel} *`)).filter((el) => el.getBoundingClientRect().right > window.innerWidth + 1).map((el) => el.tagName), CARD);
    expect(overflow).toEqual([]);
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  it('Qdrant down: the connection test turns red and the test search fails in words, fast', async () => {
    fake.mode = 'down';
    try {
      await card.getByRole('button', { name: 'Test connection' }).click();
      const status = card.getByRole('status', { name: 'Qdrant connection test' });
      await status.getByText('Connection: down').waitFor();
      expect(await status.textContent()).toMatch(/Cannot reach Qdrant: .*503/);
      await card.getByRole('button', { name: 'Test search' }).click();
      expect(await card.getByRole('alert').filter({ hasText: 'The test search failed' }).textContent()).toMatch(/The test search failed: .*Qdrant/);
      await card.screenshot({ path: path.join(SCREENSHOTS, 'engine-qdrant-card-down-desktop.png') });
    } finally {
      fake.mode = 'up';
    }
  });

  it('removing the key ("" to the API) makes Qdrant refuse us, said in words; the key was never in an answer or a log', async () => {
    await card.getByLabel('Remove the stored API key').check();
    expect(await card.getByLabel('Qdrant API key').isDisabled()).toBe(true);
    await card.getByRole('button', { name: 'Save Qdrant settings' }).click();
    await card.getByText('Qdrant settings saved.', { exact: true }).waitFor();
    expect((await call('GET', '/api/settings/qdrant')).body).toMatchObject({ enabled: true, hasApiKey: false, apiKeyMasked: null });
    await card.getByText(/No key stored/).waitFor();
    await card.getByRole('button', { name: 'Test connection' }).click();
    const status = card.getByRole('status', { name: 'Qdrant connection test' });
    await status.getByText('Connection: down').waitFor();
    expect(await status.textContent()).toMatch(/Cannot reach Qdrant: .*401/);

    expect(qdrantAnswers.length).toBeGreaterThan(5);
    for (const body of qdrantAnswers) expect(body).not.toContain(QDRANT_KEY);
    for (const c of children) expect(c.output()).not.toContain(QDRANT_KEY);
    expect(fake.schemaErrors).toEqual([]);
    expect(errors).toEqual([]);
  });
});
