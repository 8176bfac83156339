import assert from 'node:assert/strict';
import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { createInterface } from 'node:readline';
import { PassThrough } from 'node:stream';
import { connectionKey, type SyncedConnection } from '@lbd/dataplane';
import { ConntrackConnectionTable, NATIVE_CTNL_HELPER, connectionFromEntry, invalidConnection, needsRefresh } from './connection-table.js';
import { TCP_STATE_NAMES, parseProxyFields, renderProxyFields } from './ctnetlink.js';
import { parseConntrack } from './conntrack.js';
import type { CommandResult, CommandRunner } from './runner.js';

const fullnat: SyncedConnection = {
  protocol: 'tcp', client: { address: '198.18.0.2', port: 40000 }, vip: { address: '198.18.0.10', port: 80 },
  realServer: { address: '198.19.1.11', port: 8080 }, localAddress: { address: '198.19.1.100', port: 20001 },
  mark: 65537, state: 'ESTABLISHED', timeoutSec: 300,
};
/** Connection `port`: its own client port and local port (no two share a reply tuple). */
const connection = (port: number, over: Partial<SyncedConnection> = {}): SyncedConnection => ({
  ...fullnat, client: { address: '198.18.0.2', port }, localAddress: { address: '198.19.1.100', port: 20_000 + port }, ...over,
});

describe('ConntrackConnectionTable: bindings (event lines: ctnetlink.test.ts)', () => {
  it('a reply to the client address on another port is fullnat, not nat', () => {
    const [e] = parseConntrack('tcp 6 10 ESTABLISHED src=198.18.0.2 dst=198.18.0.10 sport=40000 dport=80 src=198.19.1.11 dst=198.18.0.2 sport=8080 dport=40001 [ASSURED] mark=1');
    assert.deepEqual(connectionFromEntry(e!).localAddress, { address: '198.18.0.2', port: 40001 });
  });
});

