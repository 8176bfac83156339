import assert from 'node:assert/strict';
import { spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { PassThrough } from 'node:stream';
import { connectionKey, type SyncedConnection } from '@lbd/dataplane';
import { ConntrackConnectionTable, connectionFromEntry, invalidConnection, needsRefresh, renderInsert, renderRefresh, renderRemove } from './connection-table.js';
import { parseConntrack } from './conntrack.js';
import type { CommandResult, CommandRunner } from './runner.js';

const fullnat: SyncedConnection = {
  protocol: 'tcp', client: { address: '198.18.0.2', port: 40000 }, vip: { address: '198.18.0.10', port: 80 },
  realServer: { address: '198.19.1.11', port: 8080 }, localAddress: { address: '198.19.1.100', port: 20001 },
  mark: 65537, state: 'ESTABLISHED', timeoutSec: 300,
};
const connection = (port: number, over: Partial<SyncedConnection> = {}): SyncedConnection => ({ ...fullnat, client: { address: '198.18.0.2', port }, ...over });

describe('ConntrackConnectionTable: bindings (event lines: ctnetlink.test.ts)', () => {
  it('a reply to the client address on another port is fullnat, not nat', () => {
    const [e] = parseConntrack('tcp 6 10 ESTABLISHED src=198.18.0.2 dst=198.18.0.10 sport=40000 dport=80 src=198.19.1.11 dst=198.18.0.2 sport=8080 dport=40001 [ASSURED] mark=1');
    assert.deepEqual(connectionFromEntry(e!).localAddress, { address: '198.18.0.2', port: 40001 });
  });
});

describe('ConntrackConnectionTable: rendering conntrack lines', () => {
  it('-I carries the NAT binding, status before --mark (conntrack 1.4.7 overwrites a mark that precedes -u)', () => {
    const args = renderInsert(fullnat);
    assert.equal(args.join(' '), '-I -p tcp -s 198.18.0.2 -d 198.18.0.10 --sport 40000 --dport 80 -u ASSURED,SEEN_REPLY '
      + '--dst-nat 198.19.1.11:8080 --src-nat 198.19.1.100:20001 --state ESTABLISHED --timeout 300 --mark 65537');
    assert.ok(args.indexOf('-u') < args.indexOf('--mark'));
    const refresh = renderRefresh({ ...fullnat, state: 'FIN_WAIT', timeoutSec: 119.2 });
    assert.equal(refresh.join(' '), '-U -p tcp -s 198.18.0.2 -d 198.18.0.10 --sport 40000 --dport 80 -u ASSURED,SEEN_REPLY --state FIN_WAIT --timeout 120 --mark 65537');
    assert.ok(refresh.indexOf('-u') < refresh.indexOf('--mark'));
    assert.equal(renderRemove(fullnat).join(' '), '-D -p tcp -s 198.18.0.2 -d 198.18.0.10 --sport 40000 --dport 80');
  });

  it('nat mode has no --src-nat; udp no --state; IPv6 bindings are bracketed; unreplied connections get no status', () => {
    const v6: SyncedConnection = {
      protocol: 'udp', client: { address: 'fd00:18::2', port: 5000 }, vip: { address: 'fd00:18::10', port: 53 },
      realServer: { address: 'fd00:19::11', port: 53 }, localAddress: null, mark: 7, state: 'ASSURED', timeoutSec: 30,
    };
    assert.equal(renderInsert(v6).join(' '), '-I -p udp -s fd00:18::2 -d fd00:18::10 --sport 5000 --dport 53 -u ASSURED,SEEN_REPLY --dst-nat [fd00:19::11]:53 --timeout 30 --mark 7');
    assert.ok(!renderInsert({ ...v6, state: 'UNREPLIED' }).includes('-u'));
    assert.deepEqual(renderInsert({ ...v6, state: 'REPLIED' }).slice(11, 13), ['-u', 'SEEN_REPLY']);
    assert.ok(!renderInsert({ ...fullnat, state: 'SYN_SENT' }).includes('-u'));
    assert.ok(renderInsert({ ...fullnat, state: 'SYN_RECV' }).includes('SEEN_REPLY'));
  });

  it('refuses what would make conntrack abort a whole batch', () => {
    assert.equal(invalidConnection(fullnat), null);
    assert.match(invalidConnection({ ...fullnat, state: 'SYN_SENT2' })!, /tcp state/);
    assert.match(invalidConnection({ ...fullnat, realServer: { address: 'fd00::1', port: 80 } })!, /family/);
    assert.match(invalidConnection({ ...fullnat, client: { address: '198.18.0.2', port: 0 } })!, /port 0/);
    assert.match(invalidConnection({ ...fullnat, timeoutSec: 0 })!, /timeoutSec/);
    assert.match(invalidConnection({ ...fullnat, vip: { address: 'vip', port: 80 } })!, /not an IP/);
  });

  it('refreshes only what is behind: state, mark, or a clearly shorter timeout', () => {
    assert.equal(needsRefresh({ ...fullnat, timeoutSec: 295 }, fullnat), false);
    assert.equal(needsRefresh({ ...fullnat, timeoutSec: 200 }, fullnat), true);
    assert.equal(needsRefresh({ ...fullnat, state: 'SYN_RECV' }, fullnat), true);
    assert.equal(needsRefresh({ ...fullnat, mark: 3 }, fullnat), true);
    const udp: SyncedConnection = { ...fullnat, protocol: 'udp', state: 'REPLIED' };
    assert.equal(needsRefresh({ ...udp, state: 'ASSURED' }, udp), false, 'status bits cannot be taken back');
    assert.equal(needsRefresh({ ...udp, state: 'UNREPLIED' }, udp), true);
  });
});

/**
 * A conntrack in memory with 1.4.7's batch behaviour: `-R` stops at the first failing line (an `-I` of an
 * entry that exists), `-D` of an absent entry is not an error and prints what it deleted.
 */
class FakeConntrack implements CommandRunner {
  readonly table = new Map<string, SyncedConnection>();
  readonly calls: string[] = [];
  /** Keys whose -I the kernel rejects (as when the table is full). */
  readonly reject = new Set<string>();

  /** Entries the kernel times out while the next `-R` runs (a watch's probes, a standby's idle flows). */
  readonly expireDuringBatch = new Set<string>();

  async run(command: string, args: readonly string[]): Promise<CommandResult> {
    assert.equal(command, 'conntrack');
    // A count is not a call the tests count: it reads no table.
    if (args[0] === '-C') return { code: 0, stdout: `${this.table.size}\n`, stderr: '' };
    this.calls.push(args[0]!);
    if (args[0] === '-L') return { code: 0, stdout: [...this.table.values()].map(line).join('\n'), stderr: '' };
    if (args[0] === '-R') {
      for (const key of this.expireDuringBatch) this.table.delete(key);
      this.expireDuringBatch.clear();
      let stdout = '';
      for (const l of readFileSync(args[1]!, 'utf8').split('\n').filter(Boolean)) {
        const r = this.one(l.split(' '));
        stdout += r.stdout;
        if (r.code !== 0) return { ...r, stdout };
      }
      return { code: 0, stdout, stderr: '' };
    }
    return this.one(args);
  }

  private one(a: readonly string[]): CommandResult {
    const opt = (name: string): string | undefined => { const i = a.indexOf(name); return i < 0 ? undefined : a[i + 1]; };
    const ep = (s: string): { address: string; port: number } => {
      const m = /^\[?([^\]]+?)\]?:(\d+)$/.exec(s)!;
      return { address: m[1]!, port: Number(m[2]) };
    };
    const id = { protocol: opt('-p') as 'tcp', client: { address: opt('-s')!, port: Number(opt('--sport')) }, vip: { address: opt('-d')!, port: Number(opt('--dport')) } };
    const key = connectionKey(id);
    const had = this.table.get(key);
    if (a[0] === '-D') {
      this.table.delete(key);
      return { code: 0, stdout: had ? `${line(had)}\n` : '', stderr: '' };
    }
    const state = opt('--state') ?? 'ASSURED';
    if (a[0] === '-U') {
      if (had) this.table.set(key, { ...had, state, mark: Number(opt('--mark')), timeoutSec: Number(opt('--timeout')) });
      return { code: 0, stdout: '', stderr: '' };
    }
    if (had) return { code: 1, stdout: '', stderr: 'conntrack v1.4.7 (conntrack-tools): Operation failed: Such conntrack exists, try -U to update' };
    if (this.reject.has(key)) return { code: 1, stdout: '', stderr: 'conntrack v1.4.7 (conntrack-tools): Operation failed: not enough memory' };
    const snat = opt('--src-nat');
    this.table.set(key, { ...id, realServer: ep(opt('--dst-nat')!), localAddress: snat ? ep(snat) : null, mark: Number(opt('--mark')), state, timeoutSec: Number(opt('--timeout')) });
    return { code: 0, stdout: '', stderr: '' };
  }
}

