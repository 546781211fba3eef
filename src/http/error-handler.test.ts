import express from 'express';
import request from 'supertest';
import { createLogger } from '../logger';
import { errorHandler, isStorageFull } from './error-handler';

/** Regression (issue 15 disk-full fault): a full disk was a 500 internal_error; it is a 507 in the one shape. */
describe('disk full errors', () => {
  const sqliteFull = Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
  const enospc = Object.assign(new Error("ENOSPC: no space left on device, write '/data/x'"), { code: 'ENOSPC' });

  it('recognises SQLITE_FULL, ENOSPC and EDQUOT, also as a cause, and nothing else', () => {
    expect(isStorageFull(sqliteFull)).toBe(true);
    expect(isStorageFull(enospc)).toBe(true);
    expect(isStorageFull(Object.assign(new Error('quota'), { code: 'EDQUOT' }))).toBe(true);
    expect(isStorageFull(new Error('wrapped', { cause: enospc }))).toBe(true);
    expect(isStorageFull(Object.assign(new Error('busy'), { code: 'SQLITE_BUSY' }))).toBe(false);
    expect(isStorageFull(null)).toBe(false);
  });

  it.each([sqliteFull, enospc])('answers 507 insufficient_storage without the driver message ($code)', async (err) => {
    const app = express();
    app.post('/w', () => {
      throw err;
    });
    app.use(errorHandler(createLogger('silent', 'test')));
    const r = await request(app).post('/w');
    expect(r.status).toBe(507);
    expect(r.body).toEqual({ error: { code: 'insufficient_storage', message: expect.any(String), details: null }, requestId: null });
    expect(JSON.stringify(r.body)).not.toMatch(/ENOSPC|SQLITE_FULL|\/data/);
  });
});
