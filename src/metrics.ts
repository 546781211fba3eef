import { AggregatorRegistry, Counter, Histogram, Registry, collectDefaultMetrics, type MetricObjectWithValues, type MetricValue } from 'prom-client';

/** Metrics of one process. The api merges in the workers' snapshots (pushed to Redis) at scrape time. */
export class Metrics {
  readonly registry = new Registry();
  readonly httpDuration: Histogram<'method' | 'route' | 'status'>;
  readonly jobDuration: Histogram<'job' | 'queue' | 'outcome'>;
  readonly jobFailures: Counter<'job' | 'queue' | 'final'>;
  /** Promise rejections nobody handled (logged and survived; see src/process-guards.ts). */
  readonly unhandledRejections: Counter;
  /** Exceptions nobody caught (each one ends the process after the ordered shutdown). */
  readonly uncaughtExceptions: Counter;

  constructor(readonly role: 'api' | 'worker') {
    this.registry.setDefaultLabels({ role });
    // The event-loop lag is sampled by a timer of this period (ms): prom-client's default, 10, woke an idle process
    // a hundred times a second for it. Every 100 ms it still catches any stall of 100 ms or more.
    collectDefaultMetrics({ register: this.registry, prefix: 'engram_', eventLoopMonitoringPrecision: 100 });
    this.httpDuration = new Histogram({
      name: 'engram_http_request_duration_seconds',
      help: 'HTTP request latency by route',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
      registers: [this.registry],
    });
    this.jobDuration = new Histogram({
      name: 'engram_job_duration_seconds',
      help: 'Job processing time by job name',
      labelNames: ['job', 'queue', 'outcome'],
      buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300],
      registers: [this.registry],
    });
    this.jobFailures = new Counter({
      name: 'engram_job_failures_total',
      help: 'Failed job attempts by job name (final = no retries left)',
      labelNames: ['job', 'queue', 'final'],
      registers: [this.registry],
    });
    this.unhandledRejections = new Counter({
      name: 'engram_unhandled_rejections_total',
      help: 'Promise rejections no code handled (logged; the process kept running)',
      registers: [this.registry],
    });
    this.uncaughtExceptions = new Counter({
      name: 'engram_uncaught_exceptions_total',
      help: 'Exceptions no code caught (the process shut down and exited 1)',
      registers: [this.registry],
    });
  }

  /** Merges worker snapshots (prom-client JSON) into this registry's exposition text. */
  async exposition(workerSnapshots: MetricObjectWithValues<MetricValue<string>>[][]): Promise<{ contentType: string; body: string }> {
    if (workerSnapshots.length === 0) return { contentType: this.registry.contentType, body: await this.registry.metrics() };
    // Same-named series are combined with prom-client's cluster aggregation rules (sums for counters/histograms).
    const merged = AggregatorRegistry.aggregate([await this.registry.getMetricsAsJSON(), ...workerSnapshots]);
    return { contentType: this.registry.contentType, body: await merged.metrics() };
  }
}
