import assert from 'node:assert/strict';
import { DataPlaneError } from '@lbd/dataplane';
import type { CommandResult, CommandRunner } from './runner.js';
import { prepareSlotInterfaces } from './slot-interfaces.js';

/**
 * prepareSlotInterfaces against a scripted runner: which commands it runs for which kernel state. The
 * privileged test (slots.privileged.test.ts) runs the same against real interfaces.
 */

interface FakeLink {
  ifname: string;
  link?: string;
  flags?: string[];
  linkinfo?: { info_kind: string; info_data?: { mode: string } };
}

const macvlan = (ifname: string, parent: string, up = true): FakeLink => ({
  ifname, link: parent, flags: up ? ['BROADCAST', 'UP'] : ['BROADCAST'], linkinfo: { info_kind: 'macvlan', info_data: { mode: 'bridge' } },
});
const plain = (ifname: string): FakeLink => ({ ifname, flags: ['UP'] });

/** Every /proc/sys value a correct two-slot setup on eth0 has. */
function settled(slots: readonly string[] = ['lbds0', 'lbds1'], parent = 'eth0'): Record<string, string> {
  const v: Record<string, string> = { '/proc/sys/net/ipv4/conf/all/rp_filter': '0' };
  for (const i of [parent, ...slots]) {
    v[`/proc/sys/net/ipv4/conf/${i}/arp_ignore`] = '1';
    v[`/proc/sys/net/ipv4/conf/${i}/arp_announce`] = '2';
  }
  for (const i of slots) {
    v[`/proc/sys/net/ipv4/conf/${i}/rp_filter`] = '0';
    v[`/proc/sys/net/ipv6/conf/${i}/keep_addr_on_down`] = '1';
  }
  return v;
}

/** Fresh interfaces' defaults: the kernel's 0s, for every key asked about. */
function defaults(parent = 'eth0'): Record<string, string> {
  return Object.fromEntries(Object.keys(settled(['lbds0', 'lbds1'], parent)).map((k) => [k, '0']));
}

function fakeRunner(links: FakeLink[], sysctls: Record<string, string>, fail: (cmd: string) => CommandResult | null = () => null) {
  const calls: string[] = [];
  const runner: CommandRunner = {
    async run(command, args): Promise<CommandResult> {
      const line = [command, ...args].join(' ');
      const failure = fail(line);
      if (failure) return failure;
      if (line === 'ip -j -d link show') return { code: 0, stdout: JSON.stringify(links), stderr: '' };
      if (command === 'grep') {
        const paths = args.slice(3);
        const found = paths.filter((p) => p in sysctls);
        return { code: found.length < paths.length ? 2 : 0, stdout: found.map((p) => `${p}:${sysctls[p]}\n`).join(''), stderr: '' };
      }
      calls.push(line);
      return { code: 0, stdout: '', stderr: '' };
    },
  };
  return { runner, calls };
}

const add = (n: string, parent = 'eth0'): string => `ip link add ${n} link ${parent} type macvlan mode bridge`;
const up = (n: string): string => `ip link set ${n} up`;

