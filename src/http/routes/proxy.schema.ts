import { z } from 'zod';
import { MAX_SESSION_ID_LENGTH } from '../../memory/injection';

/** One chat message: a role is required; content and every other field (name, tool_calls, cache_control…) are the provider's business. */
const chatMessage = z.looseObject({
  role: z.string().min(1).max(64),
  content: z.unknown().optional(),
});

/**
 * A chat completions request: only what Engram reads is checked; unknown fields pass through.
 * The route forwards the body it received, not this parse, so key order and values reach the
 * upstream untouched.
 */
export const chatCompletionBody = z.looseObject({
  model: z.string().max(256).optional(),
  messages: z.array(chatMessage).max(100_000),
  stream: z.boolean().nullable().optional(),
});
export type ChatCompletionBody = z.infer<typeof chatCompletionBody>;

/** POST /v1/memory/observe: a finished exchange to learn from (the reply as a provider response body or as text). */
export const observeBody = z.object({
  messages: z.array(chatMessage).max(100_000),
  response: z.unknown().optional(),
  assistantText: z.string().optional(),
  sessionId: z.string().trim().min(1).max(MAX_SESSION_ID_LENGTH).optional(),
});
export type ObserveBody = z.infer<typeof observeBody>;

/**
 * GET /v1/models/:id: a model id as the upstream names it (`gpt-4o-mini`, `ft:gpt-4o-mini:org:x`). `.` and `..` are
 * refused: they survive encodeURIComponent and the URL would resolve to another upstream path (`/v1/models/..` is `/v1/`).
 */
export const modelParams = z.object({ id: z.string().min(1).max(256).refine((id) => id !== '.' && id !== '..', 'not a model id (a dot segment)') });
