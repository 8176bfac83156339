import assert from 'node:assert/strict';
import { StreamChecker } from './stream-check.js';

/** Feeds `chunks` at 50 ms intervals starting at t=0 and finishes at `endMs`. */
function check(chunks: readonly string[], endMs = chunks.length * 50, stallMs = 1000) {
  const c = new StreamChecker();
  chunks.forEach((chunk, i) => c.feed(chunk, i * 50));
  return c.finish(endMs, stallMs);
}

describe('StreamChecker', () => {
  const cases: { name: string; chunks: string[]; endMs?: number; server: string | null; lines: number; error: RegExp | null }[] = [
    { name: 'a contiguous stream is intact', chunks: ['rs1 0\n', 'rs1 1\n', 'rs1 2\n'], server: 'rs1', lines: 3, error: null },
    { name: 'lines split across chunks are joined', chunks: ['rs2 0\nrs', '2 1\nrs2 2', '\n'], server: 'rs2', lines: 3, error: null },
    { name: 'echo lines are not sequence lines', chunks: ['rs1 0\necho hi\n', 'rs1 1\n'], server: 'rs1', lines: 2, error: null },
    { name: 'a gap is reported', chunks: ['rs1 0\n', 'rs1 1\n', 'rs1 3\n'], server: 'rs1', lines: 3, error: /^sequence gap: expected 2, got 3$/ },
    { name: 'a stream must start at 0', chunks: ['rs1 5\n'], server: 'rs1', lines: 1, error: /^sequence gap: expected 0, got 5$/ },
    { name: 'a server change is reported', chunks: ['rs1 0\n', 'rs2 1\n'], server: 'rs1', lines: 2, error: /^server changed from rs1 to rs2 at line 1$/ },
    { name: 'garbage is reported', chunks: ['rs1 0\n', 'HTTP/1.1 400 Bad Request\n'], server: 'rs1', lines: 1, error: /^unexpected line "HTTP\/1.1 400 Bad Request"$/ },
    { name: 'no line at all is broken', chunks: [], endMs: 100, server: null, lines: 0, error: /^no line received$/ },
    { name: 'a stream silent at the end is stalled', chunks: ['rs1 0\n', 'rs1 1\n'], endMs: 2000, server: 'rs1', lines: 2, error: /^stalled: no line for 1950 ms \(after 2 lines, the last at 1970-01-01T00:00:00\.050Z\)$/ },
    { name: 'an endless line is garbage', chunks: ['rs1 0\n', 'x'.repeat(2000)], server: 'rs1', lines: 1, error: /^line longer than 1024 bytes/ },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const r = check(c.chunks, c.endMs);
      assert.equal(r.server, c.server);
      assert.equal(r.lines, c.lines);
      if (c.error === null) assert.equal(r.error, null);
      else assert.match(r.error ?? '', c.error);
    });
  }

  it('keeps the first failure only', () => {
    const c = new StreamChecker();
    c.feed('rs1 0\n', 0);
    c.fail('ECONNRESET after 1 lines');
    c.feed('rs1 7\n', 50);
    assert.equal(c.finish(60, 1000).error, 'ECONNRESET after 1 lines');
  });

  it('measures the longest silence between lines', () => {
    const c = new StreamChecker();
    c.feed('rs1 0\n', 0);
    c.feed('rs1 1\n', 50);
    c.feed('rs1 2\n', 850);
    c.feed('rs1 3\n', 900);
    assert.deepEqual(c.finish(950, 1000), { server: 'rs1', lines: 4, maxGapMs: 800, error: null });
  });

  it('collects echoes', () => {
    const c = new StreamChecker();
    c.feed('rs1 0\necho ping 1\n', 0);
    assert.deepEqual(c.echoed, ['ping 1']);
  });
});
