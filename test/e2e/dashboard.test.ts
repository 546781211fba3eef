import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { Queue } from 'bullmq';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { bullConnectionOptions } from '../../src/queue/redis';
import { TEST_TOKEN, tempDir, testEnv } from '../helpers/env';
import { topicModelSpec, writeModel2VecFolder } from '../helpers/model-fixtures';
import { ROOT, childEnv, spawnEngram, type Child } from '../helpers/processes';
import { freePort } from '../helpers/redis-server';
import { waitUntil } from '../helpers/wait';

const SCREENSHOTS = path.join(ROOT, 'test/e2e/screenshots');
const DASHBOARD = path.join(ROOT, 'dist/dashboard');
const AXE_SOURCE = fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
const TABS = ['memories', 'playground', 'jobs', 'engine'] as const;
const SIZES = [
  { name: 'desktop', width: 1280, height: 800 },
  { name: 'phone', width: 390, height: 844 },
] as const;

interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

/** axe-core from node_modules, evaluated in the page (devtools evaluation: the page's CSP stays on). */
async function seriousViolations(page: Page): Promise<string[]> {
  if (!(await page.evaluate('typeof window.axe !== "undefined"'))) await page.evaluate(AXE_SOURCE);
  const violations = (await page.evaluate(`axe.run(document, { resultTypes: ['violations'] }).then((r) => r.violations)`)) as AxeViolation[];
  return violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.impact} ${v.id}: ${v.help} at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}

/**
 * Tabs through the page and returns the visible controls that were never focused. Hidden file inputs
 * are reached through their buttons; unselected tabs through the arrow keys (roving tabindex).
 */
async function unreachableControls(page: Page): Promise<string[]> {
  const total = await page.evaluate(() => {
    const all = Array.from(document.querySelectorAll<HTMLElement>('a[href], button, input, select, textarea, summary')).filter(
      (el) =>
        !(el as HTMLButtonElement).disabled &&
        el.getClientRects().length > 0 &&
        !el.classList.contains('sr-only') &&
        el.getAttribute('tabindex') !== '-1' &&
        // In a radio group only the checked radio is a Tab stop; the arrow keys move between them.
        !((el as HTMLInputElement).type === 'radio' && !(el as HTMLInputElement).checked),
    );
    all.forEach((el, i) => el.setAttribute('data-e2e-control', String(i)));
    (document.activeElement as HTMLElement | null)?.blur();
    return all.length;
  });
  const seen = new Set<string>();
  const trail: string[] = [];
  for (let i = 0; i < total + 10; i++) {
    await page.keyboard.press('Tab');
    const id = await page.evaluate(() => document.activeElement?.getAttribute('data-e2e-control') ?? `${document.activeElement?.tagName}#${document.activeElement?.id}`);
    trail.push(id);
    if (/^\d+$/.test(id)) seen.add(id);
  }
  if (seen.size === 0) throw new Error(`Tab never reached a control: ${trail.slice(0, 10).join(' ')}`);
  return page.evaluate((reached) => {
    const out: string[] = [];
    document.querySelectorAll<HTMLElement>('[data-e2e-control]').forEach((el) => {
      if (!reached.includes(el.getAttribute('data-e2e-control')!)) out.push(`${el.tagName.toLowerCase()} "${(el.getAttribute('aria-label') ?? el.textContent ?? '').trim().slice(0, 40)}"`);
      el.removeAttribute('data-e2e-control');
    });
    return out;
  }, [...seen]);
}