/**
 * The same fake with the ctnetlink helper: `spawn('perl', ['-e', script, 'write', bytes])` answers delete and
 * update requests (D/U lines, batches ended by `.`) from the table, as the kernel would: ENOENT when absent.
 */
class FakeConntrackWithHelper extends FakeConntrack {
  readonly helperBatches: string[][] = [];
  missingPerl = false;
  spawns = 0;

  spawn(command: string, args: readonly string[]): ChildProcessWithoutNullStreams {
    assert.equal(command, 'perl');
    this.spawns++;
    assert.equal(args[2], 'write');
    const child = Object.assign(new EventEmitter(), {
      stdin: new PassThrough(), stdout: new PassThrough(), stderr: new PassThrough(), exitCode: null as number | null, signalCode: null,
      kill: () => { child.exitCode = 0; child.emit('close', null, 'SIGTERM'); return true; },
    });
    if (this.missingPerl) {
      setImmediate(() => { child.stderr.write('exec of "perl" failed: No such file or directory\n'); setImmediate(() => child.emit('close', 255, null)); });
      return child as unknown as ChildProcessWithoutNullStreams;
    }
    let batch: string[] = [];
    createInterface({ input: child.stdin }).on('line', (l) => {
      if (l !== '.') { batch.push(l); return; }
      this.helperBatches.push(batch);
      let codes = '';
      for (const req of batch) {
        const [op, protocol, src, sport, dst, dport, , timeout, mark, state] = req.split(' ');
        const key = connectionKey({ protocol: protocol as 'tcp', client: { address: src!, port: Number(sport) }, vip: { address: dst!, port: Number(dport) } });
        const had = this.table.get(key);
        if (!had) { codes += '-'; continue; }
        if (op === 'D') this.table.delete(key);
        else this.table.set(key, { ...had, timeoutSec: Number(timeout), mark: Number(mark), state: ['NONE', 'SYN_SENT', 'SYN_RECV', 'ESTABLISHED', 'FIN_WAIT'][Number(state)] ?? had.state });
        codes += '+';
      }
      const n = (c: string): number => [...codes].filter((x) => x === c).length;
      child.stdout.write(`R ${n('+')} ${n('-')} 0 ${codes || '.'} -\n`);
      batch = [];
    });
    child.stdin.on('finish', () => { child.exitCode = 0; child.emit('close', 0, null); });
    return child as unknown as ChildProcessWithoutNullStreams;
  }
}

