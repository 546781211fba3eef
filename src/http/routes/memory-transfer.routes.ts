import { pipeline } from 'node:stream';
import { Router } from 'express';
import { AppError, notFound } from '../../errors';
import type { ApiContext } from '../api-context';
import { handle } from '../validate';
import { idParams } from './memory.schema';
import { compactBody, exportQuery, importQuery, summarizeBody } from './memory-transfer.schema';

/** Upload types POST /api/memory/import reads as a raw body (JSON and forms are parsed by earlier middleware, so refused). */
const UPLOAD_TYPES = new Set(['application/x-ndjson', 'application/ndjson', 'application/jsonl', 'application/octet-stream', 'application/vnd.sqlite3', 'application/x-sqlite3', 'text/plain']);

/** A file name fragment from free text (content-disposition must never carry quotes or control characters). */
const fileSafe = (s: string) => s.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 64) || 'key';

/**
 * /api/memory summarisation, export, import and restore. Mounted before the CRUD router, so
 * `/export`, `/summarize`, `/import` are never read as a memory id.
 */
export function memoryTransferRoutes(ctx: ApiContext): Router {
  const r = Router();

  r.post(
    '/summarize',
    handle({ body: summarizeBody }, async ({ body }, _req, res) => {
      const { dryRun, ...req } = body;
      if (dryRun) return ctx.summarize.dryRun(req);
      const job = await ctx.queues.enqueue('summarize-older-than', req);
      res.status(202);
      return { jobId: job.jobId, queue: job.queue, via: job.via, dryRun: false };
    }),
  );

  r.post(
    '/compact',
    handle({ body: compactBody }, async ({ body }, _req, res) => {
      const job = await ctx.queues.enqueue('compact-memories', { apiKeyId: body.apiKeyId, trigger: 'api' });
      res.status(202);
      return { jobId: job.jobId, queue: job.queue, via: job.via };
    }),
  );

  r.get(
    '/export',
    handle({ query: exportQuery }, ({ query }, _req, res) => {
      const stream = ctx.exporter.stream({ apiKeyId: query.apiKeyId, sessionId: query.sessionId });
      res.status(200);
      res.setHeader('content-type', 'application/x-ndjson; charset=utf-8');
      res.setHeader('content-disposition', `attachment; filename="engram-${fileSafe(query.apiKeyId)}-${new Date().toISOString().slice(0, 10)}.ndjson"`);
      res.setHeader('cache-control', 'no-store');
      // pipeline: backpressure from the socket, and the read-only connection is released if the client leaves.
      pipeline(stream, res, (err) => {
        if (err && err.code !== 'ERR_STREAM_PREMATURE_CLOSE') ctx.log.warn({ err: { message: err.message } }, 'export stream failed');
      });
      return undefined;
    }),
  );

  r.post(
    '/import',
    handle({ query: importQuery }, async ({ query }, req, res) => {
      const type = (req.headers['content-type'] ?? 'application/octet-stream').split(';')[0].trim().toLowerCase();
      if (!UPLOAD_TYPES.has(type)) {
        res.setHeader('connection', 'close');
        throw new AppError(415, 'unsupported_media_type', 'Send the file as the raw body: application/x-ndjson (an Engram export) or application/octet-stream (either format)', {
          accepted: [...UPLOAD_TYPES],
        });
      }
      const declared = req.headers['content-length'] !== undefined ? Number(req.headers['content-length']) : null;
      let upload;
      try {
        upload = await ctx.importer.storeUpload(req, Number.isFinite(declared) ? declared : null);
      } catch (err) {
        // The rest of the body is not read: the connection goes after this answer.
        res.setHeader('connection', 'close');
        throw err;
      }
      try {
        const job = await ctx.queues.enqueue('import-memories', { uploadId: upload.uploadId, format: upload.format, keyMap: query.map });
        res.status(202);
        return { jobId: job.jobId, queue: job.queue, via: job.via, uploadId: upload.uploadId, format: upload.format, bytes: upload.bytes };
      } catch (err) {
        await ctx.importer.discardUpload(upload.uploadId, upload.format);
        throw err;
      }
    }),
  );

  r.post(
    '/:id/restore',
    handle({ params: idParams }, ({ params }, _req, res) => {
      const m = ctx.memory.restore(params.id, { source: 'api', requestId: res.locals.requestId });
      if (!m) throw notFound('Memory history');
      return { success: true, memory: m };
    }),
  );

  return r;
}
