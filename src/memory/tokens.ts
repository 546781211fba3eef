/** Token estimate used everywhere (the original's rule): ceil(characters / 4); 0 for empty. */
export function estimateTokens(text: unknown): number {
  if (typeof text !== 'string' || text.length === 0) return 0;
  return Math.ceil(text.length / 4);
}
