import { throttleAddress } from './auth-throttle';

describe('throttleAddress: what the auth brake counts one client by', () => {
  it('an IPv4 address as is, also when a dual-stack listener reports it IPv4-mapped', () => {
    expect(throttleAddress('203.0.113.7')).toBe('203.0.113.7');
    expect(throttleAddress('::ffff:203.0.113.7')).toBe('203.0.113.7');
    expect(throttleAddress('::FFFF:203.0.113.7')).toBe('203.0.113.7');
    expect(throttleAddress('0:0:0:0:0:ffff:cb00:7107')).toBe('203.0.113.7');
  });

  it('an IPv6 address by its /64, however it is written', () => {
    const a = throttleAddress('2001:db8:1:2:aaaa:bbbb:cccc:dddd');
    expect(a).toBe('2001:db8:1:2::/64');
    expect(throttleAddress('2001:0DB8:0001:0002::1')).toBe(a);
    expect(throttleAddress('2001:db8:1:2:ffff:ffff:ffff:ffff')).toBe(a);
    expect(throttleAddress('2001:db8:1:3::1')).not.toBe(a);
    expect(throttleAddress('::1')).toBe('0:0:0:0::/64');
    expect(throttleAddress('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
  });

  it('a port a proxy appended is dropped', () => {
    expect(throttleAddress('203.0.113.7:5555')).toBe('203.0.113.7');
    expect(throttleAddress('[2001:db8:1:2::9]:443')).toBe('2001:db8:1:2::/64');
    expect(throttleAddress('[::ffff:203.0.113.7]:80')).toBe('203.0.113.7');
  });

  it('what is not an address is counted as written', () => {
    expect(throttleAddress('unknown')).toBe('unknown');
    expect(throttleAddress('not:an:address')).toBe('not:an:address');
  });
});
