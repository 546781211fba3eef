import { checkOutboundUrl, guardedFetch, OutboundUrlError, type OutboundPolicy } from '../net/url-policy';
import { BackendError } from './types';

/**
 * A backend's base URL, checked now (scheme, credentials, literal addresses; names are checked again
 * at connect time) and ending in `/` so that relative endpoint paths resolve below it.
 */
export function backendBaseUrl(baseUrl: string, policy: OutboundPolicy): URL {
  const base = checkOutboundUrl(baseUrl, policy);
  if (!base.pathname.endsWith('/')) base.pathname += '/';
  return base;
}

export interface OutboundRequest {
  method: string;
  url: URL;
  headers: Record<string, string>;
  body?: string;
  timeoutMs: number;
  maxResponseBytes: number;
}

export interface OutboundResponse {
  status: number;
  contentType: string;
  text: string;
}

/**
 * One request to a remote backend: through the shared outbound URL policy (checked at connect time,
 * every redirect re-checked), cut off after `timeoutMs`, the answer read up to `maxResponseBytes`.
 * Failures throw a BackendError whose message names neither the URL nor any header.
 */
export async function backendFetch(backendId: string, req: OutboundRequest, policy: OutboundPolicy): Promise<OutboundResponse> {
  const signal = AbortSignal.timeout(req.timeoutMs);
  let res: Awaited<ReturnType<typeof guardedFetch>>;
  try {
    res = await guardedFetch(req.url, { method: req.method, headers: req.headers, body: req.body, signal }, policy);
  } catch (err) {
    if (err instanceof OutboundUrlError) throw new BackendError(`backend ${backendId}: ${err.message}`);
    if (signal.aborted) throw new BackendError(`backend ${backendId} did not answer within ${req.timeoutMs} ms`);
    throw new BackendError(`backend ${backendId} is unreachable (${(err as { cause?: { code?: string } }).cause?.code ?? (err as Error).name})`);
  }
  const declared = Number(res.headers.get('content-length') ?? NaN);
  if (Number.isFinite(declared) && declared > req.maxResponseBytes) {
    await res.body?.cancel().catch(() => undefined);
    throw new BackendError(`backend ${backendId} answered with more than ${req.maxResponseBytes} bytes`);
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    if (res.body) {
      for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
        size += chunk.byteLength;
        if (size > req.maxResponseBytes) {
          await res.body.cancel().catch(() => undefined);
          throw new BackendError(`backend ${backendId} answered with more than ${req.maxResponseBytes} bytes`);
        }
        chunks.push(chunk);
      }
    }
  } catch (err) {
    if (err instanceof BackendError) throw err;
    if (signal.aborted) throw new BackendError(`backend ${backendId} did not answer within ${req.timeoutMs} ms`);
    throw new BackendError(`backend ${backendId}: the answer was cut off`);
  }
  return { status: res.status, contentType: res.headers.get('content-type') ?? '', text: Buffer.concat(chunks).toString('utf8') };
}

/** A non-2xx answer as an error: the status and a short, single-line excerpt of the body. */
export function statusError(backendId: string, r: OutboundResponse): BackendError {
  const excerpt = r.text.replace(/\s+/g, ' ').slice(0, 200);
  return new BackendError(`backend ${backendId}: HTTP ${r.status}${excerpt ? `: ${excerpt}` : ''}`, r.status);
}

/** Parses a JSON answer; a BackendError when it is not JSON. */
export function jsonOf(backendId: string, r: OutboundResponse): unknown {
  if (r.status === 204 || r.text.trim() === '') return undefined;
  try {
    return JSON.parse(r.text) as unknown;
  } catch {
    throw new BackendError(`backend ${backendId} answered with invalid JSON`);
  }
}
