import { serviceKey, type Service } from '@lbd/config';
import { DataPlaneError, type DesiredSlot } from '@lbd/dataplane';
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
  constructor(private readonly used: Set<number>, private readonly what: string) {}
  take(): number {
    while (this.used.has(this.next)) this.next++;
    if (this.next > MAX_MARK_ID) {
      throw new DataPlaneError('InvalidRuleset', 'apply', { detail: `more than ${MAX_MARK_ID} ${this.what}` });
    }
    this.used.add(this.next);
    return this.next;
  }
}

/**
 * `slots`: the ECMP tier's (DesiredState.slots). They are table-wide, a handful of elements, rendered anew
 * each time; the diff compares them by content.
 */
export function planTables(services: readonly Service[], previous: Record<NftFamily, TableModel | null>, slots: readonly DesiredSlot[] = []): Plan {
  const prevOf = (svc: Service, key: string): ServiceFragment | undefined => previous[familyName(svc.family)]?.services.get(key);
  const next: Record<NftFamily, Map<string, ServiceFragment>> = { ip: new Map(), ip6: new Map() };
  const pending: Array<[Service, string, ServiceFragment | undefined]> = [];
  for (const svc of services) {
    const key = keyOf(svc);
    const p = prevOf(svc, key);
    if (p && sameService(p.source, svc)) next[familyName(svc.family)].set(key, p);
    else pending.push([svc, key, p]);
  }
  if (pending.length > 0) {
    // Ids in use: those of every service that keeps its id (every desired service that had one).
    const usedServiceIds = new Set<number>();
    for (const svc of services) {
      const id = prevOf(svc, keyOf(svc))?.serviceId ?? 0;
      if (id > 0) usedServiceIds.add(id);
    }
    const serviceIds = new IdAllocator(usedServiceIds, 'services');
    // In key order, so that every director gives the same services the same ids whatever the config order.
    pending.sort(([, a], [, b]) => (a < b ? -1 : a > b ? 1 : 0));
    for (const [svc, key, p] of pending) next[familyName(svc.family)].set(key, renderAnew(svc, key, p, serviceIds));
  }
  const models = {
    ip: { ...emptyTable('ip'), schema: SCHEMA_VERSION, services: next.ip, slotSnat: renderSlotSnat('ip', slots) },
    ip6: { ...emptyTable('ip6'), schema: SCHEMA_VERSION, services: next.ip6, slotSnat: renderSlotSnat('ip6', slots) },
  };
  return { models, leaving: leaving(previous, models) };
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
  return renderService(svc, serviceId, marks);
}

function leaving(previous: Record<NftFamily, TableModel | null>, models: Record<NftFamily, TableModel>): Leaving {
  const perFamily = (): Record<NftFamily, Set<number>> => ({ ip: new Set(), ip6: new Set() });
  const out: Leaving = { removed: perFamily(), removedServices: perFamily(), affinity: perFamily(), expire: [] };
  for (const family of ['ip', 'ip6'] as const) for (const [key, old] of previous[family]?.services ?? []) {
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
