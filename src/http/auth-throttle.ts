import net from 'node:net';
import type { Request, Response } from 'express';
import { LRUCache } from 'lru-cache';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { ipv6Bytes } from '../net/address-class';
import { sendError } from './error-handler';

export interface AuthThrottleOptions {
  /** Failed credential checks an IP may make per window; 0 turns the throttle off. */
  failures: number;
  windowMs: number;
  /** How long an IP that went over is refused. */
  blockMs: number;
  /** How many (IP, credential) pairs that succeeded are remembered (they pass a block). */
  knownMax?: number;
}

/** What the throttle decided for one presented credential. */
export type ThrottleVerdict = { blocked: false } | { blocked: true; retryAfterSeconds: number };

const KNOWN_TTL_MS = 24 * 3600_000;
const NOT_BLOCKED: ThrottleVerdict = Object.freeze({ blocked: false });

/** The throttle's name for the management token that checked out (see AuthThrottle.verdict). */
export const MANAGEMENT_IDENTITY = 'management';
/** The throttle's name for a client key that checked out: its id, which stands for its one secret. */
export const apiKeyIdentity = (id: string): string => `key:${id}`;

/**
 * Brute-force brake for every credential check (management token on /api and /mcp, client keys on
 * /v1 and /mcp, the /admin/login form), per client address (`clientIp`: `req.ip` — the X-Forwarded-For client of a
 * proxy TRUST_PROXY trusts, by default one on this host, else the peer address — an IPv6 one by its /64). In-memory,
 * per api process.
 *
 * - Every wrong credential counts one failure for the IP; a missing one does not (it is no guess),
 *   nor does an expired session cookie (256 random bits: not guessable, and counting them would lock
 *   operators out after a restart).
 * - After `failures` failures in `windowMs`, the IP is blocked for `blockMs`: a credential from it
 *   is answered 429 (Retry-After, the one error shape) whether it is right or wrong, so a blocked
 *   attacker learns nothing more — not even when it guesses right.
 * - Except a credential that already succeeded from that IP (remembered by its identity, a key's id or
 *   'management', never the secret): the apps and the operator already working from an address keep working while something
 *   else there guesses. Another IP is never affected. A credential first presented during a block
 *   waits the block out (bounded by `blockMs`). The price: whoever shares the IP (a NAT, a reverse proxy
 *   that is not on loopback) can tell a remembered credential from the others during a block.
 * - A success does not reset the failures: otherwise a holder of one valid client key could
 *   interleave it with guesses at the management token, for ever.
 */
export class AuthThrottle {
  private readonly limiter: RateLimiterMemory | null;
  private readonly known: LRUCache<string, true>;

  constructor(readonly options: AuthThrottleOptions) {
    this.limiter =
      options.failures > 0
        ? new RateLimiterMemory({ points: options.failures, duration: Math.max(1, Math.ceil(options.windowMs / 1000)), blockDuration: Math.max(1, Math.ceil(options.blockMs / 1000)) })
        : null;
    // A day's TTL read to the second: at lru-cache's default resolution (1 ms) every refresh of a remembered pair (every
    // /v1 request) armed a timer, one more turn of the event loop per request.
    // updateAgeOnGet: the hit that admits a remembered pair is also its refresh (one lookup per request, not has + set).
    this.known = new LRUCache({ max: options.knownMax ?? 10_000, ttl: KNOWN_TTL_MS, ttlResolution: 1000, updateAgeOnGet: true });
  }

  get enabled(): boolean {
    return this.limiter !== null;
  }

  /**
   * The throttle's answer for one credential check, called right AFTER the (synchronous) verification and before
   * anything else is awaited: a wrong credential counts one failure (blocked once over the limit); a right one
   * passes unless the IP is blocked and it never succeeded from there. Deciding after the check is what keeps the
   * count exact: the limiter's memory store counts and reads synchronously, so N guesses pipelined on one
   * connection (parsed and routed in one go, before any promise settles) are counted one by one — reading the
   * state before the check and counting after an await let every guess of such a batch through unbraked. A blocked
   * IP gets the same 429 for a right (unremembered) and a wrong credential: it learns nothing.
   *
   * `identity` names the credential that checked out without being it ('management', 'key:<id>'; a key's id stands
   * for its one secret), or is null for a wrong one: the remembered pairs hold no secret and need no hash. The answer
   * is synchronous when the limiter need not be asked (throttle off, or a remembered pair: every request of a working
   * client), so a caller that tests for a promise adds no turn of the event loop to a client's request.
   */
  verdict(ip: string, identity: string | null): ThrottleVerdict | Promise<ThrottleVerdict> {
    if (!this.limiter) return NOT_BLOCKED;
    if (identity === null) return this.failure(this.limiter, ip);
    const pair = `${ip}\0${identity}`;
    // Remembered: it passes a block, so the limiter need not be asked.
    if (this.known.get(pair)) return NOT_BLOCKED;
    return this.firstSuccess(this.limiter, ip, pair);
  }

