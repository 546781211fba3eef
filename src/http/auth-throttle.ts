import crypto from 'node:crypto';
import type { Request, Response } from 'express';
import { LRUCache } from 'lru-cache';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
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

/**
 * Brute-force brake for every credential check (management token on /api and /mcp, client keys on
 * /v1 and /mcp, the /admin/login form), per client IP (`req.ip`: with `trust proxy` = loopback, the
 * X-Forwarded-For of a reverse proxy on this host, else the peer address). In-memory, per api process.
 *
 * - Every wrong credential counts one failure for the IP; a missing one does not (it is no guess),
 *   nor does an expired session cookie (256 random bits: not guessable, and counting them would lock
 *   operators out after a restart).
 * - After `failures` failures in `windowMs`, the IP is blocked for `blockMs`: a credential from it
 *   is answered 429 (Retry-After, the one error shape) whether it is right or wrong, so a blocked
 *   attacker learns nothing more — not even when it guesses right.
 * - Except a credential that already succeeded from that IP (remembered as a salted hash, not the
 *   secret): the apps and the operator already working from an address keep working while something
 *   else there guesses. Another IP is never affected. A credential first presented during a block
 *   waits the block out (bounded by `blockMs`). The price: whoever shares the IP (a NAT, a reverse proxy
 *   that is not on loopback) can tell a remembered credential from the others during a block.
 * - A success does not reset the failures: otherwise a holder of one valid client key could
 *   interleave it with guesses at the management token, for ever.
 */
export class AuthThrottle {
  private readonly limiter: RateLimiterMemory | null;
  private readonly known: LRUCache<string, true>;
  /** Per process: a fingerprint is never comparable across restarts or processes. */
  private readonly salt = crypto.randomBytes(16).toString('hex');

  constructor(readonly options: AuthThrottleOptions) {
    this.limiter =
      options.failures > 0
        ? new RateLimiterMemory({ points: options.failures, duration: Math.max(1, Math.ceil(options.windowMs / 1000)), blockDuration: Math.max(1, Math.ceil(options.blockMs / 1000)) })
        : null;
    this.known = new LRUCache({ max: options.knownMax ?? 10_000, ttl: KNOWN_TTL_MS });
  }

  get enabled(): boolean {
    return this.limiter !== null;
  }

  /**
   * The salted fingerprint of an (IP, credential) pair: a one-shot hash of salt, IP and credential (no Hash or Hmac
   * object per request; an HMAC's second keyed pass buys nothing for a key that never leaves this process). The NUL
   * separates the IP from the credential (an IP holds none).
   */
  private fingerprint(ip: string, credential: string): string {
    return crypto.hash('sha256', `${this.salt}${ip}\0${credential}`, 'base64');
  }

  /**
   * The throttle's answer for one credential check, called right AFTER the (synchronous) verification and before
   * anything else is awaited: a wrong credential counts one failure (blocked once over the limit); a right one
   * passes unless the IP is blocked and it never succeeded from there. Deciding after the check is what keeps the
   * count exact: the limiter's memory store counts and reads synchronously, so N guesses pipelined on one
   * connection (parsed and routed in one go, before any promise settles) are counted one by one — reading the
   * state before the check and counting after an await let every guess of such a batch through unbraked. A blocked
   * IP gets the same 429 for a right (unremembered) and a wrong credential: it learns nothing.
   */
  async verdict(ip: string, credential: string, valid: boolean): Promise<ThrottleVerdict> {
    if (!this.limiter) return { blocked: false };
    if (!valid) {
      try {
        await this.limiter.consume(ip);
        return { blocked: false };
      } catch (rejection) {
        if (!(rejection instanceof RateLimiterRes)) throw rejection;
        return { blocked: true, retryAfterSeconds: Math.max(1, Math.ceil(rejection.msBeforeNext / 1000)) };
      }
    }
    const fingerprint = this.fingerprint(ip, credential);
    // Remembered: it passes a block, so the limiter need not be asked (every request of a working client comes here).
    if (this.known.has(fingerprint)) {
      this.known.set(fingerprint, true);
      return NOT_BLOCKED;
    }
    const res = await this.limiter.get(ip);
    if (res && res.consumedPoints > this.options.failures && !this.known.has(fingerprint)) {
      return { blocked: true, retryAfterSeconds: Math.max(1, Math.ceil(res.msBeforeNext / 1000)) };
    }
    this.known.set(fingerprint, true);
    return NOT_BLOCKED;
  }
}

/** The IP the throttle counts for a request (see AuthThrottle). */
export const clientIp = (req: Request): string => req.ip ?? req.socket.remoteAddress ?? 'unknown';

/** The 429 of a blocked IP: Retry-After and the error shape (OpenAI's on /v1). */
export function sendThrottled(res: Response, verdict: { retryAfterSeconds: number }): void {
  res.setHeader('retry-after', String(verdict.retryAfterSeconds));
  sendError(res, 429, 'too_many_failed_attempts', `Too many failed authentication attempts from this address; retry in ${verdict.retryAfterSeconds} s`, {
    retryAfterSeconds: verdict.retryAfterSeconds,
  });
}
