import dns from 'node:dns';
import net from 'node:net';
import { Agent, buildConnector, fetch as undiciFetch, Headers, type Dispatcher, type HeadersInit, type RequestInit, type Response } from 'undici';
import type { Env } from '../config/env';

/** Stable codes for every refusal of the outbound URL policy. */
export type OutboundUrlErrorCode =
  | 'invalid_url'
  | 'scheme_not_allowed'
  | 'credentials_not_allowed'
  | 'query_not_allowed'
  | 'metadata_blocked'
  | 'private_blocked'
  | 'too_many_redirects';

const MESSAGES: Record<OutboundUrlErrorCode, string> = {
  invalid_url: 'Outbound URL is not a valid absolute URL',
  scheme_not_allowed: 'Outbound URL must use http or https',
  credentials_not_allowed: 'Outbound URL must not carry a username or password',
  query_not_allowed: 'Outbound URL must not carry a query string or fragment',
  metadata_blocked: 'Outbound URL points at a cloud metadata address',
  private_blocked: 'Outbound URL points at a private, loopback or link-local address',
  too_many_redirects: 'Outbound request was redirected too many times',
};

/** A refusal by the outbound URL policy; the message never names the URL or host (it may be user input). */
export class OutboundUrlError extends Error {
  constructor(readonly code: OutboundUrlErrorCode) {
    super(MESSAGES[code]);
    this.name = 'OutboundUrlError';
  }
}

/** One resolved address, as `dns.lookup(…, {all:true})` returns it. */
export interface ResolvedAddress {
  address: string;
  family: number;
}

/** Resolves a hostname to every address it may connect to. */
export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

export interface OutboundPolicyOptions {
  /** Private/loopback/link-local targets are allowed (self-hosted endpoints); metadata stays blocked. */
  allowPrivate: boolean;
  /** Injectable for tests; default `dns.lookup` with `all: true`. */
  resolver?: Resolver;
}

const defaultResolver: Resolver = (hostname) => dns.promises.lookup(hostname, { all: true, verbatim: true });

/** The rules one outbound caller applies; owns the guarded undici Agent that re-checks at connect time. */
export class OutboundPolicy {
  readonly allowPrivate: boolean;
  readonly resolver: Resolver;
  private agent: Agent | null = null;

  constructor(opts: OutboundPolicyOptions) {
    this.allowPrivate = opts.allowPrivate;
    this.resolver = opts.resolver ?? defaultResolver;
  }

  /** The guarded dispatcher, built on first use. */
  get dispatcher(): Agent {
    this.agent ??= createGuardedAgent(this);
    return this.agent;
  }

  /** Closes pooled sockets (tests and shutdown). */
  async close(): Promise<void> {
    const a = this.agent;
    this.agent = null;
    if (a) await a.close();
  }
}

/** The policy for user-settable URLs: private targets only when the operator allows them. */
export function outboundPolicyFromEnv(env: Pick<Env, 'OMNIROUTE_ALLOW_PRIVATE_PROVIDER_URLS'>, resolver?: Resolver): OutboundPolicy {
  return new OutboundPolicy({ allowPrivate: env.OMNIROUTE_ALLOW_PRIVATE_PROVIDER_URLS, resolver });
}

/** The policy for URLs the operator wrote in env (provider bases, hub): private allowed, metadata still blocked. */
export function operatorPolicy(resolver?: Resolver): OutboundPolicy {
  return new OutboundPolicy({ allowPrivate: true, resolver });
}

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