  private async failure(limiter: RateLimiterMemory, ip: string): Promise<ThrottleVerdict> {
    try {
      await limiter.consume(ip);
      return NOT_BLOCKED;
    } catch (rejection) {
      if (!(rejection instanceof RateLimiterRes)) throw rejection;
      return { blocked: true, retryAfterSeconds: Math.max(1, Math.ceil(rejection.msBeforeNext / 1000)) };
    }
  }

  private async firstSuccess(limiter: RateLimiterMemory, ip: string, pair: string): Promise<ThrottleVerdict> {
    const res = await limiter.get(ip);
    if (res && res.consumedPoints > this.options.failures && !this.known.has(pair)) {
      return { blocked: true, retryAfterSeconds: Math.max(1, Math.ceil(res.msBeforeNext / 1000)) };
    }
    this.known.set(pair, true);
    return NOT_BLOCKED;
  }
}

/**
 * The address the throttle counts for a request (see AuthThrottle): the client IP (`req.ip`; with `trust proxy`, see
 * TRUST_PROXY, the X-Forwarded-For client a trusted proxy names, else the peer address) as `throttleAddress` groups it.
 */
export const clientIp = (req: Request): string =>
  throttleAddress(
    // Without X-Forwarded-For, req.ip is the peer's address whatever `trust proxy` says (proxy-addr's walk has no other
    // address to read): taken directly, every /v1 request skips that walk.
    (req.headers['x-forwarded-for'] === undefined ? req.socket.remoteAddress : req.ip) ?? req.socket.remoteAddress ?? 'unknown',
  );

const MAPPED_V4 = '::ffff:';
const PORT_SUFFIX = /^(?:(\d{1,3}(?:\.\d{1,3}){3})|\[([0-9A-Fa-f:.]+(?:%[^\]]*)?)\]):\d{1,5}$/;

/**
 * How the throttle groups addresses: an IPv4 address as is, also written IPv4-mapped (`::ffff:192.0.2.1`, as a
 * dual-stack listener reports IPv4 peers: one client, one count); an IPv6 address by its /64 (`2001:db8:0:1::/64`), the
 * block one subscriber, host or VM is given, so an attacker cannot rotate through 2^64 addresses for 2^64 × the limit
 * guesses. An address with a port appended is the address. Anything else (not an IP: a garbage X-Forwarded-For entry
 * from a trusted proxy) is counted as written.
 */
export function throttleAddress(ip: string): string {
  if (!ip.includes(':')) return ip;
  // A proxy that appends the client's port (`192.0.2.1:5555`, `[2001:db8::1]:5555`): one client, whatever its port.
  const withPort = PORT_SUFFIX.exec(ip);
  if (withPort) return throttleAddress(withPort[1] ?? withPort[2]!);
  if (ip.startsWith(MAPPED_V4) && net.isIPv4(ip.slice(MAPPED_V4.length))) return ip.slice(MAPPED_V4.length);
  const b = ipv6Bytes(ip);
  if (!b) return ip;
  if (b.slice(0, 10).every((x) => x === 0) && b[10] === 0xff && b[11] === 0xff) return b.slice(12).join('.');
  const word = (i: number) => ((b[i] << 8) | b[i + 1]).toString(16);
  return `${word(0)}:${word(2)}:${word(4)}:${word(6)}::/64`;
}

/** The 429 of a blocked IP: Retry-After and the error shape (OpenAI's on /v1). */
export function sendThrottled(res: Response, verdict: { retryAfterSeconds: number }): void {
  res.setHeader('retry-after', String(verdict.retryAfterSeconds));
  sendError(res, 429, 'too_many_failed_attempts', `Too many failed authentication attempts from this address; retry in ${verdict.retryAfterSeconds} s`, {
    retryAfterSeconds: verdict.retryAfterSeconds,
  });
}
