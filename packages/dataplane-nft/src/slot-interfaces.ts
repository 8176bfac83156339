import { MAX_SLOTS, slotInterface } from '@lbd/config';
import { DataPlaneError } from '@lbd/dataplane';
import type { CommandResult, CommandRunner } from './runner.js';

/**
 * The ECMP tier's slot interfaces (DESIGN.md "ECMP tier"): one macvlan `lbds<i>` per slot on the fabric
 * interface, so each slot has a MAC of its own. The router's ECMP group points at the slots' next-hop
 * addresses; whichever director holds slot i's next hop (on lbds<i>) receives that share of the traffic on
 * lbds<i>, and the table's @slot_snat (model.ts) SNATs it to slot i's local addresses.
 *
 * What a slot interface needs besides existing:
 * - ARP: `arp_ignore=1` on the parent and on every slot (answer only for an address held by the interface
 *   the request came in on) and `arp_announce=2` (ask with the sending interface's own address). A
 *   broadcast request reaches the parent and every macvlan alike; without these the parent (and every
 *   other slot) would answer for slot i's next hop with its own MAC, and the router would send the slot's
 *   share to the wrong interface. (IPv6 needs no setting: the kernel answers a neighbour solicitation only
 *   on the interface that holds the target address; tried here.)
 * - Reverse-path filtering off on the slots: a client's packets arrive on lbds<i> but the route back to the
 *   client leaves through the parent, which strict filtering drops. The kernel applies max(all, interface):
 *   with `net.ipv4.conf.all.rp_filter=1` a 0 on the slot would still mean strict, so there the slot gets 2
 *   (loose: some route back exists), the lowest value that max() lets through (tried here: strict dropped
 *   the slot's traffic, loose passed it). `all` itself is the operator's, and is left alone.
 * - `net.ipv6.conf.lbds<i>.keep_addr_on_down=1`: IPv6 addresses (a slot's next hop) survive a link flap.
 *
 * What this is not for: which director holds a slot (its addresses are claimed and leased like a vip
 * group's, elsewhere), and interfaces that are not named `lbds<n>` (never touched).
 */

/** What prepareSlots changed; all empty when everything was already in place. */
export interface SlotInterfaceChanges {
  readonly created: readonly string[];
  /** Existing interfaces that were not a macvlan in bridge mode on the parent: deleted and created again. */
  readonly replaced: readonly string[];
  /** Slot interfaces at or beyond `count`. */
  readonly removed: readonly string[];
  /** `key=value` of every sysctl written. */
  readonly sysctls: readonly string[];
}

interface LinkInfo {
  readonly ifname: string;
  readonly link?: string;
  readonly flags?: readonly string[];
  readonly linkinfo?: { readonly info_kind?: string; readonly info_data?: { readonly mode?: string } };
}

const SLOT_NAME = /^lbds(\d+)$/;

function failed(detail: string, res?: CommandResult): DataPlaneError {
  const why = res ? `: ${res.stderr.trim() || `exit ${res.code}`}` : '';
  if (res && /Operation not permitted|Permission denied/i.test(res.stderr)) {
    return new DataPlaneError('PermissionDenied', 'prepareSlots', { detail: `${detail}${why} (lbd-agent needs CAP_NET_ADMIN)` });
  }
  if (res?.code === 127) return new DataPlaneError('CommandMissing', 'prepareSlots', { detail: `${detail}: ${res.stderr.trim()} (install iproute2 and procps)` });
  return new DataPlaneError('Unknown', 'prepareSlots', { detail: `${detail}${why}` });
}

async function must(runner: CommandRunner, what: string, command: string, args: readonly string[]): Promise<CommandResult> {
  const res = await runner.run(command, args);
  if (res.code !== 0) throw failed(what, res);
  return res;
}

/** One per-interface sysctl: `net/ipv4/conf/<ifname>/<name>` (slashes: an interface name may hold dots). */
interface Setting {
  readonly proto: 'ipv4' | 'ipv6';
  readonly ifname: string;
  readonly name: string;
  value: string;
}

const procPath = (s: { proto: string; ifname: string; name: string }): string => `/proc/sys/net/${s.proto}/conf/${s.ifname}/${s.name}`;

/**
 * Current values, by /proc/sys path. Read as files (`grep -H`: path:value, one process for all) rather than
 * with `sysctl`, which prints a dotted interface name as `eth0/100` and leaves out keys it lacks without
 * saying which. A missing file (IPv6 off) is simply absent.
 */
async function readSettings(runner: CommandRunner, paths: readonly string[]): Promise<Map<string, string>> {
  const res = await runner.run('grep', ['-s', '-H', '', ...paths]);
  if (res.code > 2) throw failed('read sysctls', res); // 1: nothing read, 2: a file is missing
  const out = new Map<string, string>();
  for (const line of res.stdout.split('\n')) {
    const i = line.lastIndexOf(':');
    if (i > 0) out.set(line.slice(0, i), line.slice(i + 1).trim());
  }
  return out;
}

