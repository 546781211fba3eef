import v8 from 'node:v8';
import { childMemoryEnv, limitHeapGrowth } from './heap-growth';

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
    expect(childMemoryEnv(parent)).toEqual({ PATH: '/bin', LOG_LEVEL: 'info', MALLOC_ARENA_MAX: '2' });
    expect(parent.MALLOC_ARENA_MAX).toBeUndefined();
    expect(childMemoryEnv({ ...parent, MALLOC_ARENA_MAX: '' }).MALLOC_ARENA_MAX).toBe('2');
    expect(childMemoryEnv({ ...parent, MALLOC_ARENA_MAX: '8' }).MALLOC_ARENA_MAX).toBe('8');
  });
});
