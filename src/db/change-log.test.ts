/**
 * The catch-up rule (change-log.ts) on a toy copy of one key's memories (row id → content) kept from
 * memory_kw_log, with a second connection writing in between reads as another process would.
 */
import Database from 'better-sqlite3';
import { memoryInput } from '../../test/factories';
import { tempStorage } from '../../test/helpers/storage';
import { catchUp, ChangeLog, CURRENT, RELOAD } from './change-log';

const api = { source: 'api' as const };

describe('change-log catch-up', () => {
  let s: ReturnType<typeof tempStorage>;
  let other: Database.Database;
  let log: ChangeLog;
  let ids: number[];

  beforeEach(() => {
    s = tempStorage();
    other = new Database(s.db.file);
    log = new ChangeLog(s.db.db, 'memory_kw_log');
    ids = s.memory.upsertMany([memoryInput({ apiKeyId: 'A', content: 'one' }), memoryInput({ apiKeyId: 'A', content: 'two' })], api).map((c) => c.memory.rowId);
  });
  afterEach(() => {
    other.close();
    s.close();
  });

  const contentOf = (rowId: number) => s.db.db.prepare("SELECT content FROM memories WHERE memory_id = ? AND api_key_id = 'A'").pluck(true).get(rowId) as string | undefined;
  const rowsOf = () => new Map(s.db.db.prepare("SELECT memory_id, content FROM memories WHERE api_key_id = 'A'").raw(true).all() as [number, string][]);
  const write = (rowId: number, content: string) =>
    other.prepare('UPDATE memories SET content = ?, updated_at = ? WHERE memory_id = ?').run(content, new Date().toISOString(), rowId);

  /** A copy as the caches keep one: loaded by log.snapshot, caught up by catchUp. */
  function load() {
    return log.snapshot((head) => ({ rows: rowsOf(), seq: head }));
  }
  function refresh(copy: { rows: Map<number, string>; seq: number }) {
    const step = catchUp(log, 'A', copy.seq, log.head());
    if (step.kind === 'reload') return load();
    if (step.kind === 'apply') {
      for (const rowId of step.rowIds) {
        const c = contentOf(rowId);
        if (c === undefined) copy.rows.delete(rowId);
        else copy.rows.set(rowId, c);
      }
      copy.seq = step.head;
    }
    return copy;
  }

  it('is current, with no log read and nothing allocated, while the head is the copy’s seq', () => {
    const copy = load();
    const since = jest.spyOn(log, 'since');
    expect(catchUp(log, 'A', copy.seq, log.head())).toBe(CURRENT);
    expect(since).not.toHaveBeenCalled();
  });

  it('applies the key’s entries once each up to the head, which other keys’ writes move too', () => {
    const copy = load();
    write(ids[1]!, 'two, edited');
    write(ids[0]!, 'one, edited');
    write(ids[1]!, 'two, again');
    s.memory.upsertMany([memoryInput({ apiKeyId: 'B', content: 'other key' })], api);
    const step = catchUp(log, 'A', copy.seq, log.head());
    expect(step).toEqual({ kind: 'apply', head: log.head(), rowIds: [ids[1], ids[0]] });
    expect(refresh(copy).rows).toEqual(rowsOf());
    // An idle key's copy still moves to the head: it does not fall behind the prune mark through other keys' writes.
    s.memory.upsertMany([memoryInput({ apiKeyId: 'B', content: 'another' })], api);
    expect(catchUp(log, 'A', copy.seq, log.head())).toEqual({ kind: 'apply', head: log.head(), rowIds: [] });
  });

  it('reloads when entries after the copy were pruned, or the head went back behind it', () => {
    const copy = load();
    write(ids[0]!, 'one, edited');
    const head = log.head();
    other.prepare('DELETE FROM memory_kw_log WHERE seq <= ?').run(head);
    other.prepare('UPDATE memory_kw_log_state SET pruned_below = ? WHERE id = 1').run(head);
    expect(catchUp(log, 'A', copy.seq, log.head())).toBe(RELOAD);
    expect(catchUp(log, 'A', head + 5, log.head())).toBe(RELOAD); // a restored file: the log is older than the copy
  });

  it('reads the prune mark last: a prune committed at any point of the catch-up loses no entry', () => {
    const prune = (cut: number) =>
      other.transaction(() => {
        other.prepare('DELETE FROM memory_kw_log WHERE seq <= ?').run(cut);
        other.prepare('UPDATE memory_kw_log_state SET pruned_below = ? WHERE id = 1').run(cut);
      })();
    const real = log.prunedBelow.bind(log);
    const copy = load();
    write(ids[0]!, 'one, edited');
    let cut = log.head();
    write(ids[1]!, 'two, edited');
    // Committed right after the mark's read: the entries were read before it, all there (read after the mark, one was gone).
    jest.spyOn(log, 'prunedBelow').mockImplementationOnce(() => {
      const mark = real();
      prune(cut);
      return mark;
    });
    expect(catchUp(log, 'A', copy.seq, log.head())).toEqual({ kind: 'apply', head: log.head(), rowIds: [ids[0], ids[1]] });
    // Committed between the entries' read and the mark's: the mark shows it, reload.
    const seq = log.head();
    write(ids[0]!, 'one, again');
    cut = log.head();
    write(ids[1]!, 'two, again');
    jest.spyOn(log, 'prunedBelow').mockImplementationOnce(() => {
      prune(cut);
      return real();
    });
    expect(catchUp(log, 'A', seq, log.head())).toBe(RELOAD);
  });

  it('a write committed between a load’s head read and its rows read is not lost', () => {
    // In one read transaction (snapshot): the rows do not hold the write, and the next catch-up applies it.
    const copy = log.snapshot((head) => {
      write(ids[0]!, 'one, written during the load');
      return { rows: rowsOf(), seq: head };
    });
    expect(copy.rows.get(ids[0]!)).toBe('one');
    expect(refresh(copy).rows.get(ids[0]!)).toBe('one, written during the load');

    // A load across transactions (in slices) reading the head first: the rows hold the write, the catch-up applies it again.
    const seq = log.head();
    write(ids[1]!, 'two, written during the load');
    const sliced = { rows: rowsOf(), seq };
    expect(catchUp(log, 'A', sliced.seq, log.head())).toMatchObject({ kind: 'apply', rowIds: [ids[1]] });
    expect(refresh(sliced).rows).toEqual(rowsOf());

    // The rule's reason: a head read after the rows would claim a write the copy never saw.
    const rows = rowsOf();
    write(ids[1]!, 'two, written after the rows');
    const late = { rows, seq: log.head() };
    expect(catchUp(log, 'A', late.seq, log.head())).toBe(CURRENT);
    expect(late.rows.get(ids[1]!)).not.toBe(contentOf(ids[1]!));
  });
});
