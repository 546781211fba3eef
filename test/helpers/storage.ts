import type { Env } from '../../src/config/env';
import { openStorage } from '../../src/services';
import { silentLog, testEnv } from './env';

/** A temp SQLite database built by the real migrations, with the storage services over it. */
export function tempStorage(env: Env = testEnv()) {
  const s = openStorage(env, silentLog());
  return { env, ...s, close: () => s.db.close() };
}
