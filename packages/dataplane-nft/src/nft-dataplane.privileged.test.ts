import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { DataPlaneError } from '@lbd/dataplane';
import { goldenServices } from './model.test.js';
import { NFBATCH_HELPER, NftDataPlane } from './nft-dataplane.js';
import { netnsRunner, type CommandRunner } from './runner.js';

/**
 * The renderer and applier against the real kernel, in a namespace of its own: golden rulesets load,
 * a re-read table parses back to exactly what was rendered, and re-applying writes nothing.
 * Forwarding through the table is tested end to end in test/ (namespaces with clients and servers).
 */

const ns = `lbdt${process.pid}-nft`;
const ip = (...args: string[]): string => execFileSync('ip', args, { encoding: 'utf8' });
const nft = (...args: string[]): string => execFileSync('ip', ['netns', 'exec', ns, 'nft', ...args], { encoding: 'utf8' });
// Comparisons use `nft -s` (stateless): counter values change with traffic, not with writes.

describe('NftDataPlane in a namespace @privileged', function () {
  before(function () {
    if (process.getuid?.() !== 0) {
      console.warn('    SKIPPED: privileged tests need root (they create network namespaces)');
      this.skip();
    }
    ip('netns', 'add', ns);
  });
  after(() => {
    try { ip('netns', 'del', ns); } catch { /* never created */ }
  });

  it('the golden rulesets pass `nft -c -f`', () => {
    for (const f of ['golden-ip.nft', 'golden-ip6.nft']) {
      const path = new URL(`../testdata/${f}`, import.meta.url).pathname;
      assert.ok(readFileSync(path, 'utf8').length > 0);
      nft('-c', '-f', path);
    }
  });

  it('applies, reads back exactly what it rendered, and writes nothing the second time', async () => {
    const dp = new NftDataPlane({ runner: netnsRunner(ns) });
    const first = await dp.apply({ services: goldenServices() });
    assert.equal(first.changed, true);
    assert.equal(first.fullRebuild, true);
    const listed = nft('-s', 'list', 'table', 'ip', 'lbd');
    // A second data plane is a restarted agent: it must re-adopt the table without a single write.
    const restarted = new NftDataPlane({ runner: netnsRunner(ns) });
    const again = await restarted.apply({ services: goldenServices() });
    assert.deepEqual(again.operations, []);
    assert.equal(again.changed, false);
    assert.equal(nft('-s', 'list', 'table', 'ip', 'lbd'), listed);
  });

  it('observes services, real servers and which are quiescent from the kernel', async () => {
    const dp = new NftDataPlane({ runner: netnsRunner(ns) });
    const observed = await dp.observe();
    const web = observed.services.find((s) => s.key === '198.18.0.10:80/tcp');
    assert.ok(web);
    assert.deepEqual(web.realServers.map((r) => [r.address, r.port, r.quiescent]), [
      ['198.19.1.11', 8080, false], ['198.19.1.12', 8080, false], ['198.19.1.13', 8080, true],
    ]);
    assert.deepEqual(observed.services.map((s) => s.key).sort(), [
      '198.18.0.10:53/udp', '198.18.0.10:80/tcp', '198.18.0.11:80/tcp', '198.18.0.12:443/tcp', '198.18.0.12:80/tcp',
      '198.18.0.12:8000/tcp', '198.18.0.13:53/udp', '198.18.0.13:80/tcp', '198.18.0.14:443/tcp', '[fd00:0:0:10::10]:443/tcp', '[fd00:0:0:10::10]:80/tcp',
    ]);
    // SYN-proxied services are there: the kernel's SYN proxy counters come with them (none counted yet).
    assert.deepEqual(observed.synProxy, { synReceived: 0, cookieValid: 0, cookieInvalid: 0, cookieRetransmitted: 0 });
    assert.deepEqual(web.limitDrops, { packets: 0, bytes: 0 });
    // A dr service is observed as the others: its real servers, and the one of weight 0 out of its slots.
    const dr = observed.services.find((s) => s.key === '198.18.0.13:80/tcp');
    assert.deepEqual(dr?.realServers.map((r) => [r.address, r.port, r.quiescent]), [
      ['198.19.1.11', 80, false], ['198.19.1.12', 80, false], ['198.19.1.13', 80, true],
    ]);
  });

  it('the data plane that applied observes the same, without listing the slots', async () => {
    // An agent's own observe() lists the small maps only and takes quiescence from the slots it wrote
    // (a leader's whole-table listing may never finish): it must agree with a fresh observer's.
    const dp = new NftDataPlane({ runner: netnsRunner(ns) });
    await dp.apply({ services: goldenServices() });
    const own = await dp.observe();
    const fresh = await new NftDataPlane({ runner: netnsRunner(ns) }).observe();
    const rotation = (o: typeof own): string[] => o.services.flatMap((s) => s.realServers.map((r) => `${s.key} ${r.address}:${r.port} ${r.quiescent}`)).sort();
    assert.deepEqual(rotation(own), rotation(fresh));
    const web = own.services.find((s) => s.key === '198.18.0.10:80/tcp');
    assert.deepEqual(web?.realServers.map((r) => r.quiescent), [false, false, true]);
  });

  it('real server ids: the data plane that applied answers from what it wrote, with no nft run, the same as the kernel says', async () => {
    const runs: string[] = [];
    const inner = netnsRunner(ns);
    const counting = { run: (c: string, a: readonly string[]) => { runs.push(c); return inner.run(c, a); }, spawn: inner.spawn!.bind(inner) };
    const dp = new NftDataPlane({ runner: counting });
    await dp.apply({ services: goldenServices() });
    runs.length = 0;
    const own = await dp.realServerIds();
    assert.deepEqual(runs, []);
    const fresh = await new NftDataPlane({ runner: netnsRunner(ns) }).realServerIds();
    const text = (ids: typeof own): string[] => ids.map((r) => `${r.service} ${r.address}:${r.port} ${r.realServerId}`).sort();
    assert.ok(own.length >= 10, `${own.length} real servers`);
    assert.deepEqual(text(own), text(fresh));
  });

  it('a restarted agent reads its table map by map, never what the packet path fills (a million remembered dr flows list in tens of seconds)', async () => {
    await new NftDataPlane({ runner: netnsRunner(ns) }).apply({ services: goldenServices() });
    // Remembered dr flows, as the dr chains make them.
    const flows = Array.from({ length: 2000 }, (_, i) => `198.18.${8 + Math.floor(i / 250)}.${(i % 250) + 1} . 198.18.0.13 . ${1024 + i} . 80 timeout 900s : 0x${(0x10001).toString(16)}`);
    nft('add', 'element', 'ip', 'lbd', 'dr_flows_tcp', `{ ${flows.join(', ')} }`);
    const listings: string[] = [];
    const inner = netnsRunner(ns);
    const recording = {
      run: (c: string, a: readonly string[]) => {
        if (c === 'nft' && a.includes('list')) listings.push(a.slice(a.indexOf('list') + 1).join(' '));
        return inner.run(c, a);
      },
      spawn: inner.spawn!.bind(inner),
    };
    const events: string[] = [];
    const restarted = new NftDataPlane({ runner: recording, onEvent: (msg) => events.push(msg) });
    assert.deepEqual((await restarted.apply({ services: goldenServices() })).operations, [], 're-adopted without a write');
    assert.ok(events.includes('re-adopted existing nft table'), events.join('; '));
    // Its own observe() after the apply lists only small maps too.
    assert.ok((await restarted.observe()).services.some((svc) => svc.key === '198.18.0.13:80/tcp'));
    assert.ok(listings.length > 0);
    const whole = listings.filter((l) => /^(table|tables|ruleset)\b/.test(l));
    const filled = listings.filter((l) => /\b(dr_flows_tcp|dr_flows_udp|persist|conns_\d+)$/.test(l));
    assert.deepEqual([whole, filled], [[], []], `listed: ${[...new Set(listings)].join(', ')}`);
    nft('flush', 'map', 'ip', 'lbd', 'dr_flows_tcp');
  });

  it('a first apply where there is no table lists nothing: one run of lbd-nfbatch, a netlink question a family, finds none (nft lists at 18 process starts a family)', async () => {
    nft('flush', 'ruleset');
    const commands: string[] = [];
    const inner = netnsRunner(ns);
    const recording = {
      run: (c: string, a: readonly string[]) => { commands.push([c.replace(/.*\//, ''), ...a].join(' ')); return inner.run(c, a); },
      spawn: inner.spawn!.bind(inner),
    };
    const events: string[] = [];
    const first = await new NftDataPlane({ runner: recording, onEvent: (msg) => events.push(msg) }).apply({ services: goldenServices() });
    assert.ok(first.fullRebuild);
    assert.ok(!events.includes('re-adopted existing nft table'), events.join('; '));
    const asked = commands.filter((c) => !/^nft -f /.test(c));
    assert.deepEqual(asked, ['lbd-nfbatch table ip lbd ip6 lbd'], commands.join('\n'));
  });

  it('lbd-nfbatch answers for each table asked, in order: present, absent, present', () => {
    nft('flush', 'ruleset');
    nft('add', 'table', 'ip', 'lbd');
    nft('add', 'table', 'inet', 'lbd');
    const asked = ['table', 'ip', 'lbd', 'ip6', 'lbd', 'inet', 'lbd'];
    let out = '';
    let status = 0;
    try {
      out = execFileSync('ip', ['netns', 'exec', ns, NFBATCH_HELPER, ...asked], { encoding: 'utf8' });
    } catch (err) {
      const e = err as { status: number; stdout: string };
      [out, status] = [e.stdout, e.status];
    }
    assert.deepEqual([out.split('\n'), status], [['table', 'failed No such file or directory', 'table', ''], 1]);
    nft('flush', 'ruleset');
  });

  it('a restarted data plane with only an IPv4 table re-reads it and builds the IPv6 one', async () => {
    nft('flush', 'ruleset');
    await new NftDataPlane({ runner: netnsRunner(ns) }).apply({ services: goldenServices() });
    const ipTable = nft('-s', 'list', 'table', 'ip', 'lbd');
    nft('delete', 'table', 'ip6', 'lbd');
    const restarted = await new NftDataPlane({ runner: netnsRunner(ns) }).apply({ services: goldenServices() });
    assert.ok(restarted.fullRebuild, 'the IPv6 table is built afresh');
    assert.equal(nft('-s', 'list', 'table', 'ip', 'lbd'), ipTable, 'the IPv4 table is as it was');
    assert.match(nft('-s', 'list', 'table', 'ip6', 'lbd'), /map dispatch/);
  });

  it('a table of another schema is rebuilt whole by a restarted agent', async () => {
    await new NftDataPlane({ runner: netnsRunner(ns) }).apply({ services: goldenServices() });
    nft('flush', 'set', 'ip', 'lbd', 'schema');
    nft('add', 'element', 'ip', 'lbd', 'schema', '{ 6 }');
    const events: Array<[string, Record<string, unknown>]> = [];
    const restarted = new NftDataPlane({ runner: netnsRunner(ns), onEvent: (msg, fields) => events.push([msg, fields]) });
    const r = await restarted.apply({ services: goldenServices() });
    assert.equal(r.fullRebuild, true);
    assert.deepEqual(events.find(([m]) => m === 'nft table has another schema; it will be rebuilt'), ['nft table has another schema; it will be rebuilt', { family: 'ip', schema: 6 }]);
    assert.match(nft('list', 'set', 'ip', 'lbd', 'schema'), /elements = \{ 0x0*7 \}/);
    assert.equal((await new NftDataPlane({ runner: netnsRunner(ns) }).apply({ services: goldenServices() })).changed, false);
  });

  it('kernel facts name the box\'s permanent addresses, not addresses with a lifetime (what floating addresses have)', async () => {
    ip('-n', ns, 'link', 'add', 'fx0', 'type', 'veth', 'peer', 'name', 'fx1');
    ip('-n', ns, 'addr', 'add', '198.18.7.1/24', 'dev', 'fx0');
    ip('-n', ns, 'addr', 'add', '198.18.7.10/32', 'dev', 'fx0', 'valid_lft', '30', 'preferred_lft', '30');
    const facts = await new NftDataPlane({ runner: netnsRunner(ns) }).kernelFacts([]);
    const own = facts.permanentAddresses.filter((a) => a.ifname === 'fx0').map((a) => a.address);
    assert.deepEqual(own, ['198.18.7.1']);
  });

  it('a table built afresh gets its elements as netlink messages, and is the table nft\'s own script builds', async () => {
    const slots = [{ index: 0, ifname: 'lbds0', localAddresses: { ipv4: { first: '198.18.9.1', last: '198.18.9.4', size: 4 }, ipv6: { first: 'fd00:9::1', last: 'fd00:9::4', size: 4 } } }];
    const fresh = (): void => { nft('flush', 'ruleset'); };
    fresh();
    const scripted = await new NftDataPlane({ runner: netnsRunner(ns), elementBatches: false }).apply({ services: goldenServices(), slots });
    assert.equal(scripted.operations.some((o) => o.includes('as netlink messages')), false);
    const byScript = nft('-s', 'list', 'ruleset');
    fresh();
    const batched = await new NftDataPlane({ runner: netnsRunner(ns) }).apply({ services: goldenServices(), slots });
    assert.equal(batched.fullRebuild, true);
    assert.ok(batched.operations.some((o) => /^# \d+ elements of ip6 lbd slot_snat as netlink messages$/.test(o)), batched.operations.join('\n'));
    assert.ok(!batched.operations.some((o) => o.startsWith('add element')), 'no element went through nft');
    // Element order within a map is the kernel's (a hash): compare sorted lines.
    const sorted = (t: string): string => t.split('\n').sort().join('\n');
    assert.equal(sorted(nft('-s', 'list', 'ruleset')), sorted(byScript));
    // And a restarted agent re-adopts it without a write.
    assert.equal((await new NftDataPlane({ runner: netnsRunner(ns) }).apply({ services: goldenServices(), slots })).changed, false);
    fresh();
  });

  it('elements the kernel refuses: the apply fails naming them, and no half-built table is left', async () => {
    nft('flush', 'ruleset');
    // A real refusal: the ip6 table vanishes between nft making it and its elements arriving.
    const base = netnsRunner(ns);
    const sabotaged: CommandRunner = {
      run: base.run,
      spawn: (command, args) => (command === NFBATCH_HELPER ? base.spawn!('sh', ['-c', `nft delete table ip6 lbd && exec ${NFBATCH_HELPER}`]) : base.spawn!(command, args)),
    };
    await assert.rejects(new NftDataPlane({ runner: sabotaged }).apply({ services: goldenServices() }), (err: Error) => err instanceof DataPlaneError
      && err.kind === 'InvalidRuleset' && /refused the new table's elements: \d+ elements of map \w+ from ".+": No such file or directory \(errno 2\)/.test(err.message));
    assert.equal(nft('list', 'tables'), '', 'neither family\'s table is left');
    const again = await new NftDataPlane({ runner: netnsRunner(ns) }).apply({ services: goldenServices() });
    assert.equal(again.fullRebuild, true);
    assert.equal((await new NftDataPlane({ runner: netnsRunner(ns) }).apply({ services: goldenServices() })).changed, false);
  });

  it('a rejected transaction leaves the kernel as it was', async () => {
    const before = nft('-s', 'list', 'ruleset');
    const dp = new NftDataPlane({ runner: netnsRunner(ns) });
    await dp.apply({ services: goldenServices() });
    // Config validation stops this at the edge; here it reaches nft on purpose, to make a real
    // transaction fail half-way through its commands: an IPv6 SNAT pool in the IPv4 table.
    const bad = goldenServices().map((s) => (s.name !== 'web' ? s : { ...s, localAddresses: { first: 'fd00::1', last: 'fd00::1', size: 1 } }));
    await assert.rejects(dp.apply({ services: bad }), (err: Error) => /InvalidRuleset/.test(err.message));
    assert.equal(nft('-s', 'list', 'ruleset'), before);
    // …and the data plane still knows the kernel state: an unchanged apply writes nothing.
    assert.equal((await dp.apply({ services: goldenServices() })).changed, false);
  });

  it('an element lbd did not write in its table: the apply fails naming it, the kernel keeps its rules; removed, the next apply works', async () => {
    await new NftDataPlane({ runner: netnsRunner(ns) }).apply({ services: goldenServices() });
    const foreign = '198.18.0.99 . tcp . 8443';
    nft('add', 'element', 'ip', 'lbd', 'dispatch', `{ ${foreign} : drop }`);
    const before = nft('-s', 'list', 'ruleset');
    // A data plane that reads the kernel (an agent's restart, or the next apply after a failed one).
    const dp = new NftDataPlane({ runner: netnsRunner(ns) });
    await assert.rejects(dp.apply({ services: goldenServices() }),
      (err: Error) => err instanceof DataPlaneError && err.kind === 'InvalidRuleset' && /holds what lbd did not write .*drop/.test(err.message));
    assert.equal(nft('-s', 'list', 'ruleset'), before, 'nothing changed');
    nft('delete', 'element', 'ip', 'lbd', 'dispatch', `{ ${foreign} }`);
    assert.equal((await dp.apply({ services: goldenServices() })).changed, false, 'the table is lbd\'s again');
  });

  it('a connection is listed under the service whose vip it was sent to, not one that reused its mark', async () => {
    const dp = new NftDataPlane({ runner: netnsRunner(ns) });
    await dp.apply({ services: goldenServices() });
    const web = (await dp.observe()).services.find((s) => s.key === '198.18.0.10:80/tcp')!;
    const mark = String(web.realServers[0]!.realServerId);
    const insert = (vip: string, sport: number): void => {
      execFileSync('ip', ['netns', 'exec', ns, 'conntrack', '-I', '-p', 'tcp', '-s', '198.18.0.2', '-d', vip,
        '--sport', String(sport), '--dport', '80', '-r', '198.19.1.11', '-q', '198.19.1.100',
        '--reply-port-src', '8080', '--reply-port-dst', String(sport), '--state', 'ESTABLISHED', '-u', 'ASSURED',
        '-t', '100', '-m', mark], { stdio: 'ignore' });
    };
    // Service ids are reused once free, and a removed service's connections stay in conntrack until
    // they end: one sent to another vip with the same mark belongs to that old service, not to web.
    insert('198.18.0.10', 40000);
    insert('198.18.0.99', 40001);
    try {
      const conns = await dp.connections({ service: web.key });
      assert.deepEqual(conns.map((c) => [c.vip.address, c.client.port]), [['198.18.0.10', 40000]]);
    } finally {
      execFileSync('ip', ['netns', 'exec', ns, 'conntrack', '-F'], { stdio: 'ignore' });
    }
  });
});
