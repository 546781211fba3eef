import type { SignatureInput, VecQuantization } from './types';

/**
 * The one signature builder (DESIGN §7): `<source>:<identity|model>:<dim>[:int8]`, with literal
 * `null` for unknown parts as in the original. The embedding resolution reports it without a
 * storage suffix; a vector store appends `:int8` when it stores int8.
 */
export function vectorSignature(input: SignatureInput, quantization: VecQuantization = 'none'): string {
  const dim = input.dimensions !== null && Number.isInteger(input.dimensions) && input.dimensions > 0 ? input.dimensions : null;
  return `${input.source || 'null'}:${input.identity || input.model || 'null'}:${dim ?? 'null'}${quantization === 'int8' ? ':int8' : ''}`;
}

/** Splits the `:<dim>[:int8]` tail off a signature; null when it has none. */
export function parseSignature(signature: string): { dim: number; quantization: VecQuantization } | null {
  const m = /:(\d+)(:int8)?$/.exec(signature);
  if (!m) return null;
  return { dim: Number(m[1]), quantization: m[2] ? 'int8' : 'none' };
}
