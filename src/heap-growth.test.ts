import { execFileSync } from 'node:child_process';
import v8 from 'node:v8';
import { API_MAX_SEMI_SPACE_MB, childMemoryEnv, limitHeapGrowth } from './heap-growth';

describe('limitHeapGrowth', () => {
  afterEach(() => jest.restoreAllMocks());

  it("sets V8's heap growing factor from the percentage, and leaves V8's own at 0", () => {
    // Mocked: the test process's own heap keeps V8's defaults.
    const set = jest.spyOn(v8, 'setFlagsFromString').mockImplementation(() => undefined);
    expect(limitHeapGrowth(30)).toBe(true);
    expect(set).toHaveBeenCalledWith('--heap-growing-percent=30');
    set.mockClear();
    expect(limitHeapGrowth(0)).toBe(false);
    expect(set).not.toHaveBeenCalled();
  });
});

describe('childMemoryEnv', () => {
  it("gives the children glibc's MALLOC_ARENA_MAX=2 unless the operator set it, and leaves the parent's env alone", () => {
    const parent: NodeJS.ProcessEnv = { PATH: '/bin', LOG_LEVEL: 'info' };
    expect(childMemoryEnv(parent, 'worker')).toEqual({ PATH: '/bin', LOG_LEVEL: 'info', MALLOC_ARENA_MAX: '2' });
    expect(parent.MALLOC_ARENA_MAX).toBeUndefined();
    expect(childMemoryEnv({ ...parent, MALLOC_ARENA_MAX: '' }, 'worker').MALLOC_ARENA_MAX).toBe('2');
    expect(childMemoryEnv({ ...parent, MALLOC_ARENA_MAX: '8' }, 'api').MALLOC_ARENA_MAX).toBe('8');
  });

  it("gives the api, not the worker, V8's --max-semi-space-size in NODE_OPTIONS, after the operator's options, unless they set one", () => {
    const parent: NodeJS.ProcessEnv = { PATH: '/bin' };
    expect(childMemoryEnv(parent, 'api')).toEqual({ PATH: '/bin', MALLOC_ARENA_MAX: '2', NODE_OPTIONS: `--max-semi-space-size=${API_MAX_SEMI_SPACE_MB}` });
    expect(childMemoryEnv(parent)).toEqual(childMemoryEnv(parent, 'api'));
    expect(parent.NODE_OPTIONS).toBeUndefined();
    expect(childMemoryEnv(parent, 'worker').NODE_OPTIONS).toBeUndefined();
    expect(childMemoryEnv({ NODE_OPTIONS: '--enable-source-maps' }, 'api').NODE_OPTIONS).toBe(`--enable-source-maps --max-semi-space-size=${API_MAX_SEMI_SPACE_MB}`);
    expect(childMemoryEnv({ NODE_OPTIONS: '--max-semi-space-size=32' }, 'api').NODE_OPTIONS).toBe('--max-semi-space-size=32');
    expect(childMemoryEnv({ NODE_OPTIONS: '--trace-gc  --max-semi-space-size=4' }, 'api').NODE_OPTIONS).toBe('--trace-gc  --max-semi-space-size=4');
  });

  it('is an option V8 takes from NODE_OPTIONS: a child started with it has an 8 MB semi-space (16 MB young generation) at most', () => {
    const out = execFileSync(process.execPath, ['-e', "const v8=require('v8');let k=[];for(let i=0;i<2e6;i++){k.push({i});if(k.length>1e5)k=[];}process.stdout.write(String(v8.getHeapSpaceStatistics().find(s=>s.space_name==='new_space').space_size))"], {
      env: childMemoryEnv({ PATH: process.env.PATH }, 'api'),
      encoding: 'utf8',
    });
    expect(Number(out)).toBeLessThanOrEqual(2 * API_MAX_SEMI_SPACE_MB * 1_048_576);
    expect(Number(out)).toBeGreaterThan(0);
  });
});
