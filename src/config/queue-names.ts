/** Every queue a job of the map lives on; a queue is listed here once a job of it has a handler. */
export const QUEUE_NAMES = ['maintenance', 'extraction', 'embedding', 'reindex', 'summarize', 'import'] as const;
export type QueueName = (typeof QUEUE_NAMES)[number];
