import { serviceKey, type Service } from '@lbd/config';
import { DataPlaneError, type DesiredSlot } from '@lbd/dataplane';
import { layered } from './layered-map.js';
import {
  realServerKey, effectiveRealServers, emptyTable, familyName, MAX_MARK_ID, renderService, renderSlotSnat, SCHEMA_VERSION, serviceMark,
  type NftFamily, type ServiceFragment, type TableModel,
} from './model.js';

/**
 * Planning an apply: which fragments to keep, which to render anew, which marks to give, and what leaves.
 * Pure. Unchanged services keep their fragment object, so the diff skips them without looking inside.
 */

export interface Leaving {
  /** Removed real servers' marks, per family (their counters must be forgotten). */
  readonly removed: Record<NftFamily, Set<number>>;
  /** Removed services' marks (`id << 16`), per family. */
  readonly removedServices: Record<NftFamily, Set<number>>;
  /** Marks whose persistence entries must go: removed, or gone quiescent in a persistent service. */
  readonly affinity: Record<NftFamily, Set<number>>;
  /** Marks whose connections must be expired: removed from a service with expireOnRemove. */
  readonly expire: number[];
}

export interface Plan {
  readonly models: Record<NftFamily, TableModel>;
  readonly leaving: Leaving;
  /** The service keys whose fragment is not the previous one (changed, new or gone), per family: diffTables' `keys`. */
  readonly changed: Record<NftFamily, ReadonlySet<string>>;
}

const fingerprints = new WeakMap<Service, string>();
const keysOf = new WeakMap<Service, string>();

/** serviceKey, remembered per object: the agent passes the same objects for unchanged services. */
function keyOf(svc: Service): string {
  let key = keysOf.get(svc);
  if (key === undefined) {
    key = serviceKey(svc);
    keysOf.set(svc, key);
  }
  return key;
}

function fingerprint(svc: Service): string {
  let fp = fingerprints.get(svc);
  if (fp === undefined) {
    fp = JSON.stringify(svc);
    fingerprints.set(svc, fp);
  }
  return fp;
}

function sameService(a: Service | null, b: Service): boolean {
  return a !== null && (a === b || fingerprint(a) === fingerprint(b));
}

/** Hands out the smallest free ids in increasing order: O(n) for n allocations. */
class IdAllocator {
  private next = 1;
  private usedIds: Set<number> | null = null;
  /** `used`: the ids taken already, asked for only when an id is first needed (a changed service keeps its own). */
  constructor(private readonly used: Set<number> | (() => Set<number>), private readonly what: string) {}
  take(): number {
    this.usedIds ??= typeof this.used === 'function' ? this.used() : this.used;
    while (this.usedIds.has(this.next)) this.next++;
    if (this.next > MAX_MARK_ID) {
      throw new DataPlaneError('InvalidRuleset', 'apply', { detail: `more than ${MAX_MARK_ID} ${this.what}` });
    }
    this.usedIds.add(this.next);
    return this.next;
  }
}

/**
 * `slots`: the ECMP tier's (DesiredState.slots). They are table-wide, a handful of elements, rendered anew
 * each time; the diff compares them by content.
 *
 * `plannedFrom`: the services `previous` was planned from, when the caller knows (the data plane, after an
 * apply of its own). Then only the positions whose Service object differs are looked at: a one-server
 * change at 10 000 services looks up one service, not 10 000 (each lookup about 0.25 µs here, a few ms
 * in all). Its keys must be unique, as validated configs' are.
 */
