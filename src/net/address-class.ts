import net from 'node:net';
import ipaddr from 'ipaddr.js';

/** What an outbound target is: a public address, a private/loopback/link-local one, or cloud metadata (always refused). */
export type AddressClass = 'public' | 'private' | 'metadata';

function ipv4Bytes(ip: string): number[] {
  return ip.split('.').map(Number);
}

function classifyIpv4(b: number[]): AddressClass {
  const [a, c] = [b[0], b[1]];
  // Every 169.254/16 address is link-local and the cloud metadata range (AWS, GCP, Azure, OCI …); Alibaba uses 100.100.100.200.
  if (a === 169 && c === 254) return 'metadata';
  if (a === 100 && c === 100 && b[2] === 100 && b[3] === 200) return 'metadata';
  if (a === 0 || a === 10 || a === 127) return 'private';
  if (a === 100 && c >= 64 && c <= 127) return 'private'; // CGNAT 100.64/10
  if (a === 172 && c >= 16 && c <= 31) return 'private';
  if (a === 192 && c === 168) return 'private';
  if (a === 192 && c === 0 && (b[2] === 0 || b[2] === 2)) return 'private'; // IETF protocol assignments, TEST-NET-1
  if (a === 198 && (c === 18 || c === 19)) return 'private'; // benchmarking
  if (a === 198 && c === 51 && b[2] === 100) return 'private';
  if (a === 203 && c === 0 && b[2] === 113) return 'private';
  if (a >= 224) return 'private'; // multicast, reserved, broadcast
  return 'public';
}

/** 16 bytes of an IPv6 literal (brackets and zone id ignored), or null when it is not one. Also the auth brake's (auth-throttle.ts). */
export function ipv6Bytes(ip: string): number[] | null {
  let s = ip.replace(/^\[|\]$/g, '');
  const zone = s.indexOf('%');
  if (zone >= 0) s = s.slice(0, zone);
  return net.isIPv6(s) ? ipaddr.IPv6.parse(s).toByteArray() : null;
}

function classifyIpv6(b: number[]): AddressClass {
  const zeros = (from: number, to: number) => b.slice(from, to).every((x) => x === 0);
  const word = (i: number) => (b[i] << 8) | b[i + 1];
  // fd00:ec2::254 is the AWS IMDS IPv6 endpoint.
  if (word(0) === 0xfd00 && word(2) === 0x0ec2 && zeros(4, 14) && word(14) === 0x0254) return 'metadata';
  // IPv4-mapped (::ffff:a.b.c.d) reaches the IPv4 host: judge the embedded address.
  if (zeros(0, 10) && b[10] === 0xff && b[11] === 0xff) return classifyIpv4(b.slice(12));
  // ::/96 covers ::, ::1 and deprecated IPv4-compatible forms: never a public target.
  if (zeros(0, 12)) return classifyIpv4(b.slice(12)) === 'metadata' ? 'metadata' : 'private';
  // NAT64 well-known prefix 64:ff9b::/96 translates to the embedded IPv4 address.
  if (word(0) === 0x64 && word(2) === 0xff9b && zeros(4, 12)) return classifyIpv4(b.slice(12));
  if (word(0) === 0x64 && word(2) === 0xff9b && word(4) === 1) return 'private'; // local-use NAT64
  if (word(0) === 0x2002) return classifyIpv4(b.slice(2, 6)); // 6to4 embeds an IPv4 address
  if ((b[0] & 0xfe) === 0xfc) return 'private'; // ULA fc00::/7
  if (b[0] === 0xfe && (b[1] & 0xc0) === 0x80) return 'private'; // link-local fe80::/10
  if (b[0] === 0xfe && (b[1] & 0xc0) === 0xc0) return 'private'; // site-local fec0::/10 (deprecated)
  if (b[0] === 0xff) return 'private'; // multicast
  if (word(0) === 0x2001 && word(2) === 0x0db8) return 'private'; // documentation
  if (word(0) === 0x2001 && word(2) === 0) return 'private'; // Teredo relays can reach anything
  if (word(0) === 0x0100 && zeros(2, 8)) return 'private'; // discard-only
  return 'public';
}

/** Classifies an IP literal (IPv4, IPv6 with or without brackets); null when the input is not an IP. */
export function classifyIp(ip: string): AddressClass | null {
  if (net.isIPv4(ip)) return classifyIpv4(ipv4Bytes(ip));
  const b = ipv6Bytes(ip);
  return b ? classifyIpv6(b) : null;
}

const METADATA_NAMES = new Set(['metadata.google.internal', 'metadata.goog', 'metadata', 'instance-data', 'instance-data.ec2.internal']);
const PRIVATE_SUFFIXES = ['.localhost', '.local', '.internal', '.home.arpa'];

/** Classifies a URL hostname as the WHATWG parser left it (IPs already normalised, IPv6 bracketed). */
export function classifyHost(hostname: string): AddressClass {
  const ip = classifyIp(hostname);
  if (ip) return ip;
  // A trailing dot names the same host ("localhost." is localhost).
  const h = hostname.toLowerCase().replace(/\.$/, '');
  if (METADATA_NAMES.has(h)) return 'metadata';
  if (h === '' || h === 'localhost' || PRIVATE_SUFFIXES.some((s) => h.endsWith(s))) return 'private';
  return 'public';
}

