import { Readable } from 'node:stream';
import { ExportRepository, type ExportFilter } from './export.repository';

export type { ExportFilter, ExportedMemory } from './export.repository';

/** Lines are pushed in chunks of about this many bytes (fewer, larger writes; memory stays bounded). */
const CHUNK_BYTES = 64 * 1024;

/** NDJSON export of one key's memories: one memory per line, every field, streamed with backpressure. */
export class ExportService {
  constructor(
    private readonly dbFile: string,
    private readonly busyTimeoutMs: number,
  ) {}

  /** How many memories the filter selects. */
  count(f: ExportFilter): number {
    const repo = new ExportRepository(this.dbFile, this.busyTimeoutMs);
    try {
      return repo.count(f);
    } finally {
      repo.close();
    }
  }

  /**
   * A readable of NDJSON text. Rows are read only as fast as the consumer takes them (read() is
   * called again only when the buffer drained), so memory stays constant for any size; the
   * read-only connection closes at the end, on error and when the consumer goes away.
   */
  stream(f: ExportFilter, onRows?: (n: number) => void): Readable {
    const repo = new ExportRepository(this.dbFile, this.busyTimeoutMs);
    const it = repo.lines(f);
    let sent = 0;
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      it.return(undefined);
      repo.close();
    };
    return new Readable({
      highWaterMark: CHUNK_BYTES,
      read() {
        try {
          let buf = '';
          let n = 0;
          for (;;) {
            const next = it.next();
            if (next.done) {
              if (buf) this.push(buf);
              if (n) onRows?.((sent += n));
              release();
              this.push(null);
              return;
            }
            buf += next.value;
            n++;
            if (buf.length >= CHUNK_BYTES) break;
          }
          onRows?.((sent += n));
          this.push(buf);
        } catch (err) {
          this.destroy(err as Error);
        }
      },
      destroy(err, cb) {
        release();
        cb(err);
      },
    });
  }
}
