import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { flowKey, type SyncedFlow } from '@lbd/dataplane';
import { ConntrackFlowTable, flowFromEntry, invalidFlow, needsRefresh, parseFlowEvent, renderInsert, renderRefresh, renderRemove } from './flow-table.js';
import { parseConntrack } from './conntrack.js';
import type { CommandResult, CommandRunner } from './runner.js';

const fullnat: SyncedFlow = {
  protocol: 'tcp', client: { address: '198.18.0.2', port: 40000 }, vip: { address: '198.18.0.10', port: 80 },
  realServer: { address: '198.19.1.11', port: 8080 }, localAddress: { address: '198.19.1.100', port: 20001 },
  mark: 65537, state: 'ESTABLISHED', timeoutSec: 300,
};
const flow = (port: number, over: Partial<SyncedFlow> = {}): SyncedFlow => ({ ...fullnat, client: { address: '198.18.0.2', port }, ...over });

describe('ConntrackFlowTable: event lines and bindings', () => {
  it('reads a NEW event made by a program ([USERSPACE]) in fullnat mode', () => {
    const ev = parseFlowEvent('    [NEW] ipv4     2 tcp      6 300 ESTABLISHED src=198.18.0.2 dst=198.18.0.10 sport=40000 dport=80 src=198.19.1.11 dst=198.19.1.100 sport=8080 dport=20001 [ASSURED] mark=65537 id=169678095 [USERSPACE] portid=2711', 7);
    assert.deepEqual(ev, { kind: 'new', injected: true, seenAtMs: 7, flow: fullnat });
  });

  it('reads UPDATE and DESTROY from packets; an expired entry has no timeout column', () => {
    const up = parseFlowEvent(' [UPDATE] ipv4     2 tcp      6 60 SYN_RECV src=198.18.0.2 dst=198.18.0.10 sport=40000 dport=80 src=198.19.1.11 dst=198.19.1.100 sport=8080 dport=20001 mark=65537 id=1', 0);
    assert.equal(up?.kind, 'update');
    assert.equal(up?.injected, false);
    assert.equal(up?.flow.state, 'SYN_RECV');
    const gone = parseFlowEvent('[DESTROY] ipv4     2 tcp      6 TIME_WAIT src=198.18.0.2 dst=198.18.0.10 sport=40000 dport=80 src=198.19.1.11 dst=198.19.1.100 sport=8080 dport=20001 [ASSURED] mark=65537 id=1', 0);
    assert.equal(gone?.kind, 'destroy');
    assert.equal(gone?.flow.state, 'TIME_WAIT');
    assert.equal(gone?.flow.timeoutSec, 0);
    assert.deepEqual(gone?.flow.localAddress, { address: '198.19.1.100', port: 20001 });
  });

  it('nat mode (the real server answers the client): no local address; IPv6 and udp', () => {
    const ev = parseFlowEvent('    [NEW] ipv6     10 udp      17 30 src=fd00:18::2 dst=fd00:18::10 sport=5000 dport=53 [UNREPLIED] src=fd00:19::11 dst=fd00:18::2 sport=5353 dport=5000 mark=131074 id=9 [USERSPACE] portid=1', 0);
    assert.deepEqual(ev?.flow, {
      protocol: 'udp', client: { address: 'fd00:18::2', port: 5000 }, vip: { address: 'fd00:18::10', port: 53 },
      realServer: { address: 'fd00:19::11', port: 5353 }, localAddress: null, mark: 131074, state: 'UNREPLIED', timeoutSec: 30,
    });
  });

  it('a reply to the client address on another port is fullnat, not nat', () => {
    const [e] = parseConntrack('tcp 6 10 ESTABLISHED src=198.18.0.2 dst=198.18.0.10 sport=40000 dport=80 src=198.19.1.11 dst=198.18.0.2 sport=8080 dport=40001 [ASSURED] mark=1');
    assert.deepEqual(flowFromEntry(e!).localAddress, { address: '198.18.0.2', port: 40001 });
  });

  it('skips what is not one of lbd flows: mark 0, icmp, the ENOBUFS warning, the summary', () => {
    for (const line of [
      '    [NEW] ipv4     2 tcp      6 120 SYN_SENT src=10.0.0.1 dst=10.0.0.2 sport=1 dport=2 [UNREPLIED] src=10.0.0.2 dst=10.0.0.1 sport=2 dport=1 mark=0 id=1',
      '    [NEW] ipv4     2 icmp     1 30 src=10.0.0.1 dst=10.0.0.2 type=8 code=0 id=1 [UNREPLIED] src=10.0.0.2 dst=10.0.0.1 type=0 code=0 id=1 mark=3 id=5',
      'WARNING: We have hit ENOBUFS! We are losing events.',
      'conntrack v1.4.7 (conntrack-tools): 3 flow events have been shown.',
    ]) assert.equal(parseFlowEvent(line, 0), null, line);
  });
});

