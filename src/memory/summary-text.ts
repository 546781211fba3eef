import { estimateTokens } from './tokens';
import type { MemoryRecord } from './types';

/** The least budget a summary is built for: a header and one (truncated) line must fit. */
export const MIN_SUMMARY_BUDGET = 64;

/**
 * The first three sentences of a text, punctuation kept (the original split on every `.`, so
 * "3.14" broke and every sentence ended in "."); line breaks collapse so one memory is one line.
 */
export function firstSentences(text: string, n = 3): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  const sentences = flat.split(/(?<=[.!?])\s+/).filter((s) => s.length > 0);
  return sentences.length <= n ? flat : sentences.slice(0, n).join(' ');
}

/** One candidate as a summary line: `[type] key: first three sentences` (key part omitted when empty). */
export function summaryLine(m: Pick<MemoryRecord, 'type' | 'key' | 'content'>): string {
  const text = firstSentences(m.content);
  return m.key ? `[${m.type}] ${m.key}: ${text}` : `[${m.type}] ${text}`;
}

/** One summary row to write: its text and the memories it replaces. */
export interface SummaryChunk {
  content: string;
  covered: MemoryRecord[];
}

/**
 * Folds memories (in the given order) into summary texts of at most `budgetTokens` each (the
 * injection budget: a summary that could never be injected whole is of no use): a header, then one
 * line per memory; a line that alone would not fit is cut. The split is a pure function of the
 * input, so a retry over the same memories yields the same chunks.
 */
export function buildSummaryChunks(memories: MemoryRecord[], budgetTokens: number, header: (count: number) => string): SummaryChunk[] {
  const maxChars = Math.max(MIN_SUMMARY_BUDGET, budgetTokens) * 4;
  // The header's length is reserved for the largest count a chunk can have.
  const headerReserve = header(memories.length).length;
  const chunks: SummaryChunk[] = [];
  let lines: string[] = [];
  let covered: MemoryRecord[] = [];
  let chars = headerReserve;
  const close = () => {
    if (covered.length === 0) return;
    chunks.push({ content: `${header(covered.length)}\n${lines.join('\n')}`, covered });
    lines = [];
    covered = [];
    chars = headerReserve;
  };
  for (const m of memories) {
    let line = summaryLine(m);
    if (chars + 1 + line.length > maxChars && covered.length > 0) close();
    const room = maxChars - chars - 1;
    if (line.length > room) line = `${line.slice(0, Math.max(0, room - 1))}…`;
    lines.push(line);
    covered.push(m);
    chars += 1 + line.length;
  }
  close();
  for (const c of chunks) if (estimateTokens(c.content) > Math.max(MIN_SUMMARY_BUDGET, budgetTokens)) throw new Error('summary chunk exceeds its budget');
  return chunks;
}

/** A compaction summary line: the first sentence only, at most 160 characters. */
export function shortLine(m: Pick<MemoryRecord, 'type' | 'key' | 'content'>): string {
  const line = summaryLine({ ...m, content: firstSentences(m.content, 1) });
  return line.length <= 160 ? line : `${line.slice(0, 159)}…`;
}

/**
 * One summary for all of `memories` that fits `budgetTokens` (compaction: the point is to shrink):
 * a header, then short lines while they fit; the header says how many are shown, and the rest
 * are named only in the covered list (their text is in the history).
 */
export function buildCappedSummary(memories: MemoryRecord[], budgetTokens: number, header: (count: number, shown: number) => string): SummaryChunk | null {
  if (memories.length === 0) return null;
  const maxChars = Math.max(MIN_SUMMARY_BUDGET, budgetTokens) * 4;
  // The header is longest when it says that not all are shown.
  const headerReserve = Math.max(header(memories.length, memories.length).length, header(memories.length, Math.max(0, memories.length - 1)).length);
  const lines: string[] = [];
  let chars = headerReserve;
  for (const m of memories) {
    const line = shortLine(m);
    if (chars + 1 + line.length > maxChars) break;
    lines.push(line);
    chars += 1 + line.length;
  }
  return { content: `${header(memories.length, lines.length)}${lines.length ? `\n${lines.join('\n')}` : ''}`, covered: memories };
}
