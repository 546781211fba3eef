/**
 * Text out of chat requests and responses: the retrieval query, the extraction input and the
 * assistant reply. Pure and total: anything malformed yields "" instead of an exception, because
 * these run on the request path where memory must fail open.
 */

/** The extraction payload cap (DESIGN §3): only the newest 64 KiB of any text is kept. */
export const MAX_TEXT_CHARS = 65_536;

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Keeps the last `max` characters of `text` without starting on half of a surrogate pair. */
export function tailChars(text: string, max: number = MAX_TEXT_CHARS): string {
  if (text.length <= max) return text;
  let out = text.slice(text.length - Math.max(0, max));
  // A cut between a high and a low surrogate would leave an unpaired low surrogate in front.
  const first = out.charCodeAt(0);
  if (first >= 0xdc00 && first <= 0xdfff) out = out.slice(1);
  return out;
}

/** Text of content parts whose type is in `types` (parts without a type but with text count too). */
function partsText(parts: unknown[], types: ReadonlySet<string>, sep: string): string {
  const out: string[] = [];
  for (const p of parts) {
    if (typeof p === 'string') {
      out.push(p);
      continue;
    }
    if (!isObj(p) || typeof p.text !== 'string') continue;
    if (p.type === undefined || (typeof p.type === 'string' && types.has(p.type))) out.push(p.text);
  }
  return out.join(sep);
}

const USER_PART_TYPES: ReadonlySet<string> = new Set(['text', 'input_text']);
const ASSISTANT_PART_TYPES: ReadonlySet<string> = new Set(['text', 'output_text']);

function contentText(content: unknown, types: ReadonlySet<string>, sep: string): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return partsText(content, types, sep);
  return '';
}

/** Text of the last `role: 'user'` message (string content, or text/input_text parts joined by a space), trimmed and capped to the newest 64 KiB. */
export function lastUserText(messages: unknown): string {
  if (!Array.isArray(messages)) return '';
  for (let i = messages.length - 1; i >= 0; i--) {
    const m: unknown = messages[i];
    if (!isObj(m) || m.role !== 'user') continue;
    return tailChars(contentText(m.content, USER_PART_TYPES, ' ').trim()).trim();
  }
  return '';
}

/** Text of the Responses API `output` array: message items' output_text parts. */
function responsesOutputText(output: unknown[]): string {
  const out: string[] = [];
  for (const item of output) {
    if (!isObj(item) || (item.type !== undefined && item.type !== 'message')) continue;
    if (item.role !== undefined && item.role !== 'assistant') continue;
    const t = contentText(item.content, ASSISTANT_PART_TYPES, '\n');
    if (t) out.push(t);
  }
  return out.join('\n');
}

/** Assistant text of a non-streaming response (OpenAI `choices[0].message.content`, Claude `content[]` text blocks, Responses `output_text`/`output`), trimmed and capped to the newest 64 KiB. */
export function responseText(body: unknown): string {
  if (!isObj(body)) return '';
  let text = '';
  if (Array.isArray(body.choices)) {
    const choice: unknown = body.choices[0];
    if (isObj(choice) && isObj(choice.message)) text = contentText(choice.message.content, ASSISTANT_PART_TYPES, '\n');
  } else if (Array.isArray(body.content)) {
    text = partsText(body.content, new Set(['text']), '\n');
  } else if (typeof body.output_text === 'string') {
    text = body.output_text;
  } else if (Array.isArray(body.output)) {
    // Raw HTTP Responses bodies have no `output_text` (that is an SDK convenience field).
    text = responsesOutputText(body.output);
  }
  return tailChars(text.trim()).trim();
}

/** Text of one OpenAI streaming chunk (`choices[0].delta.content`), given as parsed JSON or as the JSON string of an SSE `data:` line; "" for `[DONE]`, role-only, tool-call or malformed chunks. */
export function streamDeltaText(chunkJson: unknown): string {
  let chunk = chunkJson;
  if (typeof chunk === 'string') {
    let s = chunk.trim();
    if (s.startsWith('data:')) s = s.slice(5).trim();
    if (!s.startsWith('{')) return '';
    try {
      chunk = JSON.parse(s) as unknown;
    } catch {
      return '';
    }
  }
  if (!isObj(chunk) || !Array.isArray(chunk.choices)) return '';
  // With n > 1 a chunk may carry other choices; the captured reply is choice 0.
  const choice: unknown =
    chunk.choices.find((c: unknown) => isObj(c) && c.index === 0) ??
    chunk.choices.find((c: unknown) => isObj(c) && c.index === undefined);
  if (!isObj(choice) || !isObj(choice.delta)) return '';
  return contentText(choice.delta.content, ASSISTANT_PART_TYPES, '');
}
