import crypto from 'node:crypto';
import { Router, type Request, type Response } from 'express';
import type { ApiContext } from '../api-context';
import { apiKeyOf } from '../auth';
import { handle, rawJsonBody } from '../validate';
import type { RouteDoc } from '../route-doc';
import { lastUserText, responseText } from '../../memory/chat-text';
import type { ChatRequest } from '../../memory/injection';
import { applyMemory, enqueueExtraction, extractionPayload, memoryPlan, setMemoryHeaders } from '../../proxy/memory-phase';
import { chatCompletionBody, modelParams, observeBody } from './proxy.schema';
import { ClientGone } from '../../proxy/client-gone';
import { spliceInjectedMessage } from '../../proxy/raw-splice';
import { IGNORE_SSE, relayBody, relaySse, SseDeltaCollector } from '../../proxy/stream-tee';
import { isEventStream, passThroughHeaders, upstreamErrorCode, upstreamFailure, type UpstreamResponse } from '../../proxy/upstream';

/** A non-streaming reply larger than this is relayed but not parsed for extraction. */
const MAX_PARSED_REPLY_BYTES = 8 * 1_048_576;

function writeUpstreamHead(res: Response, up: UpstreamResponse, sse: boolean): void {
  res.status(up.status);
  for (const [name, value] of Object.entries(passThroughHeaders(up.headers))) res.setHeader(name, value);
  if (sse) {
    res.setHeader('cache-control', 'no-cache');
    // Reverse proxies (nginx) must not buffer the stream either.
    res.setHeader('x-accel-buffering', 'no');
    // A stream's client learns the status as soon as the upstream answers, before the first event.
    res.flushHeaders();
  }
  // A JSON answer is useless before its last byte: its head leaves with the body, in one write (relayBody).
}

/**
 * An upstream JSON body that broke before its end. While nothing has been written (a JSON answer leaves in one
 * write) the client gets a 502/504 in the error shape instead of the upstream's status and a cut connection.
 */
function failedBody(ctx: ApiContext, res: Response, up: UpstreamResponse, error: unknown): void {
  ctx.log.warn({ requestId: res.locals.requestId, code: upstreamErrorCode(error) }, 'upstream body ended unexpectedly');
  if (res.headersSent) return;
  for (const name of Object.keys(passThroughHeaders(up.headers))) res.removeHeader(name);
  throw upstreamFailure(error);
}

/** Calls the upstream, mapping a failure to 502/504 unless the client is already gone (then null). */
async function callUpstream(ctx: ApiContext, res: Response, signal: ClientGone, call: () => Promise<UpstreamResponse>): Promise<UpstreamResponse | null> {
  try {
    return await call();
  } catch (err) {
    if (signal.aborted) return null;
    ctx.log.warn({ requestId: res.locals.requestId, code: upstreamErrorCode(err) }, 'upstream call failed');
    throw upstreamFailure(err);
  }
}

/** How /v1/chat/completions answers: JSON, or the upstream's SSE chunks when `stream` is true. */
const CHAT_DOC: RouteDoc = {
  summary: 'OpenAI-compatible chat completion, with memory injected and facts extracted afterwards',
  description: 'Relayed to the configured upstream. With `stream: true` the answer is the upstream\'s Server-Sent Events, relayed as they arrive.',
  responses: {
    200: { description: 'A chat completion (JSON), or its chunks as Server-Sent Events when `stream` is true', contentType: ['application/json', 'text/event-stream'] },
  },
};

