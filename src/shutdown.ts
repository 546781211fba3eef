import type { Logger } from './logger';

type Step = { name: string; run: () => Promise<void> | void };

/** Ordered, bounded shutdown: steps run in registration order; a timer forces exit. */
export class Shutdown {
  private steps: Step[] = [];
  private started: Promise<void> | null = null;

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
      this.log.error({ graceMs: this.graceMs }, 'shutdown grace period exceeded; forcing exit');
      this.exit(1);
    }, this.graceMs + 5000);
    timer.unref();
    this.started = (async () => {
      for (const step of this.steps) {
        try {
          await step.run();
        } catch (err) {
          this.log.warn({ err, step: step.name }, 'shutdown step failed');
        }
      }
      clearTimeout(timer);
      this.log.info('shutdown complete');
    })();
    return this.started;
  }

  /** Wires SIGTERM/SIGINT to run() then exit(0). */
  onSignals(): void {
    for (const sig of ['SIGTERM', 'SIGINT'] as const) {
      process.once(sig, () => void this.run(sig).then(() => this.exit(0)));
    }
  }
}
