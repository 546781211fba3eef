import dc from 'node:diagnostics_channel';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import express, { type Express, type NextFunction, type Request, type Response } from 'express';

/*
 * One hot route served without walking express's router. Every proxied chat walked the app's whole router (a
 * path match, a prefix trim and a url restore per layer, a params object and closures per router entered): router +
 * express were ~45 of a chat's ~520 µs of profiled api CPU (bench/README.md, proxy-targets, third pass). The handlers that run are the app's own:
 * the plan below is read from the app's router stack (the layers express would run for this method and path, in
 * its order), so the route stays defined once, in createApp and its routers, and a route added there is picked up.
 */

type Handler = (...args: unknown[]) => unknown;

/** A router or a route whose layers the plan walked: its stack's length is checked before every use. */
interface Container {
  stack: unknown[];
}

/** One handler of the plan, with the request state express would give it. */
interface Step {
  fn: Handler;
  /** What express sets while this handler runs: the mount path matched so far, and the url below it (no query). */
  baseUrl: string;
  url: string;
  /** The route the handler belongs to (express sets req.route when it enters one), or undefined for middleware. */
  route: unknown;
  /** The routers and route this handler lives in below the app's router, outermost first. */
  scope: Container[];
  /** The first handler of a layer match: express gives it a fresh req.params. */
  freshParams: boolean;
}

interface Plan {
  steps: Step[];
  /** Every stack the plan read, with its length then: a change means the app's routes changed. */
  read: Array<{ stack: unknown[]; length: number }>;
}

interface LayerLike {
  handle: Handler & { stack?: unknown[]; params?: Record<string, unknown> };
  route?: { stack: LayerLike[]; _handlesMethod(method: string): boolean } | undefined;
  method?: string;
  keys?: unknown[];
  match(path: string): false | { params: Record<string, unknown>; path: string; keys: string[] };
}

const isPrototypeOf = Object.prototype.isPrototypeOf;
const RouterProto = (express.Router as unknown as { prototype: object }).prototype;

/** Whether a layer's handler is an express Router (its layers are walked) rather than a plain middleware. */
function isRouter(fn: unknown): fn is Container & { params: Record<string, unknown> } {
  return typeof fn === 'function' && isPrototypeOf.call(RouterProto, fn) && Array.isArray((fn as { stack?: unknown }).stack);
}

/**
 * Appends to `plan` the handlers express would run for `method` `path` (a literal path, as the client sends it) under
 * `stack`, in its order; false when one of them is something the plan cannot reproduce (path parameters, a throwing matcher).
 */
function collect(stack: LayerLike[], method: string, path: string, baseUrl: string, scope: Container[], plan: Plan): boolean {
  plan.read.push({ stack, length: stack.length });
  for (const layer of stack) {
    let m: ReturnType<LayerLike['match']>;
    try {
      m = layer.match(path);
    } catch {
      return false;
    }
    if (!m) continue;
    // A match in a shape this plan was not written for (another router version's Layer): express serves it.
    if (typeof m !== 'object' || typeof m.path !== 'string' || !Array.isArray(m.keys)) return false;
    // Parameters (and router.param callbacks on them) are not reproduced; none of the hot route's layers has any.
    if (m.keys.length > 0) return false;
    const route = layer.route;
    if (route) {
      // Read before the method check: a handler for this method added to the route later changes its stack's length.
      plan.read.push({ stack: route.stack, length: route.stack.length });
      if (!route._handlesMethod(method)) continue;
      const inRoute = [...scope, route];
      let first = true;
      for (const rl of route.stack) {
        if (rl.method && rl.method !== method.toLowerCase()) continue;
        plan.steps.push({ fn: rl.handle, baseUrl, url: path, route, scope: inRoute, freshParams: first });
        first = false;
      }
      continue;
    }
    // A mounted middleware or router sees the url below its mount path (express's trimPrefix).
    let url = path;
    let base = baseUrl;
    if (m.path.length > 0) {
      const c = path[m.path.length];
      if (path.slice(0, m.path.length) !== m.path || (c && c !== '/')) continue;
      url = path.slice(m.path.length);
      if (url[0] !== '/') url = `/${url}`;
      base = baseUrl + (m.path.endsWith('/') ? m.path.slice(0, -1) : m.path);
    }
    if (isRouter(layer.handle)) {
      if (!collect(layer.handle.stack as LayerLike[], method, url, base, [...scope, layer.handle], plan)) return false;
    } else {
      plan.steps.push({ fn: layer.handle, baseUrl: base, url, route: undefined, scope, freshParams: true });
    }
  }
  return true;
}

