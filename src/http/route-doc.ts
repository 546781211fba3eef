import type { RequestHandler } from 'express';
import type { z } from 'zod';

/** One documented response: JSON with a zod schema, or another media type (an SSE or NDJSON stream, HTML). */
export interface ResponseDoc {
  description: string;
  /** Default application/json; several when the route answers either (JSON, or SSE when streaming). */
  contentType?: string | string[];
  schema?: z.ZodType;
  example?: unknown;
}

/** What the OpenAPI document says about a route beyond its request schemas. */
export interface RouteDoc {
  summary?: string;
  description?: string;
  /** Success (and notable error) responses by status; a route without them is documented as `200` JSON. */
  responses?: Record<number, ResponseDoc>;
  requestExample?: unknown;
  /** The request body's media type when it is not JSON (e.g. the login form). */
  requestContentType?: string;
}

export type RequestSchemas = { body?: z.ZodType; query?: z.ZodType; params?: z.ZodType };

/** What a route handler carries for the OpenAPI generator: exactly the schemas it validates with, and its doc. */
export interface RouteMeta {
  schemas: RequestSchemas;
  doc: RouteDoc;
}

const ROUTE_META = Symbol.for('engram.routeMeta');

/** Attaches route metadata to a handler (handle() does it for every route it builds). */
export function attachRouteMeta<H extends RequestHandler>(handler: H, meta: RouteMeta): H {
  (handler as unknown as Record<symbol, RouteMeta>)[ROUTE_META] = meta;
  return handler;
}

/** The metadata of a handler, if it has any. */
export function routeMetaOf(handler: unknown): RouteMeta | null {
  if (typeof handler !== 'function') return null;
  return (handler as unknown as Record<symbol, RouteMeta | undefined>)[ROUTE_META] ?? null;
}

/**
 * Describes a route that does not go through handle() (streams, HTML pages, third-party handlers):
 * wraps nothing, only attaches the doc (and any schemas the handler checks itself).
 */
export function documented<H extends RequestHandler>(doc: RouteDoc, handler: H, schemas: RequestSchemas = {}): H {
  const wrapped = ((req, res, next) => handler(req, res, next)) as H;
  return attachRouteMeta(wrapped, { schemas, doc });
}
