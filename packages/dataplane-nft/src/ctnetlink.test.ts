import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import type { SyncedConnection } from '@lbd/dataplane';
import { parseConntrackLine } from './conntrack.js';
import { CTNL_SCRIPT, CtnlWriter, parseDump, parseDumpLine, parseEventLine, parseWriteResult, renderDeleteRequest, renderInsertRequest, renderUpdateRequest } from './ctnetlink.js';

const fullnat: SyncedConnection = {
  protocol: 'tcp', client: { address: '198.18.0.2', port: 40000 }, vip: { address: '198.18.0.10', port: 80 },
  realServer: { address: '198.19.1.11', port: 8080 }, localAddress: { address: '198.19.1.100', port: 20001 },
  mark: 65537, state: 'ESTABLISHED', timeoutSec: 300,
};

describe('ctnetlink helper: line protocol', () => {
  it('an event line is the ConnectionEvent conntrack -E would give: fullnat binding, injected from the pid', () => {
    const p = parseEventLine('N 1 tcp 198.18.0.2 40000 198.18.0.10 80 198.19.1.11 8080 198.19.1.100 20001 ESTABLISHED 300 65537 - -', 7);
    assert.deepEqual(p, { type: 'event', event: { kind: 'new', injected: true, seenAtMs: 7, connection: fullnat } });
    const up = parseEventLine('U 0 tcp 198.18.0.2 40000 198.18.0.10 80 198.19.1.11 8080 198.19.1.100 20001 FIN_WAIT 120 65537 - -', 0);
    assert.deepEqual(up?.type === 'event' && [up.event.kind, up.event.injected, up.event.connection.state, up.event.connection.timeoutSec], ['update', false, 'FIN_WAIT', 120]);
  });

  it('nat mode (the reply goes to the client itself): no local address; IPv6; udp states; a destroy without state', () => {
    const p = parseEventLine('N 0 udp fd00:18::2 5000 fd00:18::10 53 fd00:19::11 5353 fd00:18::2 5000 UNREPLIED 30 131074 - -', 0);
    assert.deepEqual(p?.type === 'event' && p.event.connection, {
      protocol: 'udp', client: { address: 'fd00:18::2', port: 5000 }, vip: { address: 'fd00:18::10', port: 53 },
      realServer: { address: 'fd00:19::11', port: 5353 }, localAddress: null, mark: 131074, state: 'UNREPLIED', timeoutSec: 30,
    });
    const gone = parseEventLine('D 0 tcp 198.18.0.2 40000 198.18.0.10 80 198.19.1.11 8080 198.18.0.2 40001 - 0 1 - -', 0);
    assert.ok(gone?.type === 'event');
    assert.equal(gone.event.kind, 'destroy');
    assert.equal(gone.event.connection.state, '');
    // The client's address on another port is a local address (fullnat), not nat.
    assert.deepEqual(gone.event.connection.localAddress, { address: '198.18.0.2', port: 40001 });
  });

  it('ready, loss and age lines; anything else is ignored', () => {
    assert.deepEqual(parseEventLine('R 33554432', 0), { type: 'ready', rcvbufBytes: 33554432 });
    assert.deepEqual(parseEventLine('L ENOBUFS', 0), { type: 'loss', reason: 'ENOBUFS' });
    assert.deepEqual(parseEventLine('A 2150', 0), { type: 'age', ageMs: 2.15 });
    for (const line of ['A', 'A -3', 'A x', '', 'N 1 tcp 1.2.3.4', 'N 1 icmp 1 2 3 4 5 6 7 8 9 10 11', 'K', 'K -1', 'K x', 'Use of uninitialized value at -e line 3.']) assert.equal(parseEventLine(line, 0), null, line);
  });

  it('keep-young\'s answer: a kept handshake (Y) reads as an update of its own type, then K with the count', () => {
    const y = parseEventLine('Y 0 tcp 198.18.0.2 40000 198.18.0.10 80 198.19.1.11 8080 198.19.1.100 20001 SYN_RECV 60 65537 - -', 3);
    assert.ok(y && y.type === 'young');
    assert.deepEqual([y.event.kind, y.event.connection.state, y.event.connection.realServer, y.event.seenAtMs], ['update', 'SYN_RECV', { address: '198.19.1.11', port: 8080 }, 3]);
    assert.deepEqual(parseEventLine('K 2', 0), { type: 'kept', count: 2 });
  });

  it('a dump line is the entry conntrack -L lists: tcp state, udp state and flags from the status bits, mark 0 kept', () => {
    const cases: Array<[string, string]> = [
      ['E 14 tcp 198.18.0.2 40000 198.18.0.10 80 198.19.1.11 8080 198.19.1.100 20001 ESTABLISHED 299 65537 - -',
        'ipv4 2 tcp 6 299 ESTABLISHED src=198.18.0.2 dst=198.18.0.10 sport=40000 dport=80 src=198.19.1.11 dst=198.19.1.100 sport=8080 dport=20001 [ASSURED] mark=65537 use=1'],
      ['E 8 tcp 198.18.0.2 40001 198.18.0.10 80 198.19.1.11 8080 198.18.0.2 40001 SYN_SENT 119 0 - -',
        'ipv4 2 tcp 6 119 SYN_SENT src=198.18.0.2 dst=198.18.0.10 sport=40001 dport=80 [UNREPLIED] src=198.19.1.11 dst=198.18.0.2 sport=8080 dport=40001 mark=0 use=1'],
      ['E 8 udp fd00:18::2 5000 fd00:18::10 53 fd00:19::11 5353 fd00:18::2 5000 UNREPLIED 29 131074 - -',
        'ipv6 10 udp 17 29 src=fd00:18::2 dst=fd00:18::10 sport=5000 dport=53 [UNREPLIED] src=fd00:19::11 dst=fd00:18::2 sport=5353 dport=5000 mark=131074 use=1'],
      ['E 10 udp 198.18.0.2 5001 198.18.0.10 53 198.19.1.11 5353 198.18.0.2 5001 REPLIED 29 7 - -',
        'ipv4 2 udp 17 29 src=198.18.0.2 dst=198.18.0.10 sport=5001 dport=53 src=198.19.1.11 dst=198.18.0.2 sport=5353 dport=5001 mark=7 use=1'],
      ['E 14 udp 198.18.0.2 5002 198.18.0.10 53 198.19.1.11 5353 198.18.0.2 5002 ASSURED 179 7 - -',
        'ipv4 2 udp 17 179 src=198.18.0.2 dst=198.18.0.10 sport=5002 dport=53 src=198.19.1.11 dst=198.18.0.2 sport=5353 dport=5002 [ASSURED] mark=7 use=1'],
    ];
    for (const [dumped, listed] of cases) assert.deepEqual(parseDumpLine(dumped), parseConntrackLine(listed)!.entry, dumped);
    for (const line of ['', 'E 8 tcp 1.2.3.4', 'E 8 icmp 1 2 3 4 5 6 7 8 9 10 11 12', 'N 0 tcp 198.18.0.2 40000 198.18.0.10 80 198.19.1.11 8080 198.19.1.100 20001 ESTABLISHED 300 1']) {
      assert.equal(parseDumpLine(line), null, line);
    }
    assert.deepEqual(parseDump(`${cases[0]![0]}\nwarning: something\n${cases[2]![0]}\n`).map((e) => e.original.src.port), [40000, 5000]);
  });

  it('requests: a delete by original tuple; an update with status bits (CONFIRMED kept), timeout, mark, tcp state number', () => {
    assert.equal(renderDeleteRequest(fullnat), 'D tcp 198.18.0.2 40000 198.18.0.10 80');
    assert.equal(renderUpdateRequest({ ...fullnat, timeoutSec: 119.2 }), 'U tcp 198.18.0.2 40000 198.18.0.10 80 14 120 65537 3 - -');
    assert.equal(renderUpdateRequest({ ...fullnat, state: 'SYN_RECV' }), 'U tcp 198.18.0.2 40000 198.18.0.10 80 10 300 65537 2 - -');
    assert.equal(renderUpdateRequest({ ...fullnat, state: 'SYN_SENT' }), 'U tcp 198.18.0.2 40000 198.18.0.10 80 0 300 65537 1 - -');
    assert.equal(renderUpdateRequest({ ...fullnat, protocol: 'udp', state: 'REPLIED' }), 'U udp 198.18.0.2 40000 198.18.0.10 80 10 300 65537 -1 - -');
    // Behind the kernel's entry: its bits are kept (the kernel refuses to clear them).
    assert.equal(renderUpdateRequest({ ...fullnat, state: 'SYN_RECV' }, fullnat), 'U tcp 198.18.0.2 40000 198.18.0.10 80 14 300 65537 2 - -');
  });

  it('requests: an insert carries the binding: DNAT to the real server, SNAT to the local address in fullnat only', () => {
    assert.equal(renderInsertRequest(fullnat), `I tcp 198.18.0.2 40000 198.18.0.10 80 14 300 65537 3 ${fullnat.realServer.address} ${fullnat.realServer.port} ${fullnat.localAddress!.address} ${fullnat.localAddress!.port} - -`);
    const v6: SyncedConnection = {
      protocol: 'udp', client: { address: 'fd00:18::2', port: 5000 }, vip: { address: 'fd00:18::10', port: 53 },
      realServer: { address: 'fd00:19::11', port: 53 }, localAddress: null, mark: 7, state: 'ASSURED', timeoutSec: 29.5,
    };
    assert.equal(renderInsertRequest(v6), 'I udp fd00:18::2 5000 fd00:18::10 53 14 30 7 -1 fd00:19::11 53 - - - -');
    // Unreplied: no status bits at all (the kernel shows it [UNREPLIED]); replied but not assured: SEEN_REPLY.
    assert.equal(renderInsertRequest({ ...v6, state: 'UNREPLIED' }).split(' ')[6], '0');
    assert.equal(renderInsertRequest({ ...v6, state: 'REPLIED' }).split(' ')[6], '10');
    assert.equal(renderInsertRequest({ ...fullnat, state: 'SYN_SENT' }).split(' ')[6], '0');
    assert.equal(renderInsertRequest({ ...fullnat, state: 'SYN_RECV' }).split(' ')[6], '10');
  });

  it('a SYN-proxied connection\'s numbers: read from event and dump lines, written in updates and inserts, all zero is none', () => {
    const synProxy = { isn: 3_000_000_000, its: 0, tsoff: 0 };
    const seqAdjust = { original: { correctionPos: 0, offsetBefore: 0, offsetAfter: 0 }, reply: { correctionPos: 0, offsetBefore: 4_294_967_295, offsetAfter: 4_294_967_295 } };
    const proxied: SyncedConnection = { ...fullnat, synProxy, seqAdjust };
    const line = 'U 0 tcp 198.18.0.2 40000 198.18.0.10 80 198.19.1.11 8080 198.19.1.100 20001 ESTABLISHED 300 65537 3000000000,0,0 0,0,0,0,4294967295,4294967295';
    const p = parseEventLine(line, 0);
    assert.deepEqual(p?.type === 'event' && p.event.connection, proxied);
    // An event has either only when it changed; a dump has the synproxy extension on every entry ctnetlink made.
    const onlyCookie = parseEventLine('N 0 tcp 198.18.0.2 40000 198.18.0.10 80 198.19.1.11 8080 198.19.1.100 20001 SYN_SENT 120 65537 3000000000,0,0 -', 0);
    assert.deepEqual(onlyCookie?.type === 'event' && [onlyCookie.event.connection.synProxy, onlyCookie.event.connection.seqAdjust], [synProxy, undefined]);
    const dumped = parseDumpLine('E 14 tcp 198.18.0.2 40000 198.18.0.10 80 198.19.1.11 8080 198.19.1.100 20001 ESTABLISHED 299 65537 0,0,0 -');
    assert.ok(dumped && !('synProxy' in dumped) && !('seqAdjust' in dumped), JSON.stringify(dumped));
    assert.deepEqual(parseDumpLine(line.replace('U 0', 'E 14'))?.seqAdjust, seqAdjust);

    assert.equal(renderUpdateRequest(proxied), 'U tcp 198.18.0.2 40000 198.18.0.10 80 14 300 65537 3 3000000000,0,0 0,0,0,0,4294967295,4294967295');
    assert.match(renderInsertRequest(proxied), / 198\.19\.1\.100 20001 3000000000,0,0 0,0,0,0,4294967295,4294967295$/);
    assert.match(renderInsertRequest({ ...fullnat, synProxy }), / 20001 3000000000,0,0 -$/);

    for (const bad of ['3000000000,0', '1,2,x', '4294967296,0,0', '-1,0,0', '1,,2,3']) {
      assert.equal(parseEventLine(line.replace('3000000000,0,0', bad), 0), null, bad);
    }
    assert.equal(parseEventLine(line.replace('0,0,0,0,4294967295,4294967295', '0,0,0,0,1'), 0), null);
  });

  it('a batch result: counts, one code per request, the first error', () => {
    assert.deepEqual(parseWriteResult('R 3 1 1 ++-!+ 22 Invalid argument'), { done: 3, absent: 1, failed: 1, codes: '++-!+', firstError: '22 Invalid argument' });
    assert.deepEqual(parseWriteResult('R 1 0 0 += -'), { done: 1, absent: 0, failed: 0, codes: '+=', firstError: null });
    assert.deepEqual(parseWriteResult('R 0 0 0 . -'), { done: 0, absent: 0, failed: 0, codes: '', firstError: null });
    assert.equal(parseWriteResult('R 33554432'), null);
  });

  it('the script compiles (perl -c)', function () {
    try {
      execFileSync('perl', ['-c', '-e', CTNL_SCRIPT], { stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') this.skip();
      throw e;
    }
  });
});

/**
 * A write helper that speaks the protocol's answer without a kernel: every request of a batch made (`+`).
 */
const ANSWERING_HELPER = `
let n = 0; let partial = '';
process.stdin.setEncoding('utf8').on('data', (d) => {
  const lines = (partial + d).split('\\n'); partial = lines.pop();
  for (const l of lines) {
    if (l !== '.') { n++; continue; }
    process.stdout.write('R ' + n + ' 0 0 ' + (n > 0 ? '+'.repeat(n) : '.') + ' -\\n');
    n = 0;
  }
});`;

describe('CtnlWriter', () => {
  const writer = (): CtnlWriter => new CtnlWriter(() => spawn(process.execPath, ['-e', ANSWERING_HELPER], { stdio: 'pipe' }), { idleMs: 50, timeoutMs: () => 10_000 });

  it('renders a batch a chunk at a time as it writes it, and reads one answer for it all', async () => {
    // How many requests were rendered when each write to the helper happened.
    const renderedAtWrite: number[] = [];
    const rendered: number[] = [];
    const w = new CtnlWriter(() => {
      const child = spawn(process.execPath, ['-e', ANSWERING_HELPER], { stdio: 'pipe' });
      const write = child.stdin.write.bind(child.stdin) as (chunk: string) => boolean;
      child.stdin.write = ((chunk: string) => { renderedAtWrite.push(rendered.length); return write(chunk); }) as typeof child.stdin.write;
      return child;
    }, { idleMs: 50, timeoutMs: () => 10_000 });
    try {
      const r = await w.run(5000, (i) => { rendered.push(i); return renderDeleteRequest({ ...fullnat, client: { address: '198.18.0.2', port: 1 + i } }); });
      assert.deepEqual([r.done, r.codes.length, r.failed], [5000, 5000, 0]);
      assert.deepEqual(rendered, Array.from({ length: 5000 }, (_, i) => i), 'each request rendered once, in order');
      assert.deepEqual(renderedAtWrite, [1024, 2048, 3072, 4096, 5000], 'each chunk written as soon as it is rendered');
    } finally {
      await w.close();
    }
  });

  it('a request that cannot be rendered fails its batch with the reason, and the next batch goes to a new helper', async () => {
    const w = writer();
    try {
      await assert.rejects(w.run(3000, (i) => { if (i === 2500) throw new Error('request 2500 cannot be rendered'); return renderDeleteRequest(fullnat); }), /request 2500 cannot be rendered/);
      const r = await w.run(3, () => renderDeleteRequest(fullnat));
      assert.deepEqual([r.done, r.codes], [3, '+++'], 'none of the cut batch\'s requests counted in the next one');
    } finally {
      await w.close();
    }
  });
});
