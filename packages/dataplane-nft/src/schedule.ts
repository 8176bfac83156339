import type { Scheduler, Service } from '@lbd/config';
import { buildMaglevTable, maglevTableSize } from './maglev.js';

/**
 * Turns a service's scheduler and weights into a slot table: `slots[i]` is the index of the real server
 * that slot i sends new connections to, and the selector says how a packet picks a slot. The kernel gets
 * the table as interval map elements (runs of equal slots), so the per-packet cost is one map lookup
 * whatever the scheduler.
 */

export type Selector =
  /** `numgen inc mod L`: rr and wrr, a counter per slot-table length. */
  | 'numgen'
  /** `jhash saddr mod L`: sh, the same client address always gets the same slot. */
  | 'srchash'
  /** `jhash saddr . sport mod L`: mh, a connection always gets the same slot (Maglev table). */
  | 'flowhash';

export interface SlotTable {
  readonly selector: Selector;
  /** Table length L (the modulus); 0 when no real server may take new connections. */
  readonly length: number;
  /** Real-server index per slot. */
  readonly slots: readonly number[];
}

/** Longest wrr/sh cycle; larger weight sums are scaled down to it (precision better than 0.1 %). */
export const MAX_WEIGHTED_CYCLE = 1024;

function selectorFor(scheduler: Scheduler): Selector {
  switch (scheduler) {
    case 'rr':
    case 'wrr':
      return 'numgen';
    case 'sh':
      return 'srchash';
    case 'mh':
      return 'flowhash';
  }
}

function gcd(a: number, b: number): number {
  while (b) [a, b] = [b, a % b];
  return a;
}

/** Weights reduced by their gcd and, when their sum exceeds the cap, scaled down keeping every one ≥ 1. */
export function reduceWeights(weights: readonly number[], cap = MAX_WEIGHTED_CYCLE): number[] {
  const g = weights.filter((w) => w > 0).reduce(gcd, 0);
  if (g === 0) return weights.map(() => 0);
  let reduced = weights.map((w) => w / g);
  const sum = reduced.reduce((a, b) => a + b, 0);
  if (sum > cap) {
    const k = cap / sum;
    reduced = reduced.map((w) => (w === 0 ? 0 : Math.max(1, Math.round(w * k))));
  }
  return reduced;
}

/**
 * Smooth weighted round robin (as nginx): the sequence interleaves servers instead of sending a burst to
 * each, and over one cycle each server gets exactly its weight.
 */
export function smoothWeightedSequence(weights: readonly number[]): number[] {
  const total = weights.reduce((a, b) => a + b, 0);
  const current = weights.map(() => 0);
  const out: number[] = [];
  for (let n = 0; n < total; n++) {
    let best = -1;
    for (let i = 0; i < weights.length; i++) {
      if (weights[i]! <= 0) continue;
      current[i]! += weights[i]!;
      if (best < 0 || current[i]! > current[best]!) best = i;
    }
    current[best]! -= total;
    out.push(best);
  }
  return out;
}

export function buildSlotTable(service: Pick<Service, 'scheduler' | 'realServers'>): SlotTable {
  const selector = selectorFor(service.scheduler);
  const servers = service.realServers;
  const weights = servers.map((rs) => rs.weight);
  if (!weights.some((w) => w > 0)) return { selector, length: 0, slots: [] };
  switch (service.scheduler) {
    case 'rr': {
      const slots = servers.flatMap((rs, i) => (rs.weight > 0 ? [i] : []));
      return { selector, length: slots.length, slots };
    }
    case 'wrr':
    case 'sh': {
      const slots = smoothWeightedSequence(reduceWeights(weights));
      return { selector, length: slots.length, slots };
    }
    case 'mh': {
      const size = maglevTableSize(servers.length);
      const table = buildMaglevTable(servers.map((rs) => ({ name: `${rs.address}#${rs.port}`, weight: rs.weight })), size);
      return { selector, length: size, slots: Array.from(table) };
    }
  }
}