/** Memory Studio in Debian's Chromium against real api + worker processes (spawned from the build). */
describe('Memory Studio (/dashboard) in a real browser', () => {
  jest.setTimeout(180_000);
  const children: Child[] = [];
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let base: string;
  let apiKeyId: string;
  let otherKeyId: string;
  let maintenance: Queue;
  const H = { authorization: `Bearer ${TEST_TOKEN}`, 'content-type': 'application/json' };
  const call = async (method: string, p: string, body?: unknown) => {
    const r = await fetch(base + p, { method, headers: H, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: r.status, body: await r.json() };
  };
  /** Every /api request the page made: when, what. */
  const requests: { at: number; method: string; path: string }[] = [];

  beforeAll(async () => {
    fs.mkdirSync(SCREENSHOTS, { recursive: true });
    const folder = writeModel2VecFolder(path.join(tempDir('models'), 'm'), topicModelSpec(16));
    const env = testEnv();
    maintenance = new Queue('maintenance', { connection: bullConnectionOptions(env.REDIS_URL!, 'e2e-test'), prefix: env.QUEUE_PREFIX });
    maintenance.on('error', () => undefined);
    const port = await freePort();
    const extra = { MEMORY_STATIC_MODEL: folder, PORT: String(port) };
    children.push(spawnEngram('api', childEnv(env, extra)), spawnEngram('worker', childEnv(env, extra)));
    base = `http://127.0.0.1:${port}`;
    await waitUntil(async () => (await fetch(`${base}/readyz`)).status === 200, 30_000, `api ready: ${children[0].output()}`);

    apiKeyId = (await call('POST', '/api/keys', { name: 'studio-e2e' })).body.id;
    otherKeyId = (await call('POST', '/api/keys', { name: 'other-tenant' })).body.id;
    expect((await call('PUT', '/api/settings/memory', { embeddingSource: 'static', staticEnabled: true })).status).toBe(200);
    const facts = [
      ['pet', 'my cat sleeps on the sofa'],
      ['dog', 'the dog likes the rain'],
      ['lunch', 'pizza and pasta for lunch'],
      ['lang', 'typescript compiler bug'],
      ['weather', 'snow and storm and cloud'],
    ];
    for (let i = 0; i < 30; i++) {
      const [key, content] = facts[i % facts.length];
      expect((await call('POST', '/api/memory', { apiKeyId, key: `${key}-${i}`, content })).status).toBe(201);
    }
    // Another tenant's memory must never show up in this key's preview.
    await call('POST', '/api/memory', { apiKeyId: otherKeyId, key: 'secret-pet', content: 'my kitten is a secret' });
    await waitUntil(async () => {
      const s = (await call('GET', '/api/memory/engine-status')).body;
      return s.vectorStore.rowCount === 31 && s.vectorStore.needsReindex === 0;
    }, 60_000, 'seeded memories embedded by the worker');

    browser = await chromium.launch({
      executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync'],
    });
    context = await browser.newContext({ viewport: { width: 1280, height: 800 }, acceptDownloads: true });
    page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    page.on('console', (m) => {
      // A CSP violation or an uncaught error would show here.
      // 4xx answers are provoked on purpose (sign-in before a session, a wrong token, endpoints this build lacks, invalid input).
      if (m.type() === 'error' && !/the server responded with a status of 4\d\d/.test(m.text())) errors.push(m.text());
    });
    page.on('request', (r) => {
      const u = new URL(r.url());
      if (u.pathname.startsWith('/api/')) requests.push({ at: Date.now(), method: r.method(), path: u.pathname + u.search });
    });
    (page as Page & { _errors?: string[] })._errors = errors;
  });

  afterAll(async () => {
    await browser?.close();
    await maintenance?.close();
    for (const c of children) if (c.proc.exitCode === null) c.proc.kill('SIGTERM');
    await Promise.all(children.map((c) => Promise.race([c.exited, new Promise((r) => setTimeout(r, 10_000))])));
    for (const c of children) if (c.proc.exitCode === null) c.proc.kill('SIGKILL');
  });

  const tab = (name: string) => page.getByRole('tab', { name });

  it('the built page ships under 250 kB of gzipped JavaScript, and no source map', () => {
    const assets = fs.readdirSync(path.join(DASHBOARD, 'assets'));
    const js = assets.filter((f) => f.endsWith('.js'));
    expect(js.length).toBeGreaterThan(0);
    const gz = js.reduce((n, f) => n + zlib.gzipSync(fs.readFileSync(path.join(DASHBOARD, 'assets', f)), { level: 9 }).length, 0);
    console.log(`dashboard JavaScript: ${js.length} file(s), ${(gz / 1024).toFixed(1)} kB gzipped`);
    expect(gz).toBeLessThan(250 * 1024);
    expect(assets.some((f) => f.endsWith('.map'))).toBe(false);
  });

  it('refuses a wrong token, signs in with the right one into an HttpOnly session, and stores no token in the page', async () => {
    await page.goto(`${base}/dashboard`);
    expect(new URL(page.url()).pathname).toBe('/dashboard/');
    await page.getByLabel('Management token').fill('not-the-token');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect(page.getByRole('alert').textContent()).resolves.toMatch(/That token is not valid \[403\]/);
    expect((await context.cookies()).find((c) => c.name === 'engram_mgmt')).toBeUndefined();

    await page.getByLabel('Management token').fill(TEST_TOKEN);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Memory Studio' }).waitFor();
    await page.getByRole('tab', { name: 'Memories', selected: true }).waitFor();
    const session = (await context.cookies()).find((c) => c.name === 'engram_mgmt');
    expect(session).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/' });
    const stored = await page.evaluate(() => JSON.stringify({ l: { ...localStorage }, s: { ...sessionStorage }, c: document.cookie }));
    expect(stored).not.toContain(TEST_TOKEN);
    expect(stored).not.toContain(session!.value);
    // The health indicator is green.
    await page.getByRole('button', { name: /Memory store healthy/ }).waitFor();
  });

  it('adds, searches, edits (with history) and deletes a memory', async () => {
    await page.getByRole('button', { name: 'Add memory' }).click();
    const dialog = page.getByRole('dialog', { name: 'Add a memory' });
    await dialog.getByLabel('Key', { exact: true }).fill('favourite-colour');
    await dialog.getByLabel('Content').fill('The operator likes teal dashboards');
    await dialog.getByLabel('Type').selectOption('semantic');
    await dialog.getByLabel('API key').selectOption(apiKeyId);
    await dialog.getByRole('button', { name: 'Save memory' }).click();
    await dialog.waitFor({ state: 'detached' });

    // Live search (debounced) narrows the list to the new memory.
    await page.getByLabel('Search').fill('teal');
    const list = page.getByRole('list', { name: 'Memories' });
    await waitUntil(async () => (await list.getByRole('listitem').count()) === 1 && (await list.getByRole('heading', { name: 'favourite-colour' }).count()) === 1, 10_000, 'search result');
    await page.getByText('Total entries').waitFor();
    expect(await page.locator('.stat', { hasText: 'Total entries' }).locator('.stat-value').textContent()).toBe('1');

    await page.getByRole('button', { name: 'Edit favourite-colour' }).click();
    await page.getByRole('textbox', { name: 'Content' }).fill('The operator likes teal and orange dashboards');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await list.getByText('The operator likes teal and orange dashboards').waitFor();
    const server = await call('GET', `/api/memory?q=orange&apiKeyId=${apiKeyId}`);
    expect(server.body.data).toEqual([expect.objectContaining({ key: 'favourite-colour', type: 'semantic', content: 'The operator likes teal and orange dashboards' })]);

    await page.getByRole('button', { name: 'History of favourite-colour' }).click();
    const history = page.getByRole('list', { name: 'History of this memory' });
    await history.getByText('update', { exact: true }).waitFor();
    expect(await history.getByRole('listitem').count()).toBe(2);

    await page.getByRole('button', { name: 'Delete favourite-colour' }).click();
    const confirm = page.getByRole('dialog', { name: 'Delete this memory?' });
    await confirm.getByRole('button', { name: 'Delete' }).click();
    await page.getByText('No memory matches these filters.').waitFor();
    expect((await call('GET', `/api/memory?q=orange&apiKeyId=${apiKeyId}`)).body.total).toBe(0);
    await page.getByLabel('Search').fill('');
    await waitUntil(async () => (await list.getByRole('listitem').count()) === 20, 10_000, 'first page of 20 back');
  });

  it('edits a memory that has no key (the key stays empty); a save that changed nothing sends nothing', async () => {
    // POST needs a key (the original's contract); an import may bring a memory without one.
    const imported = await fetch(`${base}/api/memory/import`, {
      method: 'POST',
      headers: { ...H, 'content-type': 'application/x-ndjson' },
      body: `${JSON.stringify({ apiKeyId, key: null, content: 'Keyless note: the operator waters the kiwis on Fridays' })}\n`,
    });
    expect(imported.status).toBe(202);
    let id = '';
    await waitUntil(async () => {
      id = (await call('GET', `/api/memory?q=kiwis&apiKeyId=${apiKeyId}`)).body.data[0]?.id ?? '';
      return id !== '';
    }, 20_000, 'the import to land');
    const created = { body: { id } };
    const list = page.getByRole('list', { name: 'Memories' });
    await page.getByLabel('Search').fill('kiwis');
    await waitUntil(async () => (await list.getByRole('listitem').count()) === 1, 10_000, 'the keyless memory alone');
    const item = list.getByRole('listitem');

    // Saved unchanged: no PUT, no history row.
    const putsBefore = requests.filter((r) => r.method === 'PUT').length;
    await item.getByRole('button', { name: /^Edit/ }).click();
    await item.getByRole('button', { name: 'Save changes' }).click();
    await item.getByRole('button', { name: /^Edit/ }).waitFor();
    expect(requests.filter((r) => r.method === 'PUT').length).toBe(putsBefore);

    await item.getByRole('button', { name: /^Edit/ }).click();
    await item.getByRole('textbox', { name: 'Content' }).fill('Keyless note: the operator waters the kiwis on Sundays');
    await item.getByRole('button', { name: 'Save changes' }).click();
    await list.getByText('Keyless note: the operator waters the kiwis on Sundays').waitFor();
    const after = await call('GET', `/api/memory/${created.body.id}`);
    expect(after.body.memory).toMatchObject({ key: '', content: 'Keyless note: the operator waters the kiwis on Sundays' });
    const history = await call('GET', `/api/memory/${created.body.id}/history`);
    // The import's row, then the one edit (the unchanged save wrote none).
    expect(history.body.events.map((e: { op: string }) => e.op)).toEqual([expect.any(String), 'update']);

    expect((await call('DELETE', `/api/memory/${created.body.id}`)).status).toBe(200);
    await page.getByLabel('Search').fill('');
    await waitUntil(async () => (await list.getByRole('listitem').count()) === 20, 10_000, 'first page of 20 back');
  });

  it('exports the page as JSON and imports a JSON file through the file picker', async () => {
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Export page (JSON)' }).click()]);
    const exported = JSON.parse(fs.readFileSync((await download.path())!, 'utf8')) as { key: string }[];
    expect(exported).toHaveLength(20);
    await page.getByText('Exported 20 memories of this page as JSON.').waitFor();

    const file = path.join(tempDir('import'), 'two.json');
    fs.writeFileSync(
      file,
      JSON.stringify([
        { key: 'imported-one', content: 'imported from a file', type: 'episodic', apiKeyId },
        { key: '', content: 'a key is required' },
      ]),
    );
    const [chooser] = await Promise.all([page.waitForEvent('filechooser'), page.getByRole('button', { name: 'Import JSON…' }).click()]);
    await chooser.setFiles(file);
    await page.getByText('Imported 1 of 2 memories from two.json.').waitFor();
    // The bad item is reported with its number and the server's words (the zod path).
    expect(await page.getByRole('alert').filter({ hasText: '1 not imported' }).textContent()).toMatch(/item 2: .*body\.key/);
    const server = await call('GET', `/api/memory?q=imported&apiKeyId=${apiKeyId}`);
    expect(server.body.data).toEqual([expect.objectContaining({ key: 'imported-one', type: 'episodic' })]);
  });

  it('Summarize old dry-runs first and says in words when nothing is old enough (nothing changes)', async () => {
    const before = (await call('GET', '/api/memory?limit=1')).body.total as number;
    await page.getByLabel('Older than (days)').fill('30');
    await page.getByRole('button', { name: 'Summarize old…' }).click();
    // Every memory so far was made in this run: the dry run finds no candidate, and no confirmation is asked.
    await page.getByText('No memory is older than 30 days: nothing to summarize.').waitFor();
    expect(await page.getByRole('dialog').count()).toBe(0);
    expect((await call('GET', '/api/memory?limit=1')).body.total).toBe(before);
  });

  it('imports an NDJSON file following the job’s progress, then summarizes old memories: dry run → confirm → progress', async () => {
    const importKeyId = (await call('POST', '/api/keys', { name: 'import-e2e' })).body.id as string;
    // More than the 1000 candidates a dry run lists: the confirmation must name them all.
    const n = 1005;
    const old = '2025-01-15T10:00:00.000Z';
    const file = path.join(tempDir('import'), 'old.ndjson');
    fs.writeFileSync(
      file,
      Array.from({ length: n }, (_, i) =>
        JSON.stringify({ id: crypto.randomUUID(), apiKeyId: importKeyId, sessionId: '', type: 'factual', key: `old-${i}`, content: `Old note number ${i}.`, metadata: {}, createdAt: old, updatedAt: old, expiresAt: null, accessCount: 0, lastAccessedAt: null }),
      ).join('\n') + '\n',
    );
    const [chooser] = await Promise.all([page.waitForEvent('filechooser'), page.getByRole('button', { name: 'Import NDJSON…' }).click()]);
    await chooser.setFiles(file);
    await page.getByText('Uploaded old.ndjson; importing.').waitFor();
    await page.getByText('Import: completed').waitFor({ timeout: 60_000 });
    expect(await page.getByRole('progressbar', { name: 'Import progress' }).getAttribute('data-pct')).toBe('100');
    expect((await call('GET', `/api/memory?apiKeyId=${importKeyId}`)).body.total).toBe(n);

    await page.getByLabel('Older than (days)').fill('30');
    await page.getByRole('button', { name: 'Summarize old…' }).click();
    const confirm = page.getByRole('dialog', { name: 'Summarize these memories?' });
    await confirm.getByRole('button', { name: `Summarize ${n}` }).click();
    await page.getByText('Summarize: completed').waitFor({ timeout: 60_000 });
    expect(await page.getByRole('progressbar', { name: 'Summarize progress' }).getAttribute('data-pct')).toBe('100');
    const left = (await call('GET', `/api/memory?apiKeyId=${importKeyId}&limit=100`)).body as { total: number; data: { metadata: { summary?: boolean; summarizedCount?: number } }[] };
    expect(left.data.every((m) => m.metadata.summary === true)).toBe(true);
    expect(left.data.reduce((k, m) => k + (m.metadata.summarizedCount ?? 0), 0)).toBe(n);
  });

  it('runs a retrieval preview and shows ranked results with their scores and the resolution', async () => {
    await tab('Playground').click();
    await page.getByLabel('Query').fill('kitten');
    await page.getByRole('radio', { name: 'Hybrid' }).check();
    await page.getByLabel('Token budget').fill('500');
    await page.getByLabel('API key').selectOption(apiKeyId);
    await page.getByRole('button', { name: 'Simulate' }).click();
    const results = page.getByRole('list', { name: 'Ranked results' });
    await results.waitFor();
    const items = results.getByRole('listitem');
    expect(await items.count()).toBeGreaterThan(0);
    // The cat memory ranks first, with a vector score; the other tenant's kitten never appears.
    expect(await items.first().getByRole('heading').textContent()).toMatch(/#1 pet-\d+/);
    expect(await items.first().locator('dd').nth(3).textContent()).toMatch(/^\d\.\d{4}$/);
    expect(await results.textContent()).not.toContain('secret');
    const resolution = page.locator('section', { has: page.getByRole('heading', { name: 'Resolution' }) });
    expect(await resolution.textContent()).toMatch(/Embedding source\s*static/);
    expect(await resolution.textContent()).toMatch(/Vector store\s*sqlite-vec/);
    expect(await resolution.textContent()).toMatch(/Strategy used\s*hybrid/);
  });

  it('starts a reindex and follows its progress bar (job events) to 100%, with a link to the job in bull-board', async () => {
    await tab('Engine').click();
    await page.getByText(/Vector store \(sqlite-vec\): ok/).waitFor();
    await page.getByLabel('Re-embed everything (force)').check();
    const seenValues = new Set<string>();
    const memoriesBefore = (await call('GET', '/api/memory')).body.total as number;
    await page.getByRole('button', { name: 'Reindex now' }).click();
    const bar = page.getByRole('progressbar', { name: 'Reindex progress' });
    await waitUntil(
      async () => {
        const v = await bar.getAttribute('value').catch(() => null);
        if (v !== null) seenValues.add(v);
        return v === '100';
      },
      60_000,
      'reindex progress at 100%',
      20,
    );
    await page.getByText(/Reindex: completed/).waitFor();
    // The job's own result, as the page shows it: every memory it counted re-embedded, none failed.
    const finished = page.getByText(/Finished: phase done, done \d+, total \d+, failed \d+/);
    await finished.waitFor();
    const [, done, total, failed] = /done (\d+), total (\d+), failed (\d+)/.exec((await finished.textContent()) ?? '')!.map(Number);
    expect({ done, failed }).toEqual({ done: total, failed: 0 });
    // What it counted is the memories there were (a background job may have added or removed one since the click).
    const memoriesAfter = (await call('GET', '/api/memory')).body.total as number;
    expect([memoriesBefore, memoriesAfter]).toContain(total);
    expect([...seenValues].every((v) => Number(v) >= 0 && Number(v) <= 100)).toBe(true);
    const link = page.getByRole('link', { name: /Open job .+ in bull-board/ });
    expect(await link.getAttribute('href')).toMatch(/^\/admin\/queues\/queue\/reindex\/.+/);
    // Progress came from the event stream, not from polling the job.
    expect(requests.some((r) => /^\/api\/jobs\/reindex\/[^/]+\/events$/.test(r.path))).toBe(true);
    expect(requests.some((r) => /^\/api\/jobs\/reindex\/[^/]+$/.test(r.path))).toBe(false);
  });

  it('saves memory settings, warning about the token cost when memory is switched on', async () => {
    const card = page.locator('section', { has: page.getByRole('heading', { name: 'Memory settings' }) });
    await card.getByLabel('Token budget per request').fill('800');
    await card.getByLabel(/Memory enabled/).check();
    expect(await card.getByRole('note').textContent()).toMatch(/up to 800 prompt tokens to every chat request.*800,000 extra/);
    await card.getByRole('button', { name: 'Save memory settings' }).click();
    await card.getByText('Memory settings saved.').waitFor();
    expect(await card.getByRole('note').count()).toBe(0);
    expect((await call('GET', '/api/settings/memory')).body).toMatchObject({ enabled: true, maxTokens: 800 });
    // An invalid value comes back in the server's words.
    await card.getByLabel('Retention (days)').fill('0');
    await card.getByLabel('Retention (days)').evaluate((el) => (el as HTMLInputElement).form!.noValidate = true);
    await card.getByRole('button', { name: 'Save memory settings' }).click();
    expect(await card.getByRole('alert').textContent()).toMatch(/retentionDays.*\[400\]/);
    expect((await call('GET', '/api/settings/memory')).body.retentionDays).toBe(30);
  });

  it('lists queues and jobs on the Jobs tab, polling no faster than every 2 s', async () => {
    await tab('Jobs').click();
    const queues = page.locator('section', { has: page.getByRole('heading', { name: 'Queues' }) });
    for (const q of ['maintenance', 'extraction', 'embedding', 'reindex']) await queues.getByRole('link', { name: `${q} queue in bull-board` }).waitFor();
    const reindexCompleted = queues.locator('.queue', { hasText: 'reindex' }).locator('div', { hasText: 'completed' }).locator('dd');
    await waitUntil(async () => Number(await reindexCompleted.textContent()) >= 1, 15_000, 'completed reindex counted');
    const start = Date.now();
    await page.waitForTimeout(7_000);
    const polls = requests.filter((r) => r.at >= start && r.method === 'GET' && r.path === '/api/jobs').map((r) => r.at);
    expect(polls.length).toBeGreaterThanOrEqual(1);
    for (let i = 1; i < polls.length; i++) expect(polls[i] - polls[i - 1]).toBeGreaterThanOrEqual(1900);
  });

  it('shows a failed job with its reason; Retry runs it again, Remove (confirmed) deletes it', async () => {
    // The worker refuses an invalid payload for good: two failed jobs (one stays for the screenshots).
    const doomed = await maintenance.add('repair-sweep', { reason: 'bogus' }, { attempts: 1 });
    await maintenance.add('repair-sweep', { reason: 'also-bogus' }, { attempts: 1 });
    const running = page.getByRole('list', { name: 'Running and failed jobs' });
    const card = running.getByRole('listitem').filter({ hasText: `id ${doomed.id} ` });
    await card.getByText(/Failed: invalid payload/).waitFor({ timeout: 20_000 });
    expect(await card.textContent()).toContain('attempts 1');
    const firstRun = (await maintenance.getJob(doomed.id!))!.processedOn!;
    await page.getByRole('button', { name: `Retry job ${doomed.id}` }).click();
    await page.getByText(`Job ${doomed.id} (repair-sweep) queued again.`).waitFor();
    // The worker ran it again (a later processedOn) and refused it again.
    await waitUntil(
      async () => {
        const j = await maintenance.getJob(doomed.id!);
        return j && j.processedOn! > firstRun && (await j.getState()) === 'failed';
      },
      20_000,
      'processed and failed again',
    );
    await card.getByText(/Failed: invalid payload/).waitFor({ timeout: 20_000 });
    await page.getByRole('button', { name: `Remove job ${doomed.id}` }).click();
    await page.getByRole('dialog', { name: 'Remove this entry?' }).getByRole('button', { name: 'Remove' }).click();
    await page.getByText(`Job ${doomed.id} removed.`).waitFor();
    await card.waitFor({ state: 'detached' });
    expect(await maintenance.getJob(doomed.id!)).toBeUndefined();
  });

  it('opens bull-board with the same session', async () => {
    const board = await context.newPage();
    await board.goto(`${base}/admin/queues`);
    expect(new URL(board.url()).pathname).toBe('/admin/queues');
    for (const q of ['maintenance', 'reindex']) await board.getByText(q, { exact: true }).first().waitFor({ timeout: 20_000 });
    await board.close();
  });

  it('every tab: no serious or critical axe violation, every control reachable by keyboard, screenshots at both sizes', async () => {
    const failures: string[] = [];
    for (const size of SIZES) {
      await page.setViewportSize({ width: size.width, height: size.height });
      for (const t of TABS) {
        await page.goto(`${base}/dashboard/#/${t}`);
        await page.getByRole('tab', { selected: true }).waitFor();
        // Settle: the tab's first data is in (no loading line left).
        await waitUntil(async () => (await page.getByRole('status').filter({ hasText: /^Loading/ }).count()) === 0, 15_000, `${t} loaded`);
        // Each tab with its typical content, so axe checks that too.
        if (t === 'memories') await page.getByRole('button', { name: 'History of weather-29' }).click();
        if (t === 'playground') {
          await page.getByLabel('Query').fill('my pet cat');
          await page.getByLabel('API key').selectOption(apiKeyId);
          await page.getByRole('button', { name: 'Simulate' }).click();
          await page.getByRole('list', { name: 'Ranked results' }).waitFor();
        }
        if (t === 'jobs') await page.getByText(/Failed: invalid payload/).waitFor({ timeout: 20_000 });
        if (t === 'engine') {
          await page.getByRole('button', { name: 'Reindex now' }).click();
          await page.getByText(/Reindex: completed/).waitFor();
        }
        await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
        await page.mouse.move(1, 799);
        await page.screenshot({ path: path.join(SCREENSHOTS, `${t}-${size.name}.png`) });
        await page.screenshot({ path: path.join(SCREENSHOTS, `${t}-${size.name}-full.png`), fullPage: true });
        for (const v of await seriousViolations(page)) failures.push(`${t} @${size.name}: ${v}`);
        if (size.name === 'desktop') for (const c of await unreachableControls(page)) failures.push(`${t}: not reachable by Tab: ${c}`);
      }
    }
    // Arrow keys move between tabs (the unselected ones are reached this way).
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.goto(`${base}/dashboard/#/memories`);
    await tab('Memories').focus();
    await page.keyboard.press('ArrowRight');
    await page.getByRole('tab', { name: 'Playground', selected: true }).waitFor();
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Playground');
    expect(failures).toEqual([]);
    expect((page as Page & { _errors?: string[] })._errors).toEqual([]);
  });

  it('signing out ends the session for /api and bull-board alike', async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('Management token').waitFor();
    const board = await context.newPage();
    await board.goto(`${base}/admin/queues`);
    expect(new URL(board.url()).pathname).toBe('/admin/login');
    await board.close();
  });
});