/** A correct slot interface: a macvlan in bridge mode whose lower device is `parent`. */
function isSlotOn(link: LinkInfo, parent: string): boolean {
  return link.linkinfo?.info_kind === 'macvlan' && link.linkinfo.info_data?.mode === 'bridge' && link.link === parent;
}

/**
 * Makes `lbds0`…`lbds<count-1>` exist as macvlans on `parent`, up, with the settings above, and removes
 * `lbds<n>` for n >= count. Idempotent: a correct interface is left as it is (its addresses, its MAC).
 */
export async function prepareSlotInterfaces(runner: CommandRunner, parent: string, count: number): Promise<SlotInterfaceChanges> {
  if (!Number.isInteger(count) || count < 0 || count > MAX_SLOTS) {
    throw new DataPlaneError('Unknown', 'prepareSlots', { detail: `slot count ${count} must be a whole number from 0 to ${MAX_SLOTS}` });
  }
  if (SLOT_NAME.test(parent)) {
    throw new DataPlaneError('Unknown', 'prepareSlots', {
      detail: `parent interface ${parent} is itself a slot interface; give the fabric interface the slots' macvlans go on (e.g. eth0)`,
    });
  }
  const listed = await must(runner, 'list interfaces', 'ip', ['-j', '-d', 'link', 'show']);
  const links = new Map((JSON.parse(listed.stdout || '[]') as LinkInfo[]).map((l) => [l.ifname, l]));
  if (!links.has(parent)) {
    throw new DataPlaneError('Unknown', 'prepareSlots', {
      detail: `parent interface ${parent} does not exist, so the slot interfaces (${slotInterface(0)}…) cannot be created on it; `
        + `set the ECMP tier's fabric interface (agent.cluster.ecmp.interface) to one that exists here (ip link show), or create ${parent} first`,
    });
  }
  const created: string[] = [];
  const replaced: string[] = [];
  const removed: string[] = [];
  for (const [name, link] of links) {
    const m = SLOT_NAME.exec(name);
    // Only lbd's own: macvlans named as slotInterface() names them, beyond the count.
    if (m === null || slotInterface(Number(m[1])) !== name || Number(m[1]) < count || link.linkinfo?.info_kind !== 'macvlan') continue;
    await must(runner, `remove ${name}`, 'ip', ['link', 'del', name]);
    removed.push(name);
  }
  const wanted = Array.from({ length: count }, (_, i) => slotInterface(i));
  for (const name of wanted) {
    const link = links.get(name);
    if (link && isSlotOn(link, parent)) continue;
    if (link) {
      await must(runner, `replace ${name}`, 'ip', ['link', 'del', name]);
      replaced.push(name);
    } else {
      created.push(name);
    }
    await must(runner, `create ${name} on ${parent}`, 'ip', ['link', 'add', name, 'link', parent, 'type', 'macvlan', 'mode', 'bridge']);
  }
  // Settings before `up`, so a new slot never answers ARP the wrong way or drops a packet.
  const sysctls = await settle(runner, parent, wanted);
  for (const name of wanted) {
    const link = links.get(name);
    if (link && isSlotOn(link, parent) && link.flags?.includes('UP')) continue;
    await must(runner, `bring ${name} up`, 'ip', ['link', 'set', name, 'up']);
  }
  return { created, replaced, removed, sysctls };
}

/** Writes the sysctls that differ from what the slots need; returns them as `key=value`. */
async function settle(runner: CommandRunner, parent: string, slots: readonly string[]): Promise<string[]> {
  const settings: Setting[] = [];
  for (const ifname of [parent, ...slots]) {
    settings.push({ proto: 'ipv4', ifname, name: 'arp_ignore', value: '1' }, { proto: 'ipv4', ifname, name: 'arp_announce', value: '2' });
  }
  for (const ifname of slots) {
    settings.push({ proto: 'ipv4', ifname, name: 'rp_filter', value: '0' }, { proto: 'ipv6', ifname, name: 'keep_addr_on_down', value: '1' });
  }
  const all = procPath({ proto: 'ipv4', ifname: 'all', name: 'rp_filter' });
  const now = await readSettings(runner, [all, ...settings.map(procPath)]);
  if (now.get(all) === '1') for (const s of settings) if (s.name === 'rp_filter') s.value = '2';
  // An IPv6 setting the kernel does not have (IPv6 off) is not needed; an IPv4 one must be written.
  const writes = settings.filter((s) => now.get(procPath(s)) !== s.value && (now.has(procPath(s)) || s.proto === 'ipv4'));
  if (writes.length === 0) return [];
  // sysctl takes slash-separated keys as they are, dots in interface names included.
  const args = writes.map((s) => `net/${s.proto}/conf/${s.ifname}/${s.name}=${s.value}`);
  await must(runner, `write sysctls ${args.join(' ')}`, 'sysctl', ['-q', '-w', ...args]);
  return writes.map((s) => `net.${s.proto}.conf.${s.ifname}.${s.name}=${s.value}`);
}
