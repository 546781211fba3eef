import v8 from 'node:v8';
import { limitHeapGrowth } from './heap-growth';

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
