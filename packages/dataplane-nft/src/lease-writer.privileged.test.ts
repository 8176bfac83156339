import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { DataPlaneError } from '@lbd/dataplane';
import { KernelLease, parseLeaseDrops, readLeaseDrops } from './lease.js';
import { LeaseWriter, LeaseWriterUnavailable } from './lease-writer.js';
import { NFBATCH_HELPER } from './nft-netlink.js';
import { netnsRunner, type CommandRunner } from './runner.js';

/** The kernel lease's netlink writer (lbd-nfbatch) against the real kernel, in a namespace of its own. */

const NS = `lbdt${process.pid}-lw`;
const inNs = (...args: string[]): string => execFileSync('ip', ['netns', 'exec', NS, ...args], { encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe'] });

/** The element for `address` in inet/arp lbd `set`: its timeout and remaining ms, or null when it has none. */
function element(family: 'inet' | 'arp', set: string, address: string): { timeoutMs: number; expiresMs: number } | null {
  const text = inNs('nft', 'list', 'set', family, 'lbd', set);
  const ms = (s: string | undefined, m: string | undefined): number => Number(s ?? 0) * 1000 + Number(m ?? 0);
  const re = new RegExp(`${address.replace(/[.:]/g, (c) => `\\${c}`)} timeout (?:(\\d+)s)?(?:(\\d+)ms)? expires (?:(\\d+)s)?(?:(\\d+)ms)?`);
  const m = re.exec(text);
  return m === null ? null : { timeoutMs: ms(m[1], m[2]), expiresMs: ms(m[3], m[4]) };
}

describe('LeaseWriter (netlink) in a namespace @privileged', function () {
  this.timeout(20_000);
  const runner = netnsRunner(NS);
  const writers: Array<{ close(): void }> = [];
  const writer = (): LeaseWriter => {
    const w = new LeaseWriter(() => runner.spawn!(NFBATCH_HELPER, []));
    writers.push(w);
    return w;
  };

  before(() => {
    execFileSync('ip', ['netns', 'add', NS]);
    execFileSync('ip', ['netns', 'exec', NS, 'nft', '-f', '-'], {
      input: 'table inet lbd {\n set lease4 { type ipv4_addr; flags timeout; }\n set lease6 { type ipv6_addr; flags timeout; }\n}\n'
        + 'table arp lbd {\n set lease4 { type ipv4_addr; flags timeout; }\n}\n',
    });
  });
  afterEach(() => {
    for (const w of writers.splice(0)) w.close();
  });
  after(() => {
    execFileSync('ip', ['netns', 'del', NS]);
  });

  it('adds elements with timeout and expiry in one transaction, sets the remaining time up and down, deletes', async () => {
    const w = writer();
    await w.write([
      { op: 'add', family: 'inet', table: 'lbd', set: 'lease4', address: '198.18.0.10', ms: 5000 },
      { op: 'add', family: 'arp', table: 'lbd', set: 'lease4', address: '198.18.0.10', ms: 5000 },
      { op: 'add', family: 'inet', table: 'lbd', set: 'lease6', address: 'fd00::10', ms: 5000 },
    ]);
    for (const [f, set, a] of [['inet', 'lease4', '198.18.0.10'], ['arp', 'lease4', '198.18.0.10'], ['inet', 'lease6', 'fd00::10']] as const) {
      const e = element(f, set, a);
      assert.ok(e !== null && e.timeoutMs === 5000 && e.expiresMs > 3000 && e.expiresMs <= 5000, `${f} ${set} ${a}: ${JSON.stringify(e)}`);
    }
    await w.write([{ op: 'add', family: 'inet', table: 'lbd', set: 'lease4', address: '198.18.0.10', ms: 30_000 }]);
    assert.ok((element('inet', 'lease4', '198.18.0.10')?.expiresMs ?? 0) > 5000, 'lengthened');
    await w.write([{ op: 'add', family: 'inet', table: 'lbd', set: 'lease4', address: '198.18.0.10', ms: 2000 }]);
    assert.ok((element('inet', 'lease4', '198.18.0.10')?.expiresMs ?? Infinity) <= 2000, 'shortened: the kernel ends it sooner');
    await w.write([
      { op: 'add', family: 'inet', table: 'lbd', set: 'lease4', address: '198.18.0.10', ms: 1 },
      { op: 'delete', family: 'inet', table: 'lbd', set: 'lease4', address: '198.18.0.10' },
      { op: 'add', family: 'inet', table: 'lbd', set: 'lease6', address: 'fd00::10', ms: 1 },
      { op: 'delete', family: 'inet', table: 'lbd', set: 'lease6', address: 'fd00::10' },
    ]);
    assert.equal(element('inet', 'lease4', '198.18.0.10'), null);
    assert.equal(element('inet', 'lease6', 'fd00::10'), null);
    assert.notEqual(element('arp', 'lease4', '198.18.0.10'), null, 'the arp table was not in that transaction');
  });

  it('a refused transaction applies nothing and names the word the kernel refused', async () => {
    const w = writer();
    await assert.rejects(w.write([
      { op: 'add', family: 'inet', table: 'lbd', set: 'lease4', address: '198.18.0.20', ms: 5000 },
      { op: 'add', family: 'inet', table: 'lbd', set: 'nosuch', address: '198.18.0.20', ms: 5000 },
    ]), (e: unknown) => e instanceof DataPlaneError && /A\/inet\/lbd\/nosuch\/198\.18\.0\.20\/5000: No such file or directory/.test(e.message));
    assert.equal(element('inet', 'lease4', '198.18.0.20'), null, 'all or nothing: the good word was not applied either');
    await assert.rejects(w.write([{ op: 'delete', family: 'inet', table: 'lbd', set: 'lease4', address: '198.18.0.99' }]),
      /D\/inet\/lbd\/lease4\/198\.18\.0\.99: No such file or directory/);
    // The process is still there for the next one.
    await w.write([{ op: 'add', family: 'inet', table: 'lbd', set: 'lease4', address: '198.18.0.21', ms: 5000 }]);
    assert.notEqual(element('inet', 'lease4', '198.18.0.21'), null);
  });

  it('a writer that cannot run says so, and KernelLease writes through nft instead', async () => {
    const broken = new LeaseWriter(() => runner.spawn!('/nonexistent/lbd-nfbatch', []));
    writers.push(broken);
    await assert.rejects(broken.write([{ op: 'add', family: 'inet', table: 'lbd', set: 'lease4', address: '198.18.0.30', ms: 5000 }]),
      (e: unknown) => e instanceof LeaseWriterUnavailable);

    // KernelLease with a runner whose lbd-nfbatch is missing: creates its tables, leases and revokes all the same.
    const noHelper: CommandRunner = {
      run: runner.run,
      spawn: (command, args) => runner.spawn!(command === NFBATCH_HELPER ? '/nonexistent/lbd-nfbatch' : command, args),
    };
    const lease = new KernelLease({ runner: noHelper });
    writers.push(lease);
    try {
      await lease.guard(new Map([['g', ['198.18.0.40']]]));
      await lease.lease('g', performance.now() + 5000);
      assert.ok((element('inet', 'lease4', '198.18.0.40')?.expiresMs ?? 0) > 3000, 'leased through nft');
      await lease.revoke('g');
      assert.equal(element('inet', 'lease4', '198.18.0.40'), null, 'revoked through nft');
    } finally {
      await lease.remove();
    }
  });

  it('counts the packets it drops for an address not leased (what a drill reads on both directors around a move)', async () => {
    assert.equal(await readLeaseDrops(runner), null, 'no lease tables, no count');
    const lease = new KernelLease({ runner });
    writers.push(lease);
    const ping = (): boolean => {
      try {
        inNs('ping', '-c', '1', '-W', '1', '198.18.0.41');
        return true;
      } catch {
        return false;
      }
    };
    try {
      inNs('ip', 'link', 'set', 'lo', 'up');
      inNs('ip', 'addr', 'add', '198.18.0.41/32', 'dev', 'lo');
      await lease.guard(new Map([['g', ['198.18.0.41']]]));
      assert.equal(await readLeaseDrops(runner), 0);
      assert.equal(ping(), false, 'an unleased floating address is not served');
      const dropped = await readLeaseDrops(runner);
      assert.ok(dropped !== null && dropped >= 1, `dropped ${dropped}`);
      await lease.lease('g', performance.now() + 5000);
      assert.equal(ping(), true, 'served once leased');
      assert.equal(await readLeaseDrops(runner), dropped, 'nothing more dropped while leased');
    } finally {
      await lease.remove();
      inNs('ip', 'addr', 'del', '198.18.0.41/32', 'dev', 'lo');
    }
  });

  it('reads the count while renewals change the ruleset without a pause (nft list starts over at every change)', async () => {
    const lease = new KernelLease({ runner });
    writers.push(lease);
    try {
      await lease.guard(new Map([['g', ['198.18.0.42']]]));
      // A ruleset the size of a director's (the data plane's sets): nft's fetch of it outlasts a renewal.
      const elements = Array.from({ length: 40_000 }, (_, i) => `10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`).join(', ');
      execFileSync('ip', ['netns', 'exec', NS, 'nft', '-f', '-'], { input: `table ip bulk {\n set big { type ipv4_addr; elements = { ${elements} } }\n}\n` });
      const w = writer();
      let read: number | null | undefined;
      const reading = readLeaseDrops(runner).then((n) => { read = n; });
      // Renewals back to back until the read answers (bounded): each one is a new generation of the ruleset.
      let renewals = 0;
      for (const until = performance.now() + 15_000; read === undefined && performance.now() < until; renewals++) {
        await w.write([{ op: 'add', family: 'inet', table: 'lbd', set: 'lease4', address: '198.18.0.42', ms: 5000 }]);
      }
      const answeredDuring = read !== undefined;
      await reading;
      assert.equal(read, 0);
      assert.ok(answeredDuring && renewals > 0, `the read answered after ${renewals} renewals${answeredDuring ? '' : ', only once they stopped'}`);
    } finally {
      await lease.remove();
      execFileSync('ip', ['netns', 'exec', NS, 'nft', 'delete', 'table', 'ip', 'bulk']);
    }
  });

  it('parses the counter reader\'s answer', () => {
    assert.equal(parseLeaseDrops('packets 12 bytes 720\n'), 12);
    assert.equal(parseLeaseDrops('failed No such file or directory\n'), null);
  });
});