export function planTables(
  services: readonly Service[], previous: Record<NftFamily, TableModel | null>, slots: readonly DesiredSlot[] = [], plannedFrom?: readonly Service[],
): Plan {
  const prevOf = (svc: Service, key: string): ServiceFragment | undefined => previous[familyName(svc.family)]?.services.get(key);
  // What differs from the previous services, per family: the new tables are the previous ones with these
  // set or deleted (layered, not copied: unchanged services are not touched at all).
  const set: Record<NftFamily, Map<string, ServiceFragment>> = { ip: new Map(), ip6: new Map() };
  const gone: Record<NftFamily, string[]> = { ip: [], ip6: [] };
  const changed: Record<NftFamily, Set<string>> = { ip: new Set(), ip6: new Set() };
  const pending: Array<[Service, string, ServiceFragment | undefined]> = [];
  const moved = plannedFrom === undefined ? null : movedPositions(services, plannedFrom);
  if (moved !== null) {
    // The services at the other positions are the very objects `previous` was planned from.
    const now = new Set<string>();
    for (const i of moved) {
      const svc = services[i]!;
      const key = keyOf(svc);
      now.add(`${svc.family} ${key}`);
      const p = prevOf(svc, key);
      if (!p || !sameService(p.source, svc)) pending.push([svc, key, p]);
    }
    // A key that was at a moved position is gone unless a moved service has it now (keys are unique).
    for (const i of moved) {
      const was = plannedFrom![i]!;
      const key = keyOf(was);
      const family = familyName(was.family);
      if (!now.has(`${was.family} ${key}`) && previous[family]?.services.has(key)) { gone[family].push(key); changed[family].add(key); }
    }
  } else {
    const kept: Record<NftFamily, number> = { ip: 0, ip6: 0 };
    for (const svc of services) {
      const key = keyOf(svc);
      const p = prevOf(svc, key);
      if (p) kept[familyName(svc.family)]++;
      if (!p || !sameService(p.source, svc)) pending.push([svc, key, p]);
    }
    for (const family of ['ip', 'ip6'] as const) {
      const before = previous[family]?.services;
      // Gone: previous services no desired one has the key of (none, when every previous one was kept).
      if (before === undefined || kept[family] === before.size) continue;
      const desired = new Set(services.filter((svc) => familyName(svc.family) === family).map(keyOf));
      for (const key of before.keys()) {
        if (desired.has(key)) continue;
        gone[family].push(key);
        changed[family].add(key);
      }
    }
  }
  if (pending.length > 0) {
    // Ids in use: those of every service that keeps its id (every desired service that had one). Read only
    // when a service needs a new id: a changed service keeps its own.
    const serviceIds = new IdAllocator(() => {
      const used = new Set<number>();
      for (const svc of services) {
        const id = prevOf(svc, keyOf(svc))?.serviceId ?? 0;
        if (id > 0) used.add(id);
      }
      return used;
    }, 'services');
    // In key order, so that every director gives the same services the same ids whatever the config order.
    pending.sort(([, a], [, b]) => (a < b ? -1 : a > b ? 1 : 0));
    for (const [svc, key, p] of pending) {
      const family = familyName(svc.family);
      set[family].set(key, renderAnew(svc, key, p, serviceIds));
      changed[family].add(key);
    }
  }
  const next = { ip: layered(previous.ip?.services, set.ip, gone.ip), ip6: layered(previous.ip6?.services, set.ip6, gone.ip6) };
  const models = {
    ip: { ...emptyTable('ip'), schema: SCHEMA_VERSION, services: next.ip, slotSnat: renderSlotSnat('ip', slots) },
    ip6: { ...emptyTable('ip6'), schema: SCHEMA_VERSION, services: next.ip6, slotSnat: renderSlotSnat('ip6', slots) },
  };
  return { models, leaving: leaving(previous, models, changed), changed };
}


/**
 * The positions whose Service object is not the one `plannedFrom` had there, or null when the lists differ
 * in length or in more than an eighth of their positions (then every service is looked up anyway).
 */
function movedPositions(services: readonly Service[], plannedFrom: readonly Service[]): number[] | null {
  if (services.length !== plannedFrom.length) return null;
  const moved: number[] = [];
  for (let i = 0; i < services.length; i++) {
    if (services[i] === plannedFrom[i]) continue;
    moved.push(i);
    if (moved.length * 8 > services.length) return null;
  }
  return moved;
}

/** A changed or new service: keeps its id and its real servers' marks, gives new ones the smallest free. */
function renderAnew(svc: Service, key: string, p: ServiceFragment | undefined, serviceIds: IdAllocator): ServiceFragment {
  // 0: read back from the kernel with no real servers, so no mark tells its id.
  const serviceId = p && p.serviceId > 0 ? p.serviceId : serviceIds.take();
  const base = serviceMark(serviceId);
  const marks = new Map<string, number>();
  const used = new Set<number>();
  const fresh: string[] = [];
  for (const rs of effectiveRealServers(svc)) {
    const bk = realServerKey(key, rs.address, rs.port);
    const old = p?.realServerMarks.get(bk);
    if (old !== undefined) {
      marks.set(bk, old);
      used.add(old - base);
    } else {
      fresh.push(bk);
    }
  }
  const rsIds = new IdAllocator(used, `real servers in ${key}`);
  for (const bk of fresh.sort()) marks.set(bk, base + rsIds.take());
  return renderService(svc, serviceId, marks, key);
}

function leaving(previous: Record<NftFamily, TableModel | null>, models: Record<NftFamily, TableModel>, changed: Record<NftFamily, ReadonlySet<string>>): Leaving {
  const perFamily = (): Record<NftFamily, Set<number>> => ({ ip: new Set(), ip6: new Set() });
  const out: Leaving = { removed: perFamily(), removedServices: perFamily(), affinity: perFamily(), expire: [] };
  for (const family of ['ip', 'ip6'] as const) for (const key of changed[family]) {
    const old = previous[family]?.services.get(key);
    if (old === undefined) continue; // new
    const now = models[family].services.get(key);
    if (now === old) continue;
    if (!now) out.removedServices[family].add(serviceMark(old.serviceId));
    const svc = now?.source ?? old.source;
    // Unknown settings (a service read back from the kernel and now removed): assume persistence, so
    // affinity entries are looked for rather than left behind.
    const persistent = svc === null || svc.persistenceSec > 0;
    for (const [bk, mark] of old.realServerMarks) {
      const wasEligible = old.elements.eligible.has(String(mark));
      if (!now?.realServerMarks.has(bk)) {
        out.removed[family].add(mark);
        if (wasEligible && persistent) out.affinity[family].add(mark);
        if (svc?.expireOnRemove) out.expire.push(mark);
      } else if (wasEligible && persistent && !now.elements.eligible.has(String(mark))) {
        out.affinity[family].add(mark);
      }
    }
  }
  return out;
}