/** 16 bytes of an IPv6 literal (zone id ignored), or null when it is not one. */
function ipv6Bytes(ip: string): number[] | null {
  let s = ip.replace(/^\[|\]$/g, '');
  const zone = s.indexOf('%');
  if (zone >= 0) s = s.slice(0, zone);
  if (!net.isIPv6(s)) return null;
  const lastColon = s.lastIndexOf(':');
  const tail = s.slice(lastColon + 1);
  if (tail.includes('.')) {
    const v4 = ipv4Bytes(tail);
    s = `${s.slice(0, lastColon + 1)}${((v4[0] << 8) | v4[1]).toString(16)}:${((v4[2] << 8) | v4[3]).toString(16)}`;
  }
  const [head, rest] = s.split('::');
  const h = head ? head.split(':') : [];
  const r = rest !== undefined && rest !== '' ? rest.split(':') : [];
  const groups = rest === undefined ? h : [...h, ...Array(8 - h.length - r.length).fill('0'), ...r];
  const out: number[] = [];
  for (const g of groups) {
    const n = parseInt(g, 16);
    out.push(n >> 8, n & 0xff);
  }
  return out;
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

function refuse(cls: AddressClass, policy: Pick<OutboundPolicy, 'allowPrivate'>): OutboundUrlError | null {
  if (cls === 'metadata') return new OutboundUrlError('metadata_blocked');
  if (cls === 'private' && !policy.allowPrivate) return new OutboundUrlError('private_blocked');
  return null;
}

/** Parses and statically checks an outbound URL (scheme, credentials, host literal/name); throws OutboundUrlError. */
export function checkOutboundUrl(input: string | URL, policy: Pick<OutboundPolicy, 'allowPrivate'>): URL {
  let url: URL;
  try {
    url = new URL(String(input));
  } catch {
    throw new OutboundUrlError('invalid_url');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new OutboundUrlError('scheme_not_allowed');
  if (url.username || url.password) throw new OutboundUrlError('credentials_not_allowed');
  const err = refuse(classifyHost(url.hostname), policy);
  if (err) throw err;
  return url;
}

/** Checks a user-set custom embeddings base URL and returns its `…/embeddings` endpoint (no query, no fragment). */
export function customEmbeddingsUrl(raw: string, policy: Pick<OutboundPolicy, 'allowPrivate'>): string {
  const url = checkOutboundUrl(raw.trim(), policy);
  // `new URL` drops a bare "?" or "#", so look at the raw text too.
  if (url.search || url.hash || /[?#]/.test(raw)) throw new OutboundUrlError('query_not_allowed');
  const path = url.pathname.replace(/\/+$/, '');
  url.pathname = path.endsWith('/embeddings') ? path : `${path}/embeddings`;
  return url.toString();
}

/** Checks every address a hostname resolved to; any blocked address refuses the whole connection. */
export function checkResolved(addresses: ResolvedAddress[], policy: Pick<OutboundPolicy, 'allowPrivate'>): void {
  if (addresses.length === 0) throw new OutboundUrlError('invalid_url');
  for (const a of addresses) {
    const err = refuse(classifyIp(a.address) ?? 'private', policy);
    if (err) throw err;
  }
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void;

/** An undici Agent whose every connection resolves through the policy's resolver and refuses blocked addresses. */
export function createGuardedAgent(policy: OutboundPolicy, opts: { connectTimeoutMs?: number } = {}): Agent {
  // net.connect calls lookup even for names it could cache, so DNS rebinding between check and connect is closed.
  const lookup = (hostname: string, options: dns.LookupOptions, callback: LookupCallback) => {
    policy
      .resolver(hostname)
      .then((addresses) => {
        checkResolved(addresses, policy);
        if (options.all) callback(null, addresses.map((a) => ({ address: a.address, family: a.family })));
        else {
          const wanted = options.family === 4 || options.family === 6 ? addresses.find((a) => a.family === options.family) : addresses[0];
          const pick = wanted ?? addresses[0];
          callback(null, pick.address, pick.family);
        }
      })
      .catch((err: NodeJS.ErrnoException) => callback(err, '', 0));
  };
  const base = buildConnector({ lookup, timeout: opts.connectTimeoutMs ?? 10_000 } as buildConnector.BuildOptions);
  const connect: buildConnector.connector = (options, callback) => {
    // net.connect skips lookup for IP literals, so those are checked here.
    const host = options.hostname.replace(/^\[|\]$/g, '');
    const cls = classifyIp(host);
    const err = cls ? refuse(cls, policy) : null;
    if (err) {
      callback(err, null);
      return;
    }
    base(options, callback);
  };
  return new Agent({ connect });
}

function findPolicyError(err: unknown): OutboundUrlError | null {
  let e: unknown = err;
  for (let i = 0; i < 5 && e; i++) {
    if (e instanceof OutboundUrlError) return e;
    e = (e as { cause?: unknown }).cause;
  }
  return null;
}

const MAX_REDIRECTS = 5;
const REDIRECTS = new Set([301, 302, 303, 307, 308]);

/** fetch through the guarded Agent, following up to 5 redirects itself and re-checking every hop. */
export async function guardedFetch(input: string | URL, init: RequestInit, policy: OutboundPolicy): Promise<Response> {
  let url = checkOutboundUrl(input, policy);
  let method = (init.method ?? 'GET').toUpperCase();
  let body = init.body;
  const headers = new Headers(init.headers as HeadersInit | undefined);
  for (let hop = 0; ; hop++) {
    let res: Response;
    try {
      res = await undiciFetch(url, {
        ...init,
        method,
        body,
        headers,
        redirect: 'manual',
        dispatcher: policy.dispatcher as Dispatcher,
      });
    } catch (err) {
      throw findPolicyError(err) ?? err;
    }
    const location = res.headers.get('location');
    if (!REDIRECTS.has(res.status) || !location) return res;
    await res.body?.cancel().catch(() => undefined);
    if (hop >= MAX_REDIRECTS) throw new OutboundUrlError('too_many_redirects');
    let next: URL;
    try {
      next = new URL(location, url);
    } catch {
      throw new OutboundUrlError('invalid_url');
    }
    next = checkOutboundUrl(next, policy);
    // Fetch-spec method rewrite: 303 always, 301/302 for POST, become a body-less GET.
    if (res.status === 303 || ((res.status === 301 || res.status === 302) && method === 'POST')) {
      if (method !== 'HEAD') method = 'GET';
      body = undefined;
      headers.delete('content-type');
      headers.delete('content-length');
    }
    // Credentials never follow a redirect to another origin.
    if (next.origin !== url.origin) {
      headers.delete('authorization');
      headers.delete('cookie');
      headers.delete('proxy-authorization');
    }
    url = next;
  }
}