/** The OpenAI-compatible gateway routes (chat proxy, models, memory inject/observe), mounted at /v1 behind an API key. */
export function proxyRoutes(ctx: ApiContext): Router {
  const router = Router();
  const upstream = ctx.upstream;

  router.post(
    '/chat/completions',
    handle({ body: chatCompletionBody }, async (_input, req, res) => {
      const apiKeyId = apiKeyOf(res).id;
      const logRequestId = String(res.locals.requestId);
      const original = req.body as ChatRequest;
      const gone = new ClientGone({ req, res });
      const plan = memoryPlan(ctx.settings.memory(), req.headers);
      // A fresh id per chat request: a client-chosen x-request-id must not collide extraction job ids (memory off: none runs).
      const chatId = plan.on ? crypto.randomUUID() : '';
      const { body, outcome } = await applyMemory(
        { retrieval: ctx.retrieval, log: ctx.log },
        { apiKeyId, body: original, plan, requestId: chatId, logRequestId, signal: gone },
      );
      setMemoryHeaders(res, outcome);
      if (gone.aborted) return;

      // Unchanged (memory off, opted out, nothing to inject, degraded): the client's own bytes go upstream, not a
      // re-serialisation; with one message injected, the client's bytes with that message spliced in (raw-splice.ts).
      const clientBytes = rawJsonBody(req);
      const raw = !clientBytes ? null : body === original ? clientBytes : spliceInjectedMessage(clientBytes, original, body);
      const up = await callUpstream(ctx, res, gone, () => upstream.chatCompletions(raw ?? body, { signal: gone, stream: original.stream === true }));
      if (!up) return;
      const ok = up.status >= 200 && up.status < 300;
      const sse = isEventStream(up.headers);
      writeUpstreamHead(res, up, sse);

      let assistantText: string | null = null;
      if (sse) {
        // Memory off: nothing is extracted, so the events are relayed without being parsed.
        const collector = plan.on ? new SseDeltaCollector() : null;
        const end = await relaySse(up.body, res, collector ?? IGNORE_SSE, gone);
        if (end === 'upstream-failed') ctx.log.warn({ requestId: logRequestId }, 'upstream stream ended unexpectedly');
        if (end !== 'complete') return;
        res.end();
        // A partial or failed answer is not something the user said or accepted: no extraction.
        if (!ok || !collector || collector.sawError) return;
        assistantText = collector.text();
      } else {
        // The reply is kept and parsed only for extraction from it (memory on and extractFromAssistant, off by default):
        // otherwise it is relayed without a copy kept or parsed.
        const { end, kept, tail, error } = await relayBody(up.body, res, gone, plan.on && plan.settings.extractFromAssistant ? MAX_PARSED_REPLY_BYTES : 0);
        if (end === 'upstream-failed') failedBody(ctx, res, up, error);
        if (end !== 'complete') return;
        res.end(tail);
        if (!ok || !plan.on) return;
        assistantText = kept ? parsedReplyText(kept) : null;
      }

      if (!plan.on) return;
      const payload = extractionPayload({ apiKeyId, sessionId: plan.sessionId, messages: original.messages, assistantText, settings: plan.settings, requestId: chatId });
      if (payload) enqueueExtraction(ctx, payload, logRequestId);
    }, CHAT_DOC),
  );

  /** Relays a GET to the upstream as it answers (status, headers and body unchanged). */
  const relayGet = async (req: Request, res: Response, call: (signal: ClientGone) => Promise<UpstreamResponse>) => {
    const gone = new ClientGone({ req, res });
    const up = await callUpstream(ctx, res, gone, () => call(gone));
    if (!up) return;
    writeUpstreamHead(res, up, false);
    const { end, tail, error } = await relayBody(up.body, res, gone, 0);
    if (end === 'upstream-failed') failedBody(ctx, res, up, error);
    if (end === 'complete') res.end(tail);
  };

  router.get(
    '/models',
    handle({}, (_input, req, res) => relayGet(req, res, (signal) => upstream.models({ signal }))),
  );

  // The OpenAI SDK's models.retrieve(id).
  router.get(
    '/models/:id',
    handle({ params: modelParams }, ({ params }, req, res) => relayGet(req, res, (signal) => upstream.model(params.id, { signal }))),
  );

  router.post(
    '/memory/inject',
    handle({ body: chatCompletionBody }, async (_input, req, res) => {
      const plan = memoryPlan(ctx.settings.memory(), req.headers);
      const { body, outcome } = await applyMemory(
        { retrieval: ctx.retrieval, log: ctx.log },
        { apiKeyId: apiKeyOf(res).id, body: req.body as ChatRequest, plan, requestId: crypto.randomUUID(), logRequestId: String(res.locals.requestId) },
      );
      setMemoryHeaders(res, outcome);
      return { body, memory: outcome };
    }),
  );

  router.post(
    '/memory/observe',
    handle({ body: observeBody }, async ({ body }, req, res) => {
      const plan = memoryPlan(ctx.settings.memory(), req.headers);
      if (!plan.on) return { accepted: false, reason: plan.offStatus === 'opted-out' ? 'opted_out' : 'memory_disabled' };
      if (!lastUserText(body.messages)) return { accepted: false, reason: 'no_user_text' };
      const replyText = body.response !== undefined ? responseText(body.response) : '';
      const payload = extractionPayload({
        apiKeyId: apiKeyOf(res).id,
        sessionId: body.sessionId ?? plan.sessionId,
        messages: body.messages,
        assistantText: replyText || body.assistantText?.trim() || null,
        settings: plan.settings,
        requestId: crypto.randomUUID(),
      });
      if (!payload) return { accepted: false, reason: 'no_user_text' };
      const job = await ctx.queues.enqueue('extract-facts', payload);
      res.status(202);
      return { jobId: job.jobId, queue: job.queue, accepted: true };
    }),
  );

  return router;
}

/** The assistant text of a buffered JSON reply, or null when it is not JSON. */
function parsedReplyText(raw: Buffer): string | null {
  try {
    return responseText(JSON.parse(raw.toString('utf8')) as unknown) || null;
  } catch {
    return null;
  }
}
