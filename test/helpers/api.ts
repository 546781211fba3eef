import type { Express } from 'express';
import type { Env } from '../../src/config/env';
import type { ApiContext } from '../../src/http/api-context';
import { createApp } from '../../src/http/app';
import { buildApiContext, contextSteps, watchRedisForRepair } from '../../src/api';
import { Metrics } from '../../src/metrics';
import { TEST_TOKEN, silentLog, testEnv } from './env';

export interface TestApi {
  app: Express;
  ctx: ApiContext;
  env: Env;
  auth: { authorization: string };
  close(): Promise<void>;
}

/** The real express app over a temp database and the real Redis (own prefix); no listen. */
export function buildTestApi(env: Env = testEnv()): TestApi {
  const ctx = buildApiContext(env, silentLog());
  const app = createApp(ctx, new Metrics('api'));
  watchRedisForRepair(ctx);
  return {
    app,
    ctx,
    env,
    auth: { authorization: `Bearer ${TEST_TOKEN}` },
    async close() {
      // What the api's shutdown closes after its http server, in its order.
      for (const [, run] of contextSteps(ctx)) await run();
    },
  };
}