describe('ConntrackConnectionTable: checking connections', () => {
  it('refuses, before anything is sent, what the kernel would refuse', () => {
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

  it('refreshes a SYN-proxied connection whose numbers the kernel lacks or has otherwise; refuses numbers that are not u32, or on udp', () => {
    const seqAdjust = { original: { correctionPos: 0, offsetBefore: 0, offsetAfter: 0 }, reply: { correctionPos: 0, offsetBefore: 77, offsetAfter: 77 } };
    const proxied: SyncedConnection = { ...fullnat, synProxy: { isn: 12345, its: 0, tsoff: 0 }, seqAdjust };
    assert.equal(needsRefresh(fullnat, proxied), true, 'a copy made before the server answered the proxy');
    assert.equal(needsRefresh({ ...proxied, seqAdjust: { ...seqAdjust, reply: { correctionPos: 0, offsetBefore: 78, offsetAfter: 78 } } }, proxied), true);
    assert.equal(needsRefresh(proxied, proxied), false);
    assert.equal(needsRefresh(proxied, fullnat), false, 'nothing to say of the numbers: they stay');
    assert.equal(invalidConnection(proxied), null);
    assert.match(invalidConnection({ ...proxied, protocol: 'udp', state: 'ASSURED' })!, /udp/);
    assert.match(invalidConnection({ ...proxied, synProxy: { isn: -1, its: 0, tsoff: 0 } })!, /synProxy/);
    assert.match(invalidConnection({ ...proxied, seqAdjust: { ...seqAdjust, original: { correctionPos: 2 ** 32, offsetBefore: 0, offsetAfter: 0 } } })!, /seqAdjust/);
  });
});

/**
 * A conntrack in memory: `conntrack -L` lists it, and the write helper (`spawn` of lbd-ctnl or perl in mode
 * `write`: D/U/I lines, batches ended by `.`) changes it as the kernel would: ENOENT for a delete or update of
 * an absent entry, EEXIST for an insert whose original or reply tuple an entry has.
 */
class FakeConntrack implements CommandRunner {
  readonly table = new Map<string, SyncedConnection>();
  /** conntrack runs (the write helper's requests are in helperBatches). */
  readonly calls: string[] = [];
  readonly helperBatches: string[][] = [];
  /** Keys whose insert the kernel refuses (as when the table is full). */
  readonly reject = new Set<string>();
  missingHelper = false;
  spawns = 0;
  /** Runs after a `conntrack -L` has listed the table. */
  afterDump: (() => void) | null = null;

  async run(command: string, args: readonly string[]): Promise<CommandResult> {
    // A listing, as either program gives it: lbd-ctnl's dump where it was built, conntrack -L otherwise.
    const dump = command === NATIVE_CTNL_HELPER && args[0] === 'dump';
    if (dump || (command === 'conntrack' && args[0] === '-L')) {
      this.calls.push('list');
      const stdout = [...this.table.values()].map(dump ? dumpLine : line).join('\n');
      this.afterDump?.();
      return { code: 0, stdout, stderr: '' };
    }
    assert.equal(command, 'conntrack');
    this.calls.push(args[0]!);
    return { code: 1, stdout: '', stderr: `the fake does not run conntrack ${args.join(' ')}` };
  }

  spawn(command: string, args: readonly string[]): ChildProcessWithoutNullStreams {
    assert.ok(command === 'perl' ? args[2] === 'write' : args[0] === 'write', `${command} ${args.join(' ')}`);
    this.spawns++;
    const child = Object.assign(new EventEmitter(), {
      stdin: new PassThrough(), stdout: new PassThrough(), stderr: new PassThrough(), exitCode: null as number | null, signalCode: null,
      kill: () => { child.exitCode = 0; child.emit('close', null, 'SIGTERM'); return true; },
    });
    if (this.missingHelper) {
      setImmediate(() => { child.stderr.write('exec of "perl" failed: No such file or directory\n'); setImmediate(() => child.emit('close', 255, null)); });
      return child as unknown as ChildProcessWithoutNullStreams;
    }
    let batch: string[] = [];
    createInterface({ input: child.stdin }).on('line', (l) => {
      if (l !== '.') { batch.push(l); return; }
      this.helperBatches.push(batch);
      let codes = '';
      let first = '-';
      for (const req of batch) {
        const code = this.request(req.split(' '));
        if (code === '!' && first === '-') first = '12 Cannot allocate memory';
        codes += code;
      }
      const n = (c: string): number => [...codes].filter((x) => x === c).length;
      child.stdout.write(`R ${n('+')} ${n('-')} ${n('!')} ${codes || '.'} ${first}\n`);
      batch = [];
    });
    child.stdin.on('finish', () => { child.exitCode = 0; child.emit('close', 0, null); });
    return child as unknown as ChildProcessWithoutNullStreams;
  }

  private request(fields: readonly string[]): string {
    const [op, protocol, src, sport, dst, dport, , timeout, mark, state, dnat, dnatPort, snat, snatPort] = fields;
    // The SYN proxy's two fields end an update and an insert.
    const proxy = fields.length >= 12 ? parseProxyFields(fields[fields.length - 2]!, fields[fields.length - 1]!) : {};
    if (proxy === undefined) return '!';
    if (op === 'X') {
      // By reply tuple: the real server, then the local address (or the client).
      const holder = [...this.table.entries()].find(([, c]) => c.protocol === protocol && c.realServer.address === src && c.realServer.port === Number(sport)
        && (c.localAddress ?? c.client).address === dst && (c.localAddress ?? c.client).port === Number(dport));
      if (!holder) return '-';
      this.table.delete(holder[0]);
      return '+';
    }
    const id = { protocol: protocol as 'tcp', client: { address: src!, port: Number(sport) }, vip: { address: dst!, port: Number(dport) } };
    const key = connectionKey(id);
    const had = this.table.get(key);
    const tcpState = TCP_STATE_NAMES[Number(state)];
    if (op === 'I') {
      const f: SyncedConnection = {
        ...id, realServer: { address: dnat!, port: Number(dnatPort) }, localAddress: snat === '-' ? null : { address: snat!, port: Number(snatPort) },
        mark: Number(mark), state: tcpState ?? 'ASSURED', timeoutSec: Number(timeout), ...proxy,
      };
      const reply = (c: SyncedConnection): string => JSON.stringify([c.protocol, c.realServer, c.localAddress ?? c.client]);
      if (had || [...this.table.values()].some((c) => reply(c) === reply(f))) return '=';
      if (this.reject.has(key)) return '!';
      this.table.set(key, f);
      return '+';
    }
    if (!had) return '-';
    if (op === 'D') this.table.delete(key);
    else this.table.set(key, { ...had, timeoutSec: Number(timeout), mark: Number(mark), state: tcpState ?? had.state, ...proxy });
    return '+';
  }
}

/** The same entry as lbd-ctnl's dump gives it (status 14: seen reply, assured, confirmed). */
function dumpLine(f: SyncedConnection): string {
  const back = f.localAddress ?? f.client;
  return `E 14 ${f.protocol} ${f.client.address} ${f.client.port} ${f.vip.address} ${f.vip.port} `
    + `${f.realServer.address} ${f.realServer.port} ${back.address} ${back.port} ${f.state} ${f.timeoutSec} ${f.mark} ${renderProxyFields(f)}`;
}

function line(f: SyncedConnection): string {
  const back = f.localAddress ?? f.client;
  return `${f.protocol} 6 ${f.timeoutSec} ${f.state} src=${f.client.address} dst=${f.vip.address} sport=${f.client.port} dport=${f.vip.port} `
    + `src=${f.realServer.address} dst=${back.address} sport=${f.realServer.port} dport=${back.port} [ASSURED] mark=${f.mark} use=1`;
}

describe('ConntrackConnectionTable.apply against a fake conntrack', () => {
  const tables: ConntrackConnectionTable[] = [];
  const tableOf = (runner: CommandRunner, opts: { helperIdleMs?: number } = {}): ConntrackConnectionTable => {
    const t = new ConntrackConnectionTable({ runner, ...opts });
    tables.push(t);
    return t;
  };
  afterEach(async () => { for (const t of tables.splice(0)) await t.dispose(); });
  const requests = (ct: FakeConntrack): string[][] => ct.helperBatches.map((b) => b.map((r) => r.split(' ').slice(0, 4).join(' ')));

  it('one batch of inserts when nothing conflicts: no conntrack run, no dump', async () => {
    const ct = new FakeConntrack();
    const res = await tableOf(ct).apply([1, 2, 3].map((p) => ({ op: 'upsert' as const, connection: connection(p) })));
    assert.deepEqual(res, { inserted: 3, replaced: 0, refreshed: 0, removed: 0, failed: 0, errors: [] });
    assert.deepEqual(ct.calls, []);
    assert.deepEqual(requests(ct), [['I tcp 198.18.0.2 1', 'I tcp 198.18.0.2 2', 'I tcp 198.18.0.2 3']]);
    assert.deepEqual(ct.table.get(connectionKey(connection(2))), connection(2));
  });

  it('inserts that meet entries: one dump plans them; replaces, refreshes, skips and inserts, and counts each', async () => {
    const ct = new FakeConntrack();
    ct.table.set(connectionKey(connection(2)), connection(2, { realServer: { address: '198.19.1.12', port: 8080 } }));
    ct.table.set(connectionKey(connection(3)), connection(3, { state: 'SYN_RECV', timeoutSec: 50 }));
    ct.table.set(connectionKey(connection(4)), connection(4, { timeoutSec: 299 }));
    ct.table.set(connectionKey(connection(5)), connection(5));
    const res = await tableOf(ct).apply([
      { op: 'upsert', connection: connection(1) },
      { op: 'upsert', connection: connection(2) }, // there with another real server: replaced
      { op: 'upsert', connection: connection(3) }, // there with the same binding, behind: refreshed by an update request
      { op: 'upsert', connection: connection(4) }, // there as it should be: counted refreshed, nothing sent
      { op: 'remove', connection: connection(9) }, // absent: skipped
      { op: 'remove', connection: connection(5) },
      { op: 'upsert', connection: connection(6) },
    ]);
    assert.deepEqual(res, { inserted: 2, replaced: 1, refreshed: 2, removed: 1, failed: 0, errors: [] });
    assert.deepEqual(ct.calls, ['list']);
    assert.deepEqual(requests(ct), [
      ['I tcp 198.18.0.2 1', 'I tcp 198.18.0.2 2', 'I tcp 198.18.0.2 3', 'I tcp 198.18.0.2 4', 'D tcp 198.18.0.2 9', 'D tcp 198.18.0.2 5', 'I tcp 198.18.0.2 6'],
      ['D tcp 198.18.0.2 2', 'I tcp 198.18.0.2 2', 'U tcp 198.18.0.2 3'],
    ]);
    assert.equal(ct.table.get(connectionKey(connection(2)))!.realServer.address, '198.19.1.11');
    assert.equal(ct.table.get(connectionKey(connection(3)))!.state, 'ESTABLISHED');
    assert.equal(ct.table.has(connectionKey(connection(5))), false);
    assert.equal(ct.table.has(connectionKey(connection(6))), true);
  });

  it('an insert the kernel refuses fails alone, with the kernel\'s reason; the rest are made in the same batch', async () => {
    const ct = new FakeConntrack();
    ct.reject.add(connectionKey(connection(2)));
    const res = await tableOf(ct).apply([1, 2, 3, 4].map((p) => ({ op: 'upsert' as const, connection: connection(p) })));
    assert.deepEqual({ ...res, errors: [] }, { inserted: 3, replaced: 0, refreshed: 0, removed: 0, failed: 1, errors: [] });
    assert.deepEqual(res.errors, ['ctnetlink: 1 of 4 request(s) failed, the first with 12 Cannot allocate memory']);
    assert.equal(ct.helperBatches.length, 1);
    assert.deepEqual([...ct.table.keys()].sort(), [1, 3, 4].map((p) => connectionKey(connection(p))).sort());
  });

  it('an insert whose reply tuple another entry holds is given up after two dumps, naming the connection', async () => {
    const ct = new FakeConntrack();
    ct.table.set(connectionKey(connection(7)), connection(7));
    const taken = connection(8, { localAddress: connection(7).localAddress });
    const res = await tableOf(ct).apply([{ op: 'upsert', connection: taken }, { op: 'upsert', connection: connection(9) }]);
    assert.deepEqual({ ...res, errors: [] }, { inserted: 1, replaced: 0, refreshed: 0, removed: 0, failed: 1, errors: [] });
    assert.deepEqual(res.errors, [`${connectionKey(connection(8))}: the kernel has another entry with this connection's reply tuple (EEXIST)`]);
    assert.deepEqual(ct.calls, ['list', 'list']);
  });

  it('an insert whose reply tuple another entry holds replaces that entry when the caller lets it go (a leftover), and only then', async () => {
    const ct = new FakeConntrack();
    const leftover = connection(7);
    const ours = connection(20, { mark: 0 });
    ct.table.set(connectionKey(leftover), leftover);
    ct.table.set(connectionKey(ours), ours);
    const taken = connection(8, { localAddress: leftover.localAddress });
    const notOurs = connection(21, { localAddress: ours.localAddress });
    const offered: string[] = [];
    const res = await tableOf(ct).apply([{ op: 'upsert', connection: taken }, { op: 'upsert', connection: notOurs }], {
      evictReplyHolder: (holder) => { offered.push(connectionKey(holder)); return true; },
    });
    assert.deepEqual({ ...res, errors: [] }, { inserted: 0, replaced: 1, refreshed: 0, removed: 0, failed: 1, errors: [] });
    assert.deepEqual(offered, [connectionKey(leftover)], 'an entry with mark 0 is not lbd\'s: never offered');
    assert.deepEqual([...ct.table.keys()].sort(), [connectionKey(taken), connectionKey(ours)].sort());
    assert.deepEqual(res.errors, [`${connectionKey(notOurs)}: the kernel has another entry with this connection's reply tuple (EEXIST)`]);

    // Refused: the holder stays, the upsert fails as without the option.
    const again = new FakeConntrack();
    again.table.set(connectionKey(leftover), leftover);
    const kept = await tableOf(again).apply([{ op: 'upsert', connection: taken }], { evictReplyHolder: () => false });
    assert.deepEqual([kept.failed, [...again.table.keys()]], [1, [connectionKey(leftover)]]);
  });

  it('a remove of a binding removes the entry only while it has that binding (by reply tuple): a copy put over it since stays', async () => {
    const ct = new FakeConntrack();
    const leftover = connection(1, { localAddress: { address: '198.19.1.80', port: 40001 } });
    const live = connection(1, { localAddress: { address: '198.19.1.88', port: 40001 } });
    ct.table.set(connectionKey(live), live);
    const kept = await tableOf(ct).apply([{ op: 'remove-binding', connection: leftover }]);
    assert.deepEqual(kept, { inserted: 0, replaced: 0, refreshed: 0, removed: 0, failed: 0, errors: [] });
    assert.deepEqual(ct.table.get(connectionKey(live)), live);
    assert.deepEqual(requests(ct), [['X tcp 198.19.1.11 8080']]);
    const gone = await tableOf(ct).apply([{ op: 'remove-binding', connection: live }]);
    assert.equal(gone.removed, 1);
    assert.equal(ct.table.size, 0);
  });

  it('a remove is checked by the connection it names only: a dumped entry about to expire (timeoutSec 0) is removed', async () => {
    const ct = new FakeConntrack();
    ct.table.set(connectionKey(connection(1)), connection(1, { timeoutSec: 0 }));
    const res = await tableOf(ct).apply([{ op: 'remove', connection: connection(1, { timeoutSec: 0 }) }]);
    assert.deepEqual(res, { inserted: 0, replaced: 0, refreshed: 0, removed: 1, failed: 0, errors: [] });
    assert.equal(ct.table.size, 0);
  });

  it('invalid connections fail alone; the last change to a connection wins', async () => {
    const ct = new FakeConntrack();
    const res = await tableOf(ct).apply([
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

  it('a large remove batch is one batch: no dump', async () => {
    const ct = new FakeConntrack();
    for (let p = 1; p <= 300; p++) ct.table.set(connectionKey(connection(p)), connection(p));
    const res = await tableOf(ct).apply(Array.from({ length: 400 }, (_, i) => ({ op: 'remove' as const, connection: connection(i + 1) })));
    assert.deepEqual(res, { inserted: 0, replaced: 0, refreshed: 0, removed: 300, failed: 0, errors: [] });
    assert.equal(ct.table.size, 0);
    assert.deepEqual(ct.calls, []);
    assert.equal(ct.helperBatches.length, 1);
    assert.equal(ct.helperBatches[0]!.length, 400);
  });

  it('a resync of a large batch that is all there counts refreshes and writes nothing after one dump', async () => {
    const ct = new FakeConntrack();
    const changes = Array.from({ length: 300 }, (_, i) => ({ op: 'upsert' as const, connection: connection(i + 1) }));
    const table = tableOf(ct);
    assert.equal((await table.apply(changes)).inserted, 300);
    const again = await table.apply(changes);
    assert.deepEqual(again, { inserted: 0, replaced: 0, refreshed: 300, removed: 0, failed: 0, errors: [] });
    assert.deepEqual(ct.calls, ['list']);
    assert.equal(ct.helperBatches.length, 2);
    assert.equal(ct.table.size, 300);
  });

  it('a refresh whose entry vanished after the dump is planned again and inserted', async () => {
    const ct = new FakeConntrack();
    ct.table.set(connectionKey(connection(3)), connection(3, { state: 'SYN_RECV' }));
    // The entry expires right after the first dump, which planned it as a refresh.
    ct.afterDump = () => { ct.table.delete(connectionKey(connection(3))); ct.afterDump = null; };
    const res = await tableOf(ct).apply([{ op: 'upsert', connection: connection(3) }]);
    assert.deepEqual(res, { inserted: 1, replaced: 0, refreshed: 0, removed: 0, failed: 0, errors: [] });
    assert.deepEqual(requests(ct), [['I tcp 198.18.0.2 3'], ['U tcp 198.18.0.2 3'], ['I tcp 198.18.0.2 3']]);
    assert.deepEqual(ct.table.get(connectionKey(connection(3))), connection(3));
  });

  it('the helper ends when idle, and the next batch starts another', async () => {
    const ct = new FakeConntrack();
    ct.table.set(connectionKey(connection(1)), connection(1));
    ct.table.set(connectionKey(connection(2)), connection(2));
    const table = tableOf(ct, { helperIdleMs: 10 });
    assert.equal((await table.apply([{ op: 'remove', connection: connection(1) }])).removed, 1);
    await new Promise((r) => setTimeout(r, 30));
    assert.equal((await table.apply([{ op: 'remove', connection: connection(2) }])).removed, 1);
    assert.equal(ct.spawns, 2);
  });

  it('a helper that cannot start is CommandMissing; a runner that cannot spawn is refused', async () => {
    const ct = new FakeConntrack();
    ct.missingHelper = true;
    await assert.rejects(new ConntrackConnectionTable({ runner: ct, ctnlHelper: 'perl' }).apply([{ op: 'remove', connection: connection(1) }]), /CommandMissing: perl not found/);
    const noSpawn: CommandRunner = { run: async () => ({ code: 0, stdout: '', stderr: '' }) };
    await assert.rejects(tableOf(noSpawn).apply([{ op: 'remove', connection: connection(1) }]), /cannot start long-running processes/);
  });

  it('a dump throws when conntrack itself cannot run', async () => {
    const missing: CommandRunner = { run: async () => ({ code: 127, stdout: '', stderr: 'conntrack: command not found' }) };
    await assert.rejects(tableOf(missing).dump(), /CommandMissing/);
  });
});

describe('ConntrackConnectionTable.watch against a fake events helper', () => {
  /** The helper answers the watch's probe entry with its event, then prints `then` (lines) at once. */
  function eventsRunner(then: string): CommandRunner {
    let child: (EventEmitter & { stdout: PassThrough }) | undefined;
    return {
      run: async (command, args) => {
        assert.equal(command, 'conntrack');
        const sport = args[args.indexOf('--sport') + 1];
        child!.stdout.write(`N 0 udp 127.0.0.1 ${sport} 127.0.0.1 9 127.0.0.1 9 127.0.0.1 ${sport} UNREPLIED 1 0 - -\n`);
        setTimeout(() => child!.stdout.write(then), 5);
        return { code: 0, stdout: '', stderr: '' };
      },
      spawn: (command, args) => {
        assert.deepEqual([command.endsWith('lbd-ctnl'), args[0]], [true, 'events']);
        const c = Object.assign(new EventEmitter(), {
          stdin: new PassThrough(), stdout: new PassThrough(), stderr: new PassThrough(), exitCode: null as number | null, signalCode: null,
          kill: () => { c.exitCode = 0; c.emit('close', null, 'SIGTERM'); return true; },
        });
        child = c;
        setImmediate(() => c.stdout.write('R 33554432\n'));
        return c as unknown as ChildProcessWithoutNullStreams;
      },
    };
  }
  const event = (port: number): string => `U 0 tcp 198.18.0.2 ${port} 198.18.0.10 80 198.19.1.11 8080 198.19.1.100 ${20_000 + port} ESTABLISHED 300 65537 - -\n`;

  it('dates events by the helper\'s A line (when it read them), not by when they reached the agent', async () => {
    const got: Array<{ port: number; ageMs: number }> = [];
    let done: () => void = () => {};
    const all = new Promise<void>((r) => { done = r; });
    const table = new ConntrackConnectionTable({ runner: eventsRunner(`A 40000\n${event(1)}${event(2)}A 0\n${event(3)}`), ctnlHelper: 'native' });
    const watch = await table.watch({
      onEvents: (events) => {
        const now = performance.now();
        for (const e of events) got.push({ port: e.connection.client.port, ageMs: now - e.seenAtMs });
        if (got.length === 3) done();
      },
      onLoss: (reason) => assert.fail(reason),
    });
    await all;
    await watch.close();
    assert.deepEqual(got.map((g) => g.port), [1, 2, 3]);
    // 40 ms before they arrived (a little more: the callback runs after the read), and the next window's now.
    for (const g of got.slice(0, 2)) assert.ok(g.ageMs >= 40 && g.ageMs < 1000, `aged ${g.ageMs} ms`);
    assert.ok(got[2]!.ageMs < 40, `aged ${got[2]!.ageMs} ms`);
  });
});
