import { Gauge, type Registry } from 'prom-client';

/**
 * `engram_outbox_quarantined_rows`: outbox rows set aside because they can never be added (see
 * QueueLayer.flushOutbox); anything above 0 needs an operator. Read from SQLite at scrape time.
 * Every process reads the same file, so same-labelled series from several workers merge by max.
 */
export function registerOutboxQuarantineGauge(registry: Registry, source: { outboxQuarantinedCount(): number }): Gauge {
  return new Gauge({
    name: 'engram_outbox_quarantined_rows',
    help: 'Outbox rows quarantined because they can never be added to a queue (unknown job, invalid payload); delete with DELETE /api/jobs/outbox/:outboxId',
    registers: [registry],
    aggregator: 'max',
    collect() {
      try {
        this.set(source.outboxQuarantinedCount());
      } catch {
        // the database is closing (shutdown): keep the last value
      }
    },
  });
}