/** Whether every stack the plan read still has the length it had (a route added or removed since: read it again). */
function unchanged(plan: Plan): boolean {
  for (const r of plan.read) if (r.stack.length !== r.length) return false;
  return true;
}

/** Whether `inner` is `outer` or lies inside it (scope prefixes). */
function within(inner: Container[], outer: Container[]): boolean {
  if (inner.length > outer.length) return false;
  for (let i = 0; i < inner.length; i++) if (inner[i] !== outer[i]) return false;
  return true;
}

function isThenable(x: unknown): x is PromiseLike<unknown> {
  return x !== null && (typeof x === 'object' || typeof x === 'function') && typeof (x as { then?: unknown }).then === 'function';
}

// express's router reports each handler to this tracing channel when anyone listens; the plan does not, so it steps aside.
const TRACE_CHANNELS = ['start', 'end', 'asyncStart', 'asyncEnd', 'error'].map((e) => dc.channel(`tracing:express.router.request:${e}`));
const traced = (): boolean => TRACE_CHANNELS.some((c) => c.hasSubscribers);

/**
 * Serves `method` `path` (exact, with any query string) of `app` from a plan of the app's own handlers instead of
 * express's router walk; every other request, and one the app was handed by a parent app, goes to express as before.
 * The request gets what express's app.handle gives it (its request/response prototypes, req.res/res.req, res.locals,
 * req.originalUrl, baseUrl, params, route, next); each handler runs as express's Layer runs it (a throw or a rejected
 * promise is next(err)); an error skips to the next error handler express would reach; past the last handler,
 * express's own final handler answers. Returns the app.
 */
