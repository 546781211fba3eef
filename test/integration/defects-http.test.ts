import request from 'supertest';
import { buildTestApi, type TestApi } from '../helpers/api';

/** Status, code and requestId of an /api error answer, for one readable assertion. */
const apiError = (r: request.Response) => ({ status: r.status, code: r.body?.error?.code, requestId: typeof r.body?.requestId });

describe('malformed percent-escapes in path parameters (P4)', () => {
  let t: TestApi;
  beforeAll(() => {
    t = buildTestApi();
  });
  afterAll(() => t.close());

  it.each([
    ['get', '/api/memory/%ZZ'],
    ['get', '/api/memory/%ZZ/history'],
    ['put', '/api/memory/%ZZ'],
    ['delete', '/api/memory/%ZZ'],
    ['delete', '/api/keys/%ZZ'],
    ['get', '/api/jobs/%ZZ/1'],
    ['get', '/api/jobs/extraction/%ZZ'],
    ['delete', '/api/jobs/extraction/%E0%A4%A'],
  ] as const)('%s %s is a 400 in the error shape, not a 500', async (method, path) => {
    const r = await request(t.app)[method](path).set(t.auth).send({ content: 'x' });
    expect(apiError(r)).toEqual({ status: 400, code: 'invalid_path', requestId: 'string' });
    // The message names the problem without echoing the raw value.
    expect(r.body.error.message).not.toContain('%ZZ');
  });
});
