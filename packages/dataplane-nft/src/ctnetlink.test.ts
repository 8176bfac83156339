import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import type { SyncedConnection } from '@lbd/dataplane';
import { CTNL_SCRIPT, parseEventLine, parseWriteResult, renderDeleteRequest, renderInsertRequest, renderUpdateRequest } from './ctnetlink.js';

const fullnat: SyncedConnection = {
  protocol: 'tcp', client: { address: '198.18.0.2', port: 40000 }, vip: { address: '198.18.0.10', port: 80 },
  realServer: { address: '198.19.1.11', port: 8080 }, localAddress: { address: '198.19.1.100', port: 20001 },
  mark: 65537, state: 'ESTABLISHED', timeoutSec: 300,
};

describe('ctnetlink helper: line protocol', () => {
  it('an event line is the ConnectionEvent conntrack -E would give: fullnat binding, injected from the pid', () => {
    const p = parseEventLine('N 1 tcp 198.18.0.2 40000 198.18.0.10 80 198.19.1.11 8080 198.19.1.100 20001 ESTABLISHED 300 65537', 7);
    assert.deepEqual(p, { type: 'event', event: { kind: 'new', injected: true, seenAtMs: 7, connection: fullnat } });
    const up = parseEventLine('U 0 tcp 198.18.0.2 40000 198.18.0.10 80 198.19.1.11 8080 198.19.1.100 20001 FIN_WAIT 120 65537', 0);
    assert.deepEqual(up?.type === 'event' && [up.event.kind, up.event.injected, up.event.connection.state, up.event.connection.timeoutSec], ['update', false, 'FIN_WAIT', 120]);
  });

  it('nat mode (the reply goes to the client itself): no local address; IPv6; udp states; a destroy without state', () => {
    const p = parseEventLine('N 0 udp fd00:18::2 5000 fd00:18::10 53 fd00:19::11 5353 fd00:18::2 5000 UNREPLIED 30 131074', 0);
    assert.deepEqual(p?.type === 'event' && p.event.connection, {
      protocol: 'udp', client: { address: 'fd00:18::2', port: 5000 }, vip: { address: 'fd00:18::10', port: 53 },
      realServer: { address: 'fd00:19::11', port: 5353 }, localAddress: null, mark: 131074, state: 'UNREPLIED', timeoutSec: 30,
    });
    const gone = parseEventLine('D 0 tcp 198.18.0.2 40000 198.18.0.10 80 198.19.1.11 8080 198.18.0.2 40001 - 0 1', 0);
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
    for (const line of ['A', 'A -3', 'A x', '', 'N 1 tcp 1.2.3.4', 'N 1 icmp 1 2 3 4 5 6 7 8 9 10 11', 'Use of uninitialized value at -e line 3.']) assert.equal(parseEventLine(line, 0), null, line);
  });

  it('requests: a delete by original tuple; an update with status bits (CONFIRMED kept), timeout, mark, tcp state number', () => {
    assert.equal(renderDeleteRequest(fullnat), 'D tcp 198.18.0.2 40000 198.18.0.10 80');
    assert.equal(renderUpdateRequest({ ...fullnat, timeoutSec: 119.2 }), 'U tcp 198.18.0.2 40000 198.18.0.10 80 14 120 65537 3');
    assert.equal(renderUpdateRequest({ ...fullnat, state: 'SYN_RECV' }), 'U tcp 198.18.0.2 40000 198.18.0.10 80 10 300 65537 2');
    assert.equal(renderUpdateRequest({ ...fullnat, state: 'SYN_SENT' }), 'U tcp 198.18.0.2 40000 198.18.0.10 80 0 300 65537 1');
    assert.equal(renderUpdateRequest({ ...fullnat, protocol: 'udp', state: 'REPLIED' }), 'U udp 198.18.0.2 40000 198.18.0.10 80 10 300 65537 -1');
    // Behind the kernel's entry: its bits are kept (the kernel refuses to clear them).
    assert.equal(renderUpdateRequest({ ...fullnat, state: 'SYN_RECV' }, fullnat), 'U tcp 198.18.0.2 40000 198.18.0.10 80 14 300 65537 2');
  });

  it('requests: an insert carries the binding: DNAT to the real server, SNAT to the local address in fullnat only', () => {
    assert.equal(renderInsertRequest(fullnat), `I tcp 198.18.0.2 40000 198.18.0.10 80 14 300 65537 3 ${fullnat.realServer.address} ${fullnat.realServer.port} ${fullnat.localAddress!.address} ${fullnat.localAddress!.port}`);
    const v6: SyncedConnection = {
      protocol: 'udp', client: { address: 'fd00:18::2', port: 5000 }, vip: { address: 'fd00:18::10', port: 53 },
      realServer: { address: 'fd00:19::11', port: 53 }, localAddress: null, mark: 7, state: 'ASSURED', timeoutSec: 29.5,
    };
    assert.equal(renderInsertRequest(v6), 'I udp fd00:18::2 5000 fd00:18::10 53 14 30 7 -1 fd00:19::11 53 - -');
    // Unreplied: no status bits at all (the kernel shows it [UNREPLIED]); replied but not assured: SEEN_REPLY.
    assert.equal(renderInsertRequest({ ...v6, state: 'UNREPLIED' }).split(' ')[6], '0');
    assert.equal(renderInsertRequest({ ...v6, state: 'REPLIED' }).split(' ')[6], '10');
    assert.equal(renderInsertRequest({ ...fullnat, state: 'SYN_SENT' }).split(' ')[6], '0');
    assert.equal(renderInsertRequest({ ...fullnat, state: 'SYN_RECV' }).split(' ')[6], '10');
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