export function serveDirect(app: Express, method: string, path: string): Express {
  type Handle = (req: IncomingMessage, res: ServerResponse, next?: NextFunction) => void;
  const original = (app as unknown as { handle: Handle }).handle;
  const expressHandle: Handle = (req, res, next) => original.call(app, req, res, next);
  /**
   * Express's own end of the line (its finalhandler, with the app's env and its error logging): the app's handle over
   * a router that hands `err` straight to it. No X-Powered-By here: express sets that one before the first layer.
   */
  const toFinalHandler = (req: Request, res: Response, err: unknown): void => {
    const last = Object.create(app, {
      enabled: { value: () => false },
      router: { value: { handle: (_req: unknown, _res: unknown, done: (e: unknown) => void) => done(err) } },
    }) as unknown;
    original.call(last, req, res);
  };
  const withQuery = `${path}?`;
  let plan: Plan | null = null;
  let unplannable = false;

  const currentPlan = (): Plan | null => {
    if (plan && unchanged(plan)) return plan;
    // An app the plan cannot reproduce stays with express for good.
    if (unplannable) return null;
    const router = (app as unknown as { router: { stack: LayerLike[] } }).router;
    const fresh: Plan = { steps: [], read: [] };
    let ok: boolean;
    try {
      ok = collect(router.stack, method, path, '', [], fresh);
    } catch {
      // A router whose internals are not what the plan reads (a stack of another shape): express serves it, and
      // the error never reaches the server's request listener.
      ok = false;
    }
    plan = ok ? fresh : null;
    unplannable = plan === null;
    return plan;
  };

  const run = (p: Plan, req: Request, res: Response): void => {
    const steps = p.steps;
    const search = req.url.length > path.length ? req.url.slice(path.length) : '';
    let i = 0;
    // The routers and route entered, as express's nested next() functions hold them.
    let scope: Container[] = [];
    const finish = (err: unknown): void => {
      req.url = req.originalUrl;
      (req as { baseUrl?: string }).baseUrl = undefined as unknown as string;
      // As express: its router calls the final handler on the next turn.
      setImmediate(toFinalHandler, req, res, err);
    };
    const next = (err?: unknown): void => {
      if (err === 'route') {
        // Leaves the route (in a middleware, plain next()).
        const inner = scope[scope.length - 1];
        if (inner && !isRouter(inner)) {
          while (i < steps.length && steps[i].scope.includes(inner)) i++;
          scope = scope.slice(0, -1);
        }
        err = undefined;
      } else if (err === 'router') {
        // Leaves the innermost router (from a route: the router holding it), on the next turn as express does.
        let depth = scope.length;
        while (depth > 0 && !isRouter(scope[depth - 1])) depth--;
        if (depth === 0) return finish(null);
        const router = scope[depth - 1];
        while (i < steps.length && steps[i].scope.includes(router)) i++;
        scope = scope.slice(0, depth - 1);
        setImmediate(next);
        return;
      }
      while (i < steps.length) {
        const step = steps[i++];
        if (err) {
          // With an error pending, express enters no router or route: only error handlers of the ones already entered run.
          if (!within(step.scope, scope)) {
            let common = 0;
            while (common < scope.length && common < step.scope.length && scope[common] === step.scope[common]) common++;
            scope = scope.slice(0, common);
            continue;
          }
          scope = step.scope;
          if (step.fn.length !== 4) continue;
        } else {
          scope = step.scope;
          if (step.fn.length > 3) continue;
        }
        req.url = search ? step.url + search : step.url;
        req.baseUrl = step.baseUrl;
        if (step.freshParams) req.params = {};
        if (step.route) (req as { route?: unknown }).route = step.route;
        try {
          const out = err ? step.fn(err, req, res, next) : step.fn(req, res, next);
          if (isThenable(out)) out.then(undefined, (e: unknown) => next(e || new Error('Rejected promise')));
        } catch (e) {
          next(e);
        }
        return;
      }
      finish(err);
    };
    req.next = next;
    next();
  };

  (app as unknown as { handle: typeof expressHandle }).handle = (req, res, callback) => {
    const url = req.url ?? '';
    if (callback !== undefined || req.method !== method || (url !== path && !url.startsWith(withQuery)) || traced()) return expressHandle(req, res, callback);
    const p = currentPlan();
    if (!p) return expressHandle(req, res, callback);
    // What express's app.handle and router do before the first layer.
    if (app.enabled('x-powered-by')) res.setHeader('X-Powered-By', 'Express');
    const r = req as unknown as Request;
    const s = res as unknown as Response;
    r.res = s;
    s.req = r;
    // Already under them when the server made them (expressServer): changing an object's prototype is not cheap.
    if (!isPrototypeOf.call(app.request, req)) Object.setPrototypeOf(req, app.request);
    if (!isPrototypeOf.call(app.response, res)) Object.setPrototypeOf(res, app.response);
    if (!s.locals) s.locals = Object.create(null) as Record<string, unknown>;
    r.baseUrl = '';
    r.originalUrl = r.originalUrl || url;
    run(p, r, s);
  };
  return app;
}

/**
 * An http server for `app` whose requests and responses are born under the app's request/response prototypes:
 * express (and serveDirect) re-parent every req and res with Object.setPrototypeOf otherwise, which cost more than
 * the call itself (node's own code on those objects ran slower after it). They are instances of subclasses of node's
 * IncomingMessage/ServerResponse whose prototypes sit on the app's: one shape for every request, sized by node's
 * constructors. (Reflect.construct with the app's prototype as new.target made a new V8 map per object, ~60 µs each;
 * a function that called node's constructor on its own `this` made objects too small for their fields.)
 * serveDirect leaves them as they are; express's app.handle still re-parents those it routes.
 */
export function expressServer(app: Express): http.Server {
  class AppRequest extends http.IncomingMessage {}
  Object.setPrototypeOf(AppRequest.prototype, app.request);
  class AppResponse<R extends IncomingMessage = IncomingMessage> extends http.ServerResponse<R> {}
  Object.setPrototypeOf(AppResponse.prototype, app.response);
  return http.createServer({ IncomingMessage: AppRequest, ServerResponse: AppResponse as unknown as typeof ServerResponse }, app);
}
