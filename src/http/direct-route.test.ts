import dc from 'node:diagnostics_channel';
import express, { Router, type ErrorRequestHandler, type Express, type RequestHandler } from 'express';
import request from 'supertest';
import type { AddressInfo } from 'node:net';
import { expressServer, serveDirect } from './direct-route';

const PATH = '/v1/chat/completions';

/** What the chat handler does this time (set per test). */
type Behaviour = 'answer' | 'throw' | 'next-error' | 'reject' | 'next' | 'next-route' | 'next-router' | 'mw-error' | 'handler-throws-after-error';

/**
 * An app shaped like createApp's: a top middleware, prefix middleware on several mounts, a middleware chain and a
 * router at /v1, catch-all routers after it, a 404 and an error handler. Everything a handler sees is recorded.
 */
function build(direct: boolean, behaviour: { now: Behaviour }, seen: Array<Record<string, unknown>>): Express {
  const app = express();
  app.disable('x-powered-by');
  // Production: express's final handler answers without the stack (which names different frames here and there).
  app.set('env', behaviour.now === 'handler-throws-after-error' ? 'production' : 'test');
  const record =
    (name: string): RequestHandler =>
    (req, res, next) => {
      seen.push({ name, url: req.url, baseUrl: req.baseUrl, originalUrl: req.originalUrl, params: { ...req.params }, app: req.app === app, locals: typeof res.locals });
      next();
    };
  app.use((req, res, next) => {
    res.setHeader('x-top', '1');
    res.locals.requestId = 'r1';
    next();
  });
  app.use(['/api', '/v1'], record('prefix'));
  app.use('/admin', record('admin-only'));
  app.use('/v1', (req, res, next) => {
    if (behaviour.now === 'mw-error') return next(Object.assign(new Error('mw'), { status: 418, expose: true }));
    record('v1-mw')(req, res, next);
  });
  const v1 = Router();
  v1.post('/chat/completions', record('route-first'), async (req, res, next) => {
    seen.push({ name: 'chat', route: (req.route as { path: string }).path, query: req.query, body: req.body as unknown, proto: Object.getPrototypeOf(req) === app.request });
    switch (behaviour.now) {
      case 'throw':
        throw new Error('boom');
      case 'next-error':
        return next(Object.assign(new Error('teapot'), { status: 418, expose: true }));
      case 'reject':
        await Promise.resolve();
        throw Object.assign(new Error('late'), { status: 409, expose: true });
      case 'next':
      case 'handler-throws-after-error':
        return next();
      case 'next-route':
        return next('route');
      case 'next-router':
        return next('router');
      default:
        res.status(201).json({ ok: true, url: req.url, baseUrl: req.baseUrl });
    }
  });
  v1.post('/chat/completions', (req, res, next) => (behaviour.now === 'next' ? res.json({ second: true, url: req.url }) : next()));
  v1.use((req, _res, next) => {
    seen.push({ name: 'v1-tail', url: req.url });
    next();
  });
  app.use('/v1', v1);
  const system = Router();
  system.get('/healthz', (_req, res) => res.json({ ok: true }));
  system.use((req, _res, next) => {
    seen.push({ name: 'system-use', url: req.url, baseUrl: req.baseUrl });
    next();
  });
  app.use(system);
  app.use((req, res, next) => {
    if (behaviour.now === 'handler-throws-after-error') return next(new Error('to the error handler'));
    res.status(404).json({ error: `No route for ${req.method} ${req.path}` });
  });
  const errors: ErrorRequestHandler = (err: Error & { status?: number }, req, res, _next) => {
    if (behaviour.now === 'handler-throws-after-error') throw new Error('the error handler broke');
    res.status(err.status ?? 500).json({ error: err.message, url: req.url, baseUrl: req.baseUrl, requestId: res.locals.requestId as string });
  };
  app.use(errors);
  return direct ? serveDirect(app, 'POST', PATH) : app;
}

