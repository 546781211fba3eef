import fc from 'fast-check';

type Json = Record<string, unknown>;

const LEAF = fc.oneof(fc.string({ maxLength: 12 }), fc.integer(), fc.boolean(), fc.constant(null));

/**
 * Values that mostly conform to a JSON Schema (what jsonSchemaOf makes of a route's zod schema), so generated bodies
 * and queries get past the first check and into the handler; mutations then break them in one place. Depth-limited.
 */
export function fromJsonSchema(schema: unknown, depth = 0): fc.Arbitrary<unknown> {
  if (!schema || typeof schema !== 'object' || depth > 5) return LEAF;
  const s = schema as Json;
  if (s.const !== undefined) return fc.constant(s.const);
  if (Array.isArray(s.enum) && s.enum.length) return fc.constantFrom(...(s.enum as unknown[]));
  const alts = (s.anyOf ?? s.oneOf) as unknown[] | undefined;
  if (Array.isArray(alts) && alts.length) return fc.oneof(...alts.map((a) => fromJsonSchema(a, depth + 1)));
  if (Array.isArray(s.type)) return fc.oneof(...(s.type as string[]).map((t) => fromJsonSchema({ ...s, type: t }, depth)));
  switch (s.type) {
    case 'string': {
      if (s.format === 'date-time') return fc.date({ min: new Date('2000-01-01'), max: new Date('2100-01-01'), noInvalidDate: true }).map((d) => d.toISOString());
      if (s.format === 'date') return fc.date({ min: new Date('2000-01-01'), max: new Date('2100-01-01'), noInvalidDate: true }).map((d) => d.toISOString().slice(0, 10));
      if (s.pattern === '^\\d+$') return fc.nat({ max: 1000 }).map(String);
      if (typeof s.pattern === 'string' && s.pattern.includes('=')) return fc.tuple(fc.stringMatching(/^[a-z]{0,8}$/), fc.stringMatching(/^[a-z]{1,8}$/)).map(([a, b]) => `${a}=${b}`);
      const min = Math.min(typeof s.minLength === 'number' ? s.minLength : 0, 40);
      const max = Math.max(min, Math.min(typeof s.maxLength === 'number' ? s.maxLength : 40, 40));
      return fc.string({ minLength: min, maxLength: max });
    }
    case 'integer':
    case 'number': {
      const lo = typeof s.minimum === 'number' ? s.minimum : typeof s.exclusiveMinimum === 'number' ? s.exclusiveMinimum + 1 : -1000;
      const hi = typeof s.maximum === 'number' ? Math.min(s.maximum, Number.MAX_SAFE_INTEGER) : typeof s.exclusiveMaximum === 'number' ? s.exclusiveMaximum - 1 : 1000;
      return s.type === 'integer' ? fc.integer({ min: Math.ceil(lo), max: Math.floor(hi) }) : fc.double({ min: lo, max: hi, noNaN: true, noDefaultInfinity: true });
    }
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array':
      return fc.array(fromJsonSchema(s.items, depth + 1), { maxLength: 3 });
    case 'object': {
      const props = (s.properties ?? {}) as Record<string, unknown>;
      const required = (s.required ?? []) as string[];
      const rec = Object.fromEntries(Object.entries(props).map(([k, v]) => [k, fromJsonSchema(v, depth + 1)]));
      return fc.record(rec, { requiredKeys: required.filter((k) => k in props) }) as fc.Arbitrary<unknown>;
    }
    default:
      return LEAF;
  }
}
