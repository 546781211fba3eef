import dns from 'node:dns';
import { Agent, buildConnector, fetch as undiciFetch, Headers, type Dispatcher, type HeadersInit, type RequestInit, type Response } from 'undici';
import type { Env } from '../config/env';
import { classifyHost, classifyIp, type AddressClass } from './address-class';

export { classifyHost, classifyIp, type AddressClass };

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

/**
 * The one endpoint normaliser: a base or full endpoint URL (no query, no fragment) whose path ends
 * in `/<suffix>`; with a policy the URL is also checked against it (scheme, credentials, host).
 */
export function endpointUrl(raw: string, suffix: string, policy?: Pick<OutboundPolicy, 'allowPrivate'>): string {
  let url: URL;
  if (policy) url = checkOutboundUrl(raw.trim(), policy);
  else {
    try {
      url = new URL(raw.trim());
    } catch {
      throw new OutboundUrlError('invalid_url');
    }
  }
  // `new URL` drops a bare "?" or "#", so look at the raw text too.
  if (url.search || url.hash || /[?#]/.test(raw)) throw new OutboundUrlError('query_not_allowed');
  const path = url.pathname.replace(/\/+$/, '');
  url.pathname = path.endsWith(`/${suffix}`) ? path : `${path}/${suffix}`;
  return url.toString();
}

/** Checks a user-set custom embeddings base URL and returns its `…/embeddings` endpoint (no query, no fragment). */
export function customEmbeddingsUrl(raw: string, policy: Pick<OutboundPolicy, 'allowPrivate'>): string {
  return endpointUrl(raw, 'embeddings', policy);
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