/** The same request to an app served directly and to the same app through express alone. */
async function both(behaviour: Behaviour, send: (app: Express) => request.Test) {
  const b = { now: behaviour };
  const directSeen: Array<Record<string, unknown>> = [];
  const expressSeen: Array<Record<string, unknown>> = [];
  const directApp = build(true, b, directSeen);
  const expressApp = build(false, b, expressSeen);
  const walked = jest.fn();
  const router = (directApp as unknown as { router: { handle: (...a: unknown[]) => unknown } }).router;
  const original = router.handle.bind(router);
  router.handle = (...a: unknown[]) => {
    walked();
    return original(...a);
  };
  const d = await send(directApp);
  const e = await send(expressApp);
  const strip = (h: Record<string, string>) => {
    const { date: _d, etag: _e, ...rest } = h;
    return rest;
  };
  expect({ status: d.status, headers: strip(d.headers), body: d.body as unknown, text: d.text }).toEqual({ status: e.status, headers: strip(e.headers), body: e.body as unknown, text: e.text });
  expect(directSeen).toEqual(expressSeen);
  return { res: d, seen: directSeen, walked: walked.mock.calls.length };
}

const chat = (app: Express) => request(app).post(`${PATH}?trace=1`).send({ messages: [] });

describe('serveDirect', () => {
  it('runs the route without walking express router, and its handlers see what express gives them', async () => {
    const { res, seen, walked } = await both('answer', (app) => request(app).post(`${PATH}?trace=1`).set('content-type', 'application/json').send('{"a":1}'));
    expect(walked).toBe(0);
    expect(res.status).toBe(201);
    expect(res.body).toEqual({ ok: true, url: '/chat/completions?trace=1', baseUrl: '/v1' });
    expect(res.headers['x-top']).toBe('1');
    expect(seen.map((s) => s.name)).toEqual(['prefix', 'v1-mw', 'route-first', 'chat']);
    expect(seen[0]).toMatchObject({ url: '/chat/completions?trace=1', baseUrl: '/v1', originalUrl: `${PATH}?trace=1`, params: {}, app: true, locals: 'object' });
    expect(seen[3]).toMatchObject({ route: '/chat/completions', query: { trace: '1' }, proto: true });
  });

  it.each<[Behaviour, number]>([
    ['throw', 500],
    ['next-error', 418],
    ['reject', 409],
    ['mw-error', 418],
  ])('an error (%s) reaches the app error handler as through express', async (behaviour, status) => {
    const { res, walked } = await both(behaviour, chat);
    expect(walked).toBe(0);
    expect(res.status).toBe(status);
    // At the top, as express leaves the request for the app's error handler.
    expect(res.body).toMatchObject({ url: `${PATH}?trace=1`, baseUrl: '', requestId: 'r1' });
  });

  it("next() falls through to what express runs next: the route's next handler, the routers after it, the 404", async () => {
    const r = await both('next', chat);
    expect(r.res.body).toEqual({ second: true, url: '/chat/completions?trace=1' });
    const route = await both('next-route', chat);
    expect(route.seen.map((s) => s.name)).toEqual(['prefix', 'v1-mw', 'route-first', 'chat', 'v1-tail', 'system-use']);
    expect(route.res.status).toBe(404);
    expect(route.seen.at(-1)).toEqual({ name: 'system-use', url: `${PATH}?trace=1`, baseUrl: '' });
    const router = await both('next-router', chat);
    expect(router.seen.map((s) => s.name)).toEqual(['prefix', 'v1-mw', 'route-first', 'chat', 'system-use']);
    expect(router.res.status).toBe(404);
  });

  it("an error handler that throws ends in express's final handler, as through express", async () => {
    const logged = jest.spyOn(console, 'error').mockImplementation(() => undefined);
    let logs = 0;
    const { res, seen } = await both('handler-throws-after-error', chat).finally(async () => {
      // Both log it (express's own logerror, on a later turn than the answer).
      for (let i = 0; i < 100 && logged.mock.calls.length < 2; i++) await new Promise((r) => setTimeout(r, 10));
      logs = logged.mock.calls.length;
      logged.mockRestore();
    });
    expect(logs).toBe(2);
    expect(seen.map((s) => s.name)).toEqual(['prefix', 'v1-mw', 'route-first', 'chat', 'v1-tail', 'system-use']);
    expect(res.status).toBe(500);
  });

  it('every other request goes through express unchanged (404s included)', async () => {
    for (const send of [
      (app: Express) => request(app).get(PATH),
      (app: Express) => request(app).post(`${PATH}/`).send({}),
      (app: Express) => request(app).post(PATH.toUpperCase()).send({}),
      (app: Express) => request(app).post('/v1/chat/completionsx').send({}),
      (app: Express) => request(app).post('/nope').send({}),
      (app: Express) => request(app).get('/healthz'),
    ]) {
      const { walked } = await both('answer', send);
      expect(walked).toBe(1);
    }
  });

  it('follows routes added after the first request, and steps aside while express tracing is listened to', async () => {
    const b = { now: 'answer' as Behaviour };
    const app = build(true, b, []);
    expect((await chat(app)).status).toBe(201);
    // Inserted in front of everything: the plan is read again.
    const router = (app as unknown as { router: { stack: unknown[] } }).router;
    app.post(PATH, (_req, res) => res.status(202).json({ added: true }));
    router.stack.unshift(router.stack.pop());
    expect((await chat(app)).body).toEqual({ added: true });

    const walked = jest.fn();
    const handle = (router as unknown as { handle: (...a: unknown[]) => unknown }).handle.bind(router);
    (router as unknown as { handle: (...a: unknown[]) => unknown }).handle = (...a: unknown[]) => {
      walked();
      return handle(...a);
    };
    const onStart = () => undefined;
    dc.subscribe('tracing:express.router.request:start', onStart);
    try {
      expect((await chat(app)).status).toBe(202);
      expect(walked).toHaveBeenCalledTimes(1);
    } finally {
      dc.unsubscribe('tracing:express.router.request:start', onStart);
    }
  });

  it('follows a POST handler added later to a route that had no POST at the first request (as express runs it)', async () => {
    for (const direct of [false, true]) {
      const app = express();
      const v1 = Router();
      const route = v1.route('/chat/completions');
      route.get((_req, res) => res.json({ get: true }));
      app.use('/v1', v1);
      app.use((_req, res) => res.status(404).json({ missing: true }));
      if (direct) serveDirect(app, 'POST', PATH);
      // The first chat: the route has no POST handler, the 404 answers.
      expect((await request(app).post(PATH).send({})).status).toBe(404);
      route.post((_req, res) => res.status(201).json({ added: true }));
      const res = await request(app).post(PATH).send({});
      expect({ direct, status: res.status, body: res.body as unknown }).toEqual({ direct, status: 201, body: { added: true } });
    }
  });

  it('leaves the chat to express when a layer matches in a shape it was not written for (another router version)', async () => {
    for (const shape of ['boolean', 'throwing stack'] as const) {
      const b = { now: 'answer' as Behaviour };
      const app = build(true, b, []);
      const router = (app as unknown as { router: { stack: Array<Record<string, unknown>> } }).router;
      // The plan reads the stack at the first chat, before express ever sees it: the odd shape is shown to that
      // first read only, so express itself (which needs the real shape) still answers.
      const layer = router.stack.find((l) => (l.match as (p: string) => unknown)(PATH))!;
      let first = true;
      if (shape === 'boolean') {
        // router < 2.3's Layer.match answered true/false and kept the params on the layer.
        const match = layer.match as (p: string) => unknown;
        layer.match = (p: string) => (first ? ((first = false), Boolean(match.call(layer, p))) : match.call(layer, p));
      } else {
        const route = layer.route;
        Object.defineProperty(layer, 'route', {
          get: () => {
            if (!first) return route;
            first = false;
            throw new Error('not this shape');
          },
        });
      }
      const walked = jest.fn();
      const handle = (router as unknown as { handle: (...a: unknown[]) => unknown }).handle.bind(router);
      (router as unknown as { handle: (...a: unknown[]) => unknown }).handle = (...a: unknown[]) => {
        walked();
        return handle(...a);
      };
      await chat(app);
      expect({ shape, walked: walked.mock.calls.length }).toEqual({ shape, walked: 1 });
    }
  });

  it("expressServer makes requests and responses under the app's prototypes, so the direct route never changes them", async () => {
    const app = build(true, { now: 'answer' }, []);
    const server = expressServer(app);
    const born: boolean[] = [];
    server.prependListener('request', (req, res) => born.push(app.request.isPrototypeOf(req) && app.response.isPrototypeOf(res)));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const changed = jest.spyOn(Object, 'setPrototypeOf');
    try {
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const chatRes = await fetch(`${base}${PATH}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
      expect(chatRes.status).toBe(201);
      expect(((await chatRes.json()) as { baseUrl: string }).baseUrl).toBe('/v1');
      expect(changed).not.toHaveBeenCalled();
      // Every other request is express's as before (it re-parents them).
      const other = await fetch(`${base}/healthz`);
      expect(await other.json()).toEqual({ ok: true });
      expect(born).toEqual([true, true]);
    } finally {
      changed.mockRestore();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
