import { EventEmitter } from 'node:events';

/** The request and response ClientGone watches (a Node/express pair). */
interface Watched {
  req: { socket: { destroyed: boolean } };
  res: { writableFinished: boolean; on(event: 'close', fn: () => void): unknown };
}

/**
 * Fires once when the client goes away before its response is finished: emits `abort` and sets `aborted`.
 *
 * It replaces a per-request AbortController (an EventTarget: its construction, its listeners and undici's
 * `addEventListener` on it were a measurable part of a memory-off chat). undici takes an EventEmitter with
 * `aborted` and an `abort` event as a request's signal, so the upstream call is still cut when the client leaves;
 * the memory phase takes it as its caller's signal too (memory-phase.ts CallerSignal).
 */
export class ClientGone extends EventEmitter {
  /** The client went away before the response finished. */
  aborted = false;
  /** Why the upstream call was cut (undici's request reads it; undefined: its own RequestAbortedError). */
  readonly reason: unknown = undefined;

  constructor({ req, res }: Watched) {
    super();
    // It never emits 'error', but an emitter without an error listener must not exist here (STYLE.md 14).
    this.on('error', noop);
    // 'close' comes once (on, not once: once() wraps the listener in another closure).
    res.on('close', () => {
      if (!res.writableFinished) this.fire();
    });
    // The client may have left while the body was being parsed, before the listener above existed.
    if (req.socket.destroyed) this.fire();
  }

  /** Marks the client gone and tells the listeners (once). */
  fire(): void {
    if (this.aborted) return;
    this.aborted = true;
    this.emit('abort');
  }
}

function noop(): void {}
