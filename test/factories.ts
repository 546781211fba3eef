import crypto from 'node:crypto';
import type { CreateMemoryInput } from '../src/memory/types';

let n = 0;

/** A valid memory input; override any field. */
export function memoryInput(over: Partial<CreateMemoryInput> = {}): CreateMemoryInput {
  n++;
  return {
    apiKeyId: 'key-a',
    type: 'factual',
    key: `fact:${n}:${crypto.randomBytes(3).toString('hex')}`,
    content: `The user likes fact number ${n}`,
    metadata: {},
    ...over,
  };
}
