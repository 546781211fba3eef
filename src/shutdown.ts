import type { Logger } from './logger';

type Step = { name: string; run: () => Promise<void> | void };

/** Ordered, bounded shutdown: steps run in registration order; a timer forces exit. */
export class Shutdown {
  private steps: Step[] = [];
  private started: Promise<void> | null = null;
  private current: string | null = null;

  constructor(
    private readonly log: Logger,
    private readonly graceMs: number,
    private readonly exit: (code: number) => void = (c) => process.exit(c),
  ) {}

  add(name: string, run: () => Promise<void> | void): this {
    this.steps.push({ name, run });
    return this;
  }

  /** Runs every step once, in order; a second call returns the first call's promise. */
  run(reason: string): Promise<void> {
    if (this.started) return this.started;
    this.log.info({ reason }, 'shutting down');
    const timer = setTimeout(() => {
      // The step still running is the one that hung: name it, or a forced exit says nothing about its cause.
      this.log.error({ graceMs: this.graceMs, step: this.current }, 'shutdown grace period exceeded; forcing exit');
      this.exit(1);
    }, this.graceMs + 5000);
    timer.unref();
    this.started = (async () => {
      for (const step of this.steps) {
        this.current = step.name;
        try {
          await step.run();
        } catch (err) {
          this.log.warn({ err, step: step.name }, 'shutdown step failed');
        }
      }
      this.current = null;
      clearTimeout(timer);
      this.log.info('shutdown complete');
    })();
    return this.started;
  }

  /** The step running now, or null before and after the shutdown. */
  get pending(): string | null {
    return this.current;
  }

  /** Wires SIGTERM/SIGINT to run() then exit(0). */
  onSignals(): void {
    for (const sig of ['SIGTERM', 'SIGINT'] as const) {
      process.once(sig, () => void this.run(sig).then(() => this.exit(0)));
    }
  }
}