function line(f: SyncedConnection): string {
  const back = f.localAddress ?? f.client;
  return `${f.protocol} 6 ${f.timeoutSec} ${f.state} src=${f.client.address} dst=${f.vip.address} sport=${f.client.port} dport=${f.vip.port} `
    + `src=${f.realServer.address} dst=${back.address} sport=${f.realServer.port} dport=${back.port} [ASSURED] mark=${f.mark} use=1`;
}

describe('ConntrackConnectionTable.apply against a fake conntrack', () => {
  const tables: ConntrackConnectionTable[] = [];
  const tableOf = (runner: CommandRunner): ConntrackConnectionTable => {
    const t = new ConntrackConnectionTable({ runner });
    tables.push(t);
    return t;
  };
  afterEach(async () => { for (const t of tables.splice(0)) await t.dispose(); });

  it('one batch when nothing conflicts', async () => {
    const ct = new FakeConntrack();
    const table = tableOf(ct);
    const res = await table.apply([1, 2, 3].map((p) => ({ op: 'upsert' as const, connection: connection(p) })));
    assert.deepEqual(res, { inserted: 3, replaced: 0, refreshed: 0, removed: 0, failed: 0, errors: [] });
    assert.deepEqual(ct.calls, ['-R']);
  });

  it('batch files go in a directory named by pid; one a killed process left is removed by the next table', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lbd-ct-test-'));
    try {
      const dead = spawnSync('true').pid!;
      for (const name of [`lbd-connections-${dead}-AbC123`, `lbd-connections-1-keep`, 'unrelated']) mkdirSync(join(dir, name));
      const table = new ConntrackConnectionTable({ runner: new FakeConntrack(), tmpDir: dir });
      await table.apply([{ op: 'upsert', connection: connection(1) }]);
      const mine = readdirSync(dir).filter((n) => n.startsWith(`lbd-connections-${process.pid}-`));
      assert.equal(mine.length, 1);
      assert.deepEqual(readdirSync(dir).filter((n) => !mine.includes(n)).sort(), ['lbd-connections-1-keep', 'unrelated'], 'the dead process\'s directory is gone, a live one\'s and others stay');
      await table.dispose();
      assert.deepEqual(readdirSync(dir).sort(), ['lbd-connections-1-keep', 'unrelated']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('after a batch stops at a conflict: replaces, refreshes, skips and inserts the rest, and counts each', async () => {
    const ct = new FakeConntrack();
    ct.table.set(connectionKey(connection(2)), connection(2, { realServer: { address: '198.19.1.12', port: 8080 } }));
    ct.table.set(connectionKey(connection(3)), connection(3, { state: 'SYN_RECV', timeoutSec: 50 }));
    ct.table.set(connectionKey(connection(4)), connection(4, { timeoutSec: 299 }));
    ct.table.set(connectionKey(connection(5)), connection(5));
    const table = tableOf(ct);
    const res = await table.apply([
      { op: 'upsert', connection: connection(1) },
      { op: 'upsert', connection: connection(2) }, // there with another real server: replaced
      { op: 'upsert', connection: connection(3) }, // there with the same binding, behind: refreshed with -U
      { op: 'upsert', connection: connection(4) }, // there as it should be: counted refreshed, nothing run
      { op: 'remove', connection: connection(9) }, // absent: skipped
      { op: 'remove', connection: connection(5) },
      { op: 'upsert', connection: connection(6) },
    ]);
    assert.deepEqual({ ...res, errors: [] }, { inserted: 2, replaced: 1, refreshed: 2, removed: 1, failed: 0, errors: [] });
    assert.match(res.errors[0]!, /Such conntrack exists/);
    assert.deepEqual(ct.calls, ['-R', '-L', '-U', '-R']);
    assert.equal(ct.table.get(connectionKey(connection(2)))!.realServer.address, '198.19.1.11');
    assert.equal(ct.table.get(connectionKey(connection(3)))!.state, 'ESTABLISHED');
    assert.equal(ct.table.has(connectionKey(connection(5))), false);
    assert.equal(ct.table.has(connectionKey(connection(6))), true);
  });

  it('an entry the kernel keeps refusing is given up; the ones after it are still made', async () => {
    const ct = new FakeConntrack();
    ct.reject.add(connectionKey(connection(2)));
    const table = tableOf(ct);
    const res = await table.apply([1, 2, 3, 4].map((p) => ({ op: 'upsert' as const, connection: connection(p) })));
    assert.equal(res.inserted, 3);
    assert.equal(res.failed, 1);
    assert.ok(res.errors.some((e) => e.startsWith(connectionKey(connection(2))) && e.includes('not enough memory')), res.errors.join('\n'));
    assert.deepEqual([...ct.table.keys()].sort(), [1, 3, 4].map((p) => connectionKey(connection(p))).sort());
  });

  it('invalid connections fail alone; the last change to a connection wins', async () => {
    const ct = new FakeConntrack();
    const table = tableOf(ct);
    const res = await table.apply([
      { op: 'upsert', connection: connection(1, { state: 'BOGUS' }) },
      { op: 'upsert', connection: connection(2) },
      { op: 'upsert', connection: connection(3) },
      { op: 'remove', connection: connection(3) },
    ]);
    assert.equal(res.inserted, 1);
    assert.equal(res.failed, 1);
    assert.match(res.errors[0]!, /tcp state BOGUS/);
    assert.deepEqual([...ct.table.keys()], [connectionKey(connection(2))]);
  });

  it('with the helper: removes, the delete half of replaces and refreshes go through ctnetlink; -R only inserts', async () => {
    const ct = new FakeConntrackWithHelper();
    ct.table.set(connectionKey(connection(2)), connection(2, { realServer: { address: '198.19.1.12', port: 8080 } }));
    ct.table.set(connectionKey(connection(3)), connection(3, { state: 'SYN_RECV', timeoutSec: 50 }));
    ct.table.set(connectionKey(connection(5)), connection(5));
    const table = tableOf(ct);
    const res = await table.apply([
      { op: 'upsert', connection: connection(1) },
      { op: 'upsert', connection: connection(2) }, // there with another real server: replaced
      { op: 'upsert', connection: connection(3) }, // there with the same binding, behind: refreshed by an update request
      { op: 'remove', connection: connection(9) }, // absent: skipped
      { op: 'remove', connection: connection(5) },
      { op: 'upsert', connection: connection(6) },
    ]);
    assert.deepEqual({ ...res, errors: [] }, { inserted: 2, replaced: 1, refreshed: 1, removed: 1, failed: 0, errors: [] });
    // Round 0 deletes the removes, then its -R stops at connection 2 (there); round 1 deletes 2's old entry and updates 3.
    assert.deepEqual(ct.calls, ['-R', '-L', '-R']);
    assert.deepEqual(ct.helperBatches.map((b) => b.map((r) => r.split(' ').slice(0, 4).join(' '))), [
      ['D tcp 198.18.0.2 9', 'D tcp 198.18.0.2 5'],
      ['D tcp 198.18.0.2 2', 'U tcp 198.18.0.2 3'],
    ]);
    assert.equal(ct.table.get(connectionKey(connection(2)))!.realServer.address, '198.19.1.11');
    assert.equal(ct.table.get(connectionKey(connection(3)))!.state, 'ESTABLISHED');
    assert.equal(ct.table.has(connectionKey(connection(5))), false);
    assert.equal(ct.table.has(connectionKey(connection(6))), true);
  });

  it('with the helper: a large remove batch is one ctnetlink batch: no dump, no conntrack -D', async () => {
    const ct = new FakeConntrackWithHelper();
    for (let p = 1; p <= 300; p++) ct.table.set(connectionKey(connection(p)), connection(p));
    const res = await tableOf(ct).apply(Array.from({ length: 400 }, (_, i) => ({ op: 'remove' as const, connection: connection(i + 1) })));
    assert.deepEqual(res, { inserted: 0, replaced: 0, refreshed: 0, removed: 300, failed: 0, errors: [] });
    assert.equal(ct.table.size, 0);
    assert.deepEqual(ct.calls, []);
    assert.equal(ct.helperBatches.length, 1);
    assert.equal(ct.helperBatches[0]!.length, 400);
  });

  it('with the helper: a resync of a large batch that is all there counts refreshes, even when entries expire during its -R', async () => {
    const ct = new FakeConntrackWithHelper();
    const changes = Array.from({ length: 300 }, (_, i) => ({ op: 'upsert' as const, connection: connection(i + 1) }));
    const table = tableOf(ct);
    assert.equal((await table.apply(changes)).inserted, 300);
    // Two other entries time out while the second -R runs: the table shrinks although nothing failed to be made.
    for (const port of [60001, 60002]) {
      const other = connection(port, { protocol: 'udp' });
      ct.table.set(connectionKey(other), other);
      ct.expireDuringBatch.add(connectionKey(other));
    }
    const again = await table.apply(changes);
    assert.deepEqual({ ...again, errors: [] }, { inserted: 0, replaced: 0, refreshed: 300, removed: 0, failed: 0, errors: [] });
    assert.equal(ct.table.size, 300);
  });

  it('with the helper: it ends when idle, and the next batch starts another', async () => {
    const ct = new FakeConntrackWithHelper();
    ct.table.set(connectionKey(connection(1)), connection(1));
    ct.table.set(connectionKey(connection(2)), connection(2));
    const table = new ConntrackConnectionTable({ runner: ct, helperIdleMs: 10 });
    tables.push(table);
    assert.equal((await table.apply([{ op: 'remove', connection: connection(1) }])).removed, 1);
    await new Promise((r) => setTimeout(r, 30));
    assert.equal((await table.apply([{ op: 'remove', connection: connection(2) }])).removed, 1);
    assert.equal(ct.spawns, 2);
  });

  it('with the helper: a missing perl is CommandMissing', async () => {
    const ct = new FakeConntrackWithHelper();
    ct.missingPerl = true;
    await assert.rejects(tableOf(ct).apply([{ op: 'remove', connection: connection(1) }]), /CommandMissing: perl not found/);
  });

  it('throws when conntrack itself cannot run', async () => {
    const missing: CommandRunner = { run: async () => ({ code: 127, stdout: '', stderr: 'conntrack: command not found' }) };
    await assert.rejects(tableOf(missing).apply([{ op: 'upsert', connection: connection(1) }]), /CommandMissing/);
    await assert.rejects(tableOf(missing).dump(), /CommandMissing/);
  });
});