describe('prepareSlotInterfaces', () => {
  const cases: Array<{ name: string; links: FakeLink[]; sysctls: Record<string, string>; count?: number; calls: string[]; changes?: Record<string, string[]> }> = [
    {
      name: 'creates missing slots, writes their settings before bringing them up',
      links: [plain('lo'), plain('eth0')],
      sysctls: defaults(),
      calls: [
        add('lbds0'), add('lbds1'),
        'sysctl -q -w net/ipv4/conf/eth0/arp_ignore=1 net/ipv4/conf/eth0/arp_announce=2 net/ipv4/conf/lbds0/arp_ignore=1 '
          + 'net/ipv4/conf/lbds0/arp_announce=2 net/ipv4/conf/lbds1/arp_ignore=1 net/ipv4/conf/lbds1/arp_announce=2 '
          + 'net/ipv6/conf/lbds0/keep_addr_on_down=1 net/ipv6/conf/lbds1/keep_addr_on_down=1',
        up('lbds0'), up('lbds1'),
      ],
      changes: { created: ['lbds0', 'lbds1'], replaced: [], removed: [] },
    },
    {
      name: 'leaves correct slots alone: nothing to run',
      links: [plain('eth0'), macvlan('lbds0', 'eth0'), macvlan('lbds1', 'eth0')],
      sysctls: settled(),
      calls: [],
      changes: { created: [], replaced: [], removed: [], sysctls: [] },
    },
    {
      name: 'brings a correct slot that is down back up',
      links: [plain('eth0'), macvlan('lbds0', 'eth0', false), macvlan('lbds1', 'eth0')],
      sysctls: settled(),
      calls: [up('lbds0')],
    },
    {
      name: 'replaces a slot on another parent, removes lbd\'s slots beyond the count, leaves other interfaces',
      links: [plain('eth0'), plain('eth1'), macvlan('lbds0', 'eth0'), macvlan('lbds1', 'eth1'), macvlan('lbds3', 'eth0'), plain('lbds4'), macvlan('lbds01', 'eth0')],
      sysctls: settled(),
      calls: ['ip link del lbds3', 'ip link del lbds1', add('lbds1'), up('lbds1')],
      changes: { created: [], replaced: ['lbds1'], removed: ['lbds3'] },
    },
    {
      name: 'count 0 removes every slot',
      links: [plain('eth0'), macvlan('lbds0', 'eth0'), macvlan('lbds1', 'eth0')],
      sysctls: settled([]),
      count: 0,
      calls: ['ip link del lbds0', 'ip link del lbds1'],
    },
    {
      name: 'with strict rp_filter on all, the slots get loose (the kernel takes the max of all and the interface)',
      links: [plain('eth0'), macvlan('lbds0', 'eth0'), macvlan('lbds1', 'eth0')],
      sysctls: { ...settled(), '/proc/sys/net/ipv4/conf/all/rp_filter': '1' },
      calls: ['sysctl -q -w net/ipv4/conf/lbds0/rp_filter=2 net/ipv4/conf/lbds1/rp_filter=2'],
    },
    {
      name: 'without IPv6 (no keep_addr_on_down to read) only IPv4 settings are written',
      links: [plain('eth0'), macvlan('lbds0', 'eth0'), macvlan('lbds1', 'eth0')],
      sysctls: Object.fromEntries(Object.entries({ ...settled(), '/proc/sys/net/ipv4/conf/lbds1/arp_ignore': '0' }).filter(([k]) => !k.includes('ipv6'))),
      calls: ['sysctl -q -w net/ipv4/conf/lbds1/arp_ignore=1'],
    },
    {
      name: 'a parent whose name has a dot is written with slashes',
      links: [plain('eth0.100'), macvlan('lbds0', 'eth0.100')],
      sysctls: { ...settled(['lbds0'], 'eth0.100'), '/proc/sys/net/ipv4/conf/eth0.100/arp_ignore': '0' },
      count: 1,
      calls: ['sysctl -q -w net/ipv4/conf/eth0.100/arp_ignore=1'],
    },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      const parent = c.links.find((l) => l.ifname.startsWith('eth0'))!.ifname;
      const { runner, calls } = fakeRunner(c.links, c.sysctls);
      const changes = await prepareSlotInterfaces(runner, parent, c.count ?? 2);
      assert.deepEqual(calls, c.calls);
      if (c.changes) for (const [k, v] of Object.entries(c.changes)) assert.deepEqual(changes[k as keyof typeof changes], v, k);
    });
  }

  it('names a missing parent and the fix, and creates nothing', async () => {
    const { runner, calls } = fakeRunner([plain('eth0')], defaults());
    await assert.rejects(prepareSlotInterfaces(runner, 'fabric0', 2), (err: Error) => {
      assert.ok(err instanceof DataPlaneError);
      assert.match(err.message, /^prepareSlots: Unknown: parent interface fabric0 does not exist, so the slot interfaces \(lbds0…\) cannot be created on it; .*ip link show/);
      return true;
    });
    assert.deepEqual(calls, []);
  });

  it('refuses a slot interface as parent and a count beyond the tier\'s limit', async () => {
    const { runner } = fakeRunner([plain('eth0'), macvlan('lbds0', 'eth0')], settled());
    await assert.rejects(prepareSlotInterfaces(runner, 'lbds0', 1), /parent interface lbds0 is itself a slot interface/);
    await assert.rejects(prepareSlotInterfaces(runner, 'eth0', 65), /slot count 65 must be a whole number from 0 to 64/);
    await assert.rejects(prepareSlotInterfaces(runner, 'eth0', 1.5), /slot count 1.5/);
  });

  it('reports a refused command as PermissionDenied, naming what it tried', async () => {
    const denied = (line: string): CommandResult | null => (line.startsWith('ip link add') ? { code: 2, stdout: '', stderr: 'RTNETLINK answers: Operation not permitted' } : null);
    const { runner } = fakeRunner([plain('eth0')], defaults(), denied);
    await assert.rejects(prepareSlotInterfaces(runner, 'eth0', 1), (err: Error) => {
      assert.ok(err instanceof DataPlaneError && err.kind === 'PermissionDenied');
      assert.match(err.message, /create lbds0 on eth0: RTNETLINK answers: Operation not permitted \(lbd-agent needs CAP_NET_ADMIN\)/);
      return true;
    });
  });
});
