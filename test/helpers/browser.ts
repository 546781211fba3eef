import fs from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';

/** Debian's Chromium with the flags every e2e test uses (no sandbox in containers, nothing fetched in the background). */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync'],
  });
}

let axeSource: string | null = null;

interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

/**
 * axe-core from node_modules, evaluated in the page (devtools evaluation: the page's CSP stays on);
 * the serious and critical violations in words. `selector` limits the run to one part of the page.
 */
export async function seriousViolations(page: Page, selector?: string): Promise<string[]> {
  axeSource ??= fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
  if (!(await page.evaluate('typeof window.axe !== "undefined"'))) await page.evaluate(axeSource);
  const context = selector ? JSON.stringify({ include: [[selector]] }) : 'document';
  const violations = (await page.evaluate(`axe.run(${context}, { resultTypes: ['violations'] }).then((r) => r.violations)`)) as AxeViolation[];
  return violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.impact} ${v.id}: ${v.help} at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}

/**
 * Tabs through the whole page and returns the visible, enabled controls inside `selector` that were
 * never focused (radios other than the checked one are reached with the arrow keys, so they are skipped).
 */
export async function unreachableControls(page: Page, selector: string): Promise<string[]> {
  const total = await page.evaluate((sel) => {
    const visible = (el: HTMLElement) =>
      !(el as HTMLButtonElement).disabled &&
      el.getClientRects().length > 0 &&
      !el.classList.contains('sr-only') &&
      el.getAttribute('tabindex') !== '-1' &&
      !((el as HTMLInputElement).type === 'radio' && !(el as HTMLInputElement).checked);
    const controls = 'a[href], button, input, select, textarea, summary';
    const inside = Array.from(document.querySelectorAll<HTMLElement>(`${sel} :is(${controls})`)).filter(visible);
    inside.forEach((el, i) => el.setAttribute('data-e2e-control', String(i)));
    (document.activeElement as HTMLElement | null)?.blur();
    return Array.from(document.querySelectorAll<HTMLElement>(controls)).filter(visible).length;
  }, selector);
  const seen = new Set<string>();
  for (let i = 0; i < total + 10; i++) {
    await page.keyboard.press('Tab');
    const id = await page.evaluate(() => document.activeElement?.getAttribute('data-e2e-control') ?? null);
    if (id !== null) seen.add(id);
  }
  return page.evaluate((reached) => {
    const out: string[] = [];
    document.querySelectorAll<HTMLElement>('[data-e2e-control]').forEach((el) => {
      if (!reached.includes(el.getAttribute('data-e2e-control')!)) out.push(`${el.tagName.toLowerCase()}#${el.id} "${(el.getAttribute('aria-label') ?? el.textContent ?? '').trim().slice(0, 40)}"`);
      el.removeAttribute('data-e2e-control');
    });
    return out;
  }, [...seen]);
}

/** Controls inside `selector` without an accessible name (axe checks most; this also covers buttons and selects in words). */
export async function unlabelledControls(page: Page, selector: string): Promise<string[]> {
  return page.evaluate((sel) => {
    const out: string[] = [];
    document.querySelectorAll<HTMLElement>(`${sel} :is(button, input, select, textarea)`).forEach((el) => {
      const labels = (el as HTMLInputElement).labels;
      const named = (labels && labels.length > 0) || el.getAttribute('aria-label') || el.getAttribute('aria-labelledby') || (el.tagName === 'BUTTON' && el.textContent?.trim());
      if (!named) out.push(`${el.tagName.toLowerCase()}#${el.id}`);
    });
    return out;
  }, selector);
}