describe('ConntrackFlowTable: rendering conntrack lines', () => {
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

  it('nat mode has no --src-nat; udp no --state; IPv6 bindings are bracketed; unreplied flows get no status', () => {
    const v6: SyncedFlow = {
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
    assert.equal(invalidFlow(fullnat), null);
    assert.match(invalidFlow({ ...fullnat, state: 'SYN_SENT2' })!, /tcp state/);
    assert.match(invalidFlow({ ...fullnat, realServer: { address: 'fd00::1', port: 80 } })!, /family/);
    assert.match(invalidFlow({ ...fullnat, client: { address: '198.18.0.2', port: 0 } })!, /port 0/);
    assert.match(invalidFlow({ ...fullnat, timeoutSec: 0 })!, /timeoutSec/);
    assert.match(invalidFlow({ ...fullnat, vip: { address: 'vip', port: 80 } })!, /not an IP/);
  });

  it('refreshes only what is behind: state, mark, or a clearly shorter timeout', () => {
    assert.equal(needsRefresh({ ...fullnat, timeoutSec: 295 }, fullnat), false);
    assert.equal(needsRefresh({ ...fullnat, timeoutSec: 200 }, fullnat), true);
    assert.equal(needsRefresh({ ...fullnat, state: 'SYN_RECV' }, fullnat), true);
    assert.equal(needsRefresh({ ...fullnat, mark: 3 }, fullnat), true);
    const udp: SyncedFlow = { ...fullnat, protocol: 'udp', state: 'REPLIED' };
    assert.equal(needsRefresh({ ...udp, state: 'ASSURED' }, udp), false, 'status bits cannot be taken back');
    assert.equal(needsRefresh({ ...udp, state: 'UNREPLIED' }, udp), true);
  });
});

/**
 * A conntrack in memory with 1.4.7's batch behaviour: `-R` stops at the first failing line (an `-I` of an
 * entry that exists), `-D` of an absent entry is not an error and prints what it deleted.
 */
class FakeConntrack implements CommandRunner {
  readonly table = new Map<string, SyncedFlow>();
  readonly calls: string[] = [];
  /** Keys whose -I the kernel rejects (as when the table is full). */
  readonly reject = new Set<string>();

  async run(command: string, args: readonly string[]): Promise<CommandResult> {
    assert.equal(command, 'conntrack');
    this.calls.push(args[0]!);
    if (args[0] === '-L') return { code: 0, stdout: [...this.table.values()].map(line).join('\n'), stderr: '' };
    if (args[0] === '-R') {
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
    const key = flowKey(id);
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

function line(f: SyncedFlow): string {
  const back = f.localAddress ?? f.client;
  return `${f.protocol} 6 ${f.timeoutSec} ${f.state} src=${f.client.address} dst=${f.vip.address} sport=${f.client.port} dport=${f.vip.port} `
    + `src=${f.realServer.address} dst=${back.address} sport=${f.realServer.port} dport=${back.port} [ASSURED] mark=${f.mark} use=1`;
}

describe('ConntrackFlowTable.apply against a fake conntrack', () => {
  const tables: ConntrackFlowTable[] = [];
  const tableOf = (runner: CommandRunner): ConntrackFlowTable => {
    const t = new ConntrackFlowTable({ runner });
    tables.push(t);
    return t;
  };
  afterEach(async () => { for (const t of tables.splice(0)) await t.dispose(); });

  it('one batch when nothing conflicts', async () => {
    const ct = new FakeConntrack();
    const table = tableOf(ct);
    const res = await table.apply([1, 2, 3].map((p) => ({ op: 'upsert' as const, flow: flow(p) })));
    assert.deepEqual(res, { inserted: 3, replaced: 0, refreshed: 0, removed: 0, failed: 0, errors: [] });
    assert.deepEqual(ct.calls, ['-R']);
  });

  it('after a batch stops at a conflict: replaces, refreshes, skips and inserts the rest, and counts each', async () => {
    const ct = new FakeConntrack();
    ct.table.set(flowKey(flow(2)), flow(2, { realServer: { address: '198.19.1.12', port: 8080 } }));
    ct.table.set(flowKey(flow(3)), flow(3, { state: 'SYN_RECV', timeoutSec: 50 }));
    ct.table.set(flowKey(flow(4)), flow(4, { timeoutSec: 299 }));
    ct.table.set(flowKey(flow(5)), flow(5));
    const table = tableOf(ct);
    const res = await table.apply([
      { op: 'upsert', flow: flow(1) },
      { op: 'upsert', flow: flow(2) }, // there with another real server: replaced
      { op: 'upsert', flow: flow(3) }, // there with the same binding, behind: refreshed with -U
      { op: 'upsert', flow: flow(4) }, // there as it should be: counted refreshed, nothing run
      { op: 'remove', flow: flow(9) }, // absent: skipped
      { op: 'remove', flow: flow(5) },
      { op: 'upsert', flow: flow(6) },
    ]);
    assert.deepEqual({ ...res, errors: [] }, { inserted: 2, replaced: 1, refreshed: 2, removed: 1, failed: 0, errors: [] });
    assert.match(res.errors[0]!, /Such conntrack exists/);
    assert.deepEqual(ct.calls, ['-R', '-L', '-U', '-R']);
    assert.equal(ct.table.get(flowKey(flow(2)))!.realServer.address, '198.19.1.11');
    assert.equal(ct.table.get(flowKey(flow(3)))!.state, 'ESTABLISHED');
    assert.equal(ct.table.has(flowKey(flow(5))), false);
    assert.equal(ct.table.has(flowKey(flow(6))), true);
  });

  it('an entry the kernel keeps refusing is given up; the ones after it are still made', async () => {
    const ct = new FakeConntrack();
    ct.reject.add(flowKey(flow(2)));
    const table = tableOf(ct);
    const res = await table.apply([1, 2, 3, 4].map((p) => ({ op: 'upsert' as const, flow: flow(p) })));
    assert.equal(res.inserted, 3);
    assert.equal(res.failed, 1);
    assert.ok(res.errors.some((e) => e.startsWith(flowKey(flow(2))) && e.includes('not enough memory')), res.errors.join('\n'));
    assert.deepEqual([...ct.table.keys()].sort(), [1, 3, 4].map((p) => flowKey(flow(p))).sort());
  });

  it('invalid flows fail alone; the last change to a flow wins', async () => {
    const ct = new FakeConntrack();
    const table = tableOf(ct);
    const res = await table.apply([
      { op: 'upsert', flow: flow(1, { state: 'BOGUS' }) },
      { op: 'upsert', flow: flow(2) },
      { op: 'upsert', flow: flow(3) },
      { op: 'remove', flow: flow(3) },
    ]);
    assert.equal(res.inserted, 1);
    assert.equal(res.failed, 1);
    assert.match(res.errors[0]!, /tcp state BOGUS/);
    assert.deepEqual([...ct.table.keys()], [flowKey(flow(2))]);
  });

  it('throws when conntrack itself cannot run', async () => {
    const missing: CommandRunner = { run: async () => ({ code: 127, stdout: '', stderr: 'conntrack: command not found' }) };
    await assert.rejects(tableOf(missing).apply([{ op: 'upsert', flow: flow(1) }]), /CommandMissing/);
    await assert.rejects(tableOf(missing).dump(), /CommandMissing/);
  });
});
