import assert from 'node:assert/strict';
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { parseConfig, slotInterface, type Service } from '@lbd/config';
import type { DesiredState, DesiredSlot } from '@lbd/dataplane';
import { ecmpServices, ecmpSlots } from './ecmp-tier.test.js';
import { planTables } from './plan.js';
import { parseTable } from './parse.js';
import { NftDataPlane } from './nft-dataplane.js';
import { netnsRunner } from './runner.js';
import type { TableModel } from './model.js';

/**
 * The ECMP tier against the real kernel. Three namespaces:
 *
 *   C (client and router) eth0 198.18.9.1/24 ── fab0 198.18.9.2/24  D (director)  srv0 198.18.20.1/24 ── eth0 198.18.20.10/24  R (real server)
 *                                                lbds0 198.18.9.64 (slot 0's next hop), lbds1 198.18.9.65 (slot 1's)
 *
 * C routes the vip 198.18.10.10 via one slot's next hop or the other (the router's ECMP choice, made by
 * hand), or via the director's own address on the parent. R runs a TCP server that answers with the
 * source address it sees: the local address the director SNATed the connection to.
 */

const base = `lbdt${process.pid}-sl`;
const C = `${base}-c`;
const D = `${base}-d`;
const R = `${base}-r`;
const VIP = '198.18.10.10';
const ip = (...args: string[]): string => execFileSync('ip', args, { encoding: 'utf8' });
const inNs = (ns: string, ...args: string[]): string => execFileSync('ip', ['netns', 'exec', ns, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
const nftD = (...args: string[]): string => inNs(D, 'nft', ...args);
const golden = (name: string): URL => new URL(`../testdata/${name}`, import.meta.url);
const hasCommand = (cmd: string): boolean => {
  try {
    execFileSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
};

const range = (first: string, last: string, size: number): { first: string; last: string; size: number } => ({ first, last, size });
const POOL0 = range('198.18.30.0', '198.18.30.3', 4);
const POOL1 = range('198.18.31.0', '198.18.31.3', 4);

function slots(pool1 = POOL1): DesiredSlot[] {
  return [
    { index: 0, ifname: slotInterface(0), localAddresses: { ipv4: POOL0, ipv6: range('fd00:30::1', 'fd00:30::4', 4) } },
    { index: 1, ifname: slotInterface(1), localAddresses: { ipv4: pool1, ipv6: null } },
  ];
}

/** One ECMP service: the vip's port 80 to R's server. (The config does not parse `ecmp` yet.) */
function ecmpService(): Service {
  const [svc] = parseConfig(`
services:
  - name: front
    vip: ${VIP}
    port: 80
    mode: fullnat
    localAddresses: [198.18.29.1]
    realServers:
      - { address: 198.18.20.10, port: 8080 }
`, 'slots').services;
  return { ...svc!, ecmp: true, localAddresses: null };
}

/** Connects from C to the vip; resolves with what R's server answered (the source it saw), or null on no answer within 1.5 s. */
function connectFromClient(): Promise<string | null> {
  const script = `const s = require('net').connect(80, '${VIP}');
    const t = setTimeout(() => { console.log('no answer'); process.exit(0); }, 1500);
    s.on('data', (d) => { process.stdout.write(String(d)); clearTimeout(t); s.end(); });
    s.on('error', (e) => { console.log('error ' + e.code); process.exit(0); });`;
  return new Promise((resolve, reject) => {
    execFile('ip', ['netns', 'exec', C, process.execPath, '-e', script], { encoding: 'utf8', timeout: 5000 }, (err, stdout) => {
      if (err) return reject(err);
      const answer = stdout.trim();
      resolve(/^\d+\.\d+\.\d+\.\d+$/.test(answer) ? answer : null);
    });
  });
}

function routeVipVia(nextHop: string): void {
  inNs(C, 'ip', 'route', 'replace', `${VIP}/32`, 'via', nextHop);
}

const inRange = (a: string, r: { first: string; last: string }): boolean => {
  const n = (x: string): number => x.split('.').reduce((acc, o) => acc * 256 + Number(o), 0);
  return n(a) >= n(r.first) && n(a) <= n(r.last);
};

const macOf = (ns: string, ifname: string): string => inNs(ns, 'cat', `/sys/class/net/${ifname}/address`).trim().toLowerCase();
const sysctl = (ns: string, key: string): string => inNs(ns, 'sysctl', '-n', key).trim();
const ecmpDrops = (): number => Number(/counter packets (\d+)/.exec(nftD('list', 'chain', 'ip', 'lbd', 'ecmp_snat'))?.[1] ?? NaN);

interface Link { ifname: string; ifindex: number; link?: string; flags: string[]; linkinfo?: { info_kind?: string; info_data?: { mode?: string } } }
function linksOf(ns: string): Map<string, Link> {
  return new Map((JSON.parse(inNs(ns, 'ip', '-j', '-d', 'link', 'show')) as Link[]).map((l) => [l.ifname, l]));
}

/** nft's one-line JSON with one object per line, so a review sees which set or rule changed. */
function jsonLines(json: string): string {
  const items = (JSON.parse(json) as { nftables: unknown[] }).nftables;
  return `{"nftables": [\n${items.map((i) => JSON.stringify(i)).join(',\n')}\n]}\n`;
}

/** A model's contents, for deepEqual (fragments read back have no `source`). */
function comparable(m: TableModel): unknown {
  return {
    slotSnat: [...m.slotSnat],
    services: [...m.services].map(([k, f]) => [k, f.serviceId, f.chain, [...f.realServerMarks], Object.entries(f.elements).map(([n, e]) => [n, [...e]])]),
  };
}

describe('ECMP tier slots in namespaces @privileged', function () {
  this.timeout(60_000);
  let server: ChildProcess | null = null;
  /** Every source address R's server saw, in order. */
  const seen: string[] = [];
  const events: Array<[string, Record<string, unknown>]> = [];
  const dataPlane = (): NftDataPlane => new NftDataPlane({ runner: netnsRunner(D), onEvent: (msg, fields) => events.push([msg, fields]) });

  before(async function () {
    if (process.getuid?.() !== 0) {
      console.warn('    SKIPPED: privileged tests need root (they create network namespaces)');
      this.skip();
    }
    for (const ns of [C, D, R]) {
      ip('netns', 'add', ns);
      inNs(ns, 'ip', 'link', 'set', 'lo', 'up');
    }
    ip('link', 'add', 'eth0', 'netns', C, 'type', 'veth', 'peer', 'name', 'fab0', 'netns', D);
    ip('link', 'add', 'eth0', 'netns', R, 'type', 'veth', 'peer', 'name', 'srv0', 'netns', D);
    for (const [ns, ifname, address] of [[C, 'eth0', '198.18.9.1/24'], [D, 'fab0', '198.18.9.2/24'], [D, 'srv0', '198.18.20.1/24'], [R, 'eth0', '198.18.20.10/24']] as const) {
      inNs(ns, 'ip', 'addr', 'add', address, 'dev', ifname);
      inNs(ns, 'ip', 'link', 'set', ifname, 'up');
    }
    inNs(R, 'ip', 'route', 'add', 'default', 'via', '198.18.20.1');
    inNs(D, 'sysctl', '-q', '-w', 'net.ipv4.ip_forward=1');
    // R's server: answers each connection with the source address it sees, and reports it on stdout.
    const script = `require('net').createServer((s) => { const a = s.remoteAddress.replace(/^::ffff:/, ''); console.log(a); s.end(a + '\\n'); })
      .listen(8080, '198.18.20.10', () => console.log('listening'));`;
    server = spawn('ip', ['netns', 'exec', R, process.execPath, '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    const lines = createInterface({ input: server.stdout! });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('the real server did not start within 5 s')), 5000);
      lines.on('line', (line) => {
        if (line === 'listening') {
          clearTimeout(timer);
          resolve();
        } else {
          seen.push(line);
        }
      });
      server!.once('exit', (code) => reject(new Error(`the real server exited (${code})`)));
    });
  });

  after(() => {
    server?.kill('SIGKILL');
    for (const ns of [C, D, R]) {
      try { ip('netns', 'del', ns); } catch { /* never created */ }
    }
  });

  it('the golden ECMP rulesets load and read back as the model they were rendered from', () => {
    const rendered = planTables(ecmpServices(), { ip: null, ip6: null }, ecmpSlots()).models;
    for (const family of ['ip', 'ip6'] as const) {
      const path = golden(`golden-ecmp-${family}.nft`).pathname;
      nftD('-c', '-f', path);
      nftD('-f', path);
      const json = nftD('-j', 'list', 'table', family, 'lbd');
      // The unit tests read these listings back (ecmp-tier.test.ts): nft 1.0.6's JSON, kept as testdata.
      if (process.env.UPDATE_GOLDEN === '1') writeFileSync(golden(`golden-ecmp-${family}.json`), jsonLines(json));
      assert.deepEqual(comparable(parseTable(family, json)!.model), comparable(rendered[family]));
      assert.deepEqual(comparable(parseTable(family, readFileSync(golden(`golden-ecmp-${family}.json`), 'utf8'))!.model), comparable(rendered[family]));
    }
    nftD('flush', 'ruleset');
  });

  it('prepareSlots makes lbds0 and lbds1 on the parent, replaces a wrong one, removes extras, and then changes nothing', async () => {
    // A wrong lbds1 (on the server-side link) and an lbds3 beyond the count, as a previous config left them.
    inNs(D, 'ip', 'link', 'add', 'lbds1', 'link', 'srv0', 'type', 'macvlan', 'mode', 'bridge');
    inNs(D, 'ip', 'link', 'add', 'lbds3', 'link', 'fab0', 'type', 'macvlan', 'mode', 'bridge');
    const dp = dataPlane();
    events.length = 0;
    await dp.prepareSlots('fab0', 2);
    const changes = events.find(([msg]) => msg === 'slot interfaces prepared')?.[1];
    assert.deepEqual([changes?.created, changes?.replaced, changes?.removed], [['lbds0'], ['lbds1'], ['lbds3']]);
    const links = linksOf(D);
    assert.equal(links.has('lbds3'), false);
    for (const name of ['lbds0', 'lbds1']) {
      const l = links.get(name);
      assert.ok(l, `${name} exists`);
      assert.deepEqual([l.linkinfo?.info_kind, l.linkinfo?.info_data?.mode, l.link, l.flags.includes('UP')], ['macvlan', 'bridge', 'fab0', true], name);
      assert.equal(sysctl(D, `net.ipv4.conf.${name}.arp_ignore`), '1');
      assert.equal(sysctl(D, `net.ipv4.conf.${name}.arp_announce`), '2');
      assert.equal(sysctl(D, `net.ipv4.conf.${name}.rp_filter`), '0');
      assert.equal(sysctl(D, `net.ipv6.conf.${name}.keep_addr_on_down`), '1');
    }
    assert.equal(sysctl(D, 'net.ipv4.conf.fab0.arp_ignore'), '1');
    assert.equal(sysctl(D, 'net.ipv4.conf.fab0.arp_announce'), '2');
    // Idempotent: the same interfaces (same ifindex, so addresses and MACs stay), no event.
    events.length = 0;
    await dataPlane().prepareSlots('fab0', 2);
    assert.deepEqual(events, []);
    const again = linksOf(D);
    assert.deepEqual(['lbds0', 'lbds1'].map((n) => again.get(n)?.ifindex), ['lbds0', 'lbds1'].map((n) => links.get(n)?.ifindex));
  });

  it('prepareSlots names a missing parent and the fix', async () => {
    await assert.rejects(dataPlane().prepareSlots('fabric9', 2), (err: Error) => {
      assert.match(err.message, /prepareSlots: .*parent interface fabric9 does not exist/);
      assert.match(err.message, /ip link show/);
      return true;
    });
  });

  it('ARP for a slot\'s next hop is answered by its macvlan alone', function () {
    if (!hasCommand('arping')) {
      console.warn('    SKIPPED: arping is not installed (Debian package iputils-arping)');
      this.skip();
    }
    inNs(D, 'ip', 'addr', 'add', '198.18.9.64/32', 'dev', 'lbds0');
    inNs(D, 'ip', 'addr', 'add', '198.18.9.65/32', 'dev', 'lbds1');
    for (const [address, ifname] of [['198.18.9.64', 'lbds0'], ['198.18.9.65', 'lbds1']] as const) {
      // Broadcast requests for 1 s: every interface that answers is listed, not only the first.
      let out = '';
      try {
        out = inNs(C, 'arping', '-b', '-w', '1', '-I', 'eth0', address);
      } catch (e) {
        out = String((e as { stdout?: string }).stdout ?? '');
      }
      const macs = new Set([...out.matchAll(/\[([0-9A-Fa-f:]{17})\]/g)].map((m) => m[1]!.toLowerCase()));
      assert.deepEqual([...macs], [macOf(D, ifname)], `ARP replies for ${address}:\n${out}`);
    }
  });

  it('SNATs a connection to the pool of the slot it arrived on, and drops one that arrived on the parent', async () => {
    // (The previous test put the next hops on the slots when arping is there; make sure they are.)
    for (const [address, ifname] of [['198.18.9.64', 'lbds0'], ['198.18.9.65', 'lbds1']] as const) {
      inNs(D, 'ip', 'addr', 'replace', `${address}/32`, 'dev', ifname);
    }
    const desired: DesiredState = { services: [ecmpService()], slots: slots() };
    const first = await dataPlane().apply(desired);
    assert.equal(first.fullRebuild, true);

    routeVipVia('198.18.9.64');
    const via0 = await connectFromClient();
    assert.ok(via0 !== null && inRange(via0, POOL0), `via slot 0: the real server saw ${via0}, want an address of ${POOL0.first}-${POOL0.last}`);
    routeVipVia('198.18.9.65');
    const via1 = await connectFromClient();
    assert.ok(via1 !== null && inRange(via1, POOL1), `via slot 1: the real server saw ${via1}, want an address of ${POOL1.first}-${POOL1.last}`);

    const accepted = seen.length;
    const dropsBefore = ecmpDrops();
    routeVipVia('198.18.9.2');
    assert.equal(await connectFromClient(), null, 'a connection that arrived on the parent\'s MAC must not be forwarded');
    assert.equal(seen.length, accepted, 'the real server saw no connection');
    assert.ok(ecmpDrops() > dropsBefore, 'the ecmp_snat chain dropped it');
    assert.match(inNs(C, 'ip', 'neigh', 'show', '198.18.9.2'), new RegExp(macOf(D, 'fab0')));
  });

  it('re-applying writes nothing, a restarted data plane re-adopts without a write, and a slot\'s new pool is one element', async () => {
    const desired: DesiredState = { services: [ecmpService()], slots: slots() };
    const listed = nftD('-s', 'list', 'table', 'ip', 'lbd');
    const dp = dataPlane();
    const again = await dp.apply(desired);
    assert.deepEqual([again.changed, again.operations], [false, []]);
    const restarted = dataPlane();
    const readopted = await restarted.apply(desired);
    assert.deepEqual([readopted.changed, readopted.operations, readopted.fullRebuild], [false, [], false]);
    assert.equal(nftD('-s', 'list', 'table', 'ip', 'lbd'), listed);

    const POOL2 = range('198.18.32.0', '198.18.32.0', 1);
    const moved = await restarted.apply({ services: [ecmpService()], slots: slots(POOL2) });
    assert.deepEqual([moved.fullRebuild, moved.operations], [false, [
      'delete element ip lbd slot_snat { "lbds1" }',
      'add element ip lbd slot_snat { "lbds1" : 198.18.32.0-198.18.32.0 }',
    ]]);
    routeVipVia('198.18.9.65');
    assert.equal(await connectFromClient(), '198.18.32.0');
  });
});
