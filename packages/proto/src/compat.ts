import { readdirSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import protobuf from 'protobufjs';

/*
 * Wire compatibility between two versions of lbd's .proto files: what lets directors of two adjacent
 * versions (a rolling upgrade) and an lbadm of either version understand each other. The files of every
 * release are kept under proto/compat/<version>/; a test holds the current files to each of them.
 *
 * The rules are those of the binary wire format (what buf calls WIRE), made strict where loose ones would
 * only hide mistakes:
 *   - every message and enum of the old files still exists, under the same full name;
 *   - every field number of an old message is still there with the same type (scalar kind, or the same
 *     message or enum), and repeated stays repeated; or its number is reserved. Names may change;
 *   - every value number of an old enum is still there, or reserved;
 *   - every method of an old service is still there, at the same path, with the same request and
 *     response types and the same streaming on each side.
 * New messages, fields, values, services and methods are fine: an old peer skips what it does not know.
 */

/** Every .proto under `root`, as paths relative to it (the loader's include directory). */
export function protoFiles(root: string): string[] {
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const e of readdirSync(join(root, dir), { withFileTypes: true })) {
      const rel = dir === '' ? e.name : `${dir}/${e.name}`;
      if (e.isDirectory()) {
        // proto/compat holds the old releases' files, not a part of the current API.
        if (!(dir === '' && e.name === 'compat')) walk(rel);
      } else if (e.name.endsWith('.proto')) out.push(rel);
    }
  };
  walk('');
  return out.sort();
}

/** Every message, enum and service of the .proto files under `root`, by full name (no leading dot). */
export type ProtoTree = ReadonlyMap<string, protobuf.Type | protobuf.Enum | protobuf.Service>;

/** Loads every .proto under `root` (imports resolved from it, as the services' include directory). */
export function loadProtoTree(root: string): ProtoTree {
  const r = new protobuf.Root();
  r.resolvePath = (_origin, target) => (isAbsolute(target) ? target : join(root, target));
  r.loadSync(protoFiles(root), { keepCase: true });
  r.resolveAll();
  const out = new Map<string, protobuf.Type | protobuf.Enum | protobuf.Service>();
  const walk = (ns: protobuf.NamespaceBase): void => {
    for (const o of ns.nestedArray) {
      if (o instanceof protobuf.Type || o instanceof protobuf.Enum || o instanceof protobuf.Service) out.set(o.fullName.replace(/^\./, ''), o);
      if (o instanceof protobuf.Namespace) walk(o);
    }
  };
  walk(r);
  return out;
}

/**
 * Whether `id` is reserved in `o`. Not protobufjs's isReservedId: its parser keeps ranges with their end
 * included, as the .proto syntax writes them (`reserved 2;` is [2, 2]), and isReservedId reads the end as
 * excluded, so it never finds a single reserved number.
 */
function reservedId(o: protobuf.Type | protobuf.Enum, id: number): boolean {
  return (o.reserved ?? []).some((r) => typeof r !== 'string' && r[0]! <= id && id <= r[1]!);
}

function kindOf(o: protobuf.Type | protobuf.Enum | protobuf.Service): string {
  return o instanceof protobuf.Type ? 'message' : o instanceof protobuf.Enum ? 'enum' : 'service';
}

function typeShape(f: protobuf.Field): string {
  return f.resolvedType !== null ? f.resolvedType.fullName.replace(/^\./, '') : f.type;
}

function fieldShape(f: protobuf.Field): string {
  if (f instanceof protobuf.MapField) return `map<${f.keyType}, ${typeShape(f)}>`;
  return `${f.repeated ? 'repeated ' : ''}${typeShape(f)}`;
}

function methodShape(service: protobuf.Service, m: protobuf.Method): string {
  const name = (t: protobuf.Type | undefined, raw: string): string => t?.fullName.replace(/^\./, '') ?? raw;
  return `/${service.fullName.replace(/^\./, '')}/${m.name} (${m.requestStream === true ? 'stream ' : ''}${name(m.resolvedRequestType ?? undefined, m.requestType)})`
    + ` returns (${m.responseStream === true ? 'stream ' : ''}${name(m.resolvedResponseType ?? undefined, m.responseType)})`;
}

/**
 * What breaks on the wire between `old` and `current` (loadProtoTree of each), one line per problem naming
 * the element, what changed and how to keep it compatible. Empty when an old peer and a current one
 * understand each other.
 */
export function wireCompatibilityProblems(old: ProtoTree, current: ProtoTree): string[] {
  const problems: string[] = [];
  for (const [name, was] of old) {
    const is = current.get(name);
    if (is === undefined) {
      problems.push(`${kindOf(was)} ${name} is gone: keep it (a peer of the old version still sends or calls it)`);
      continue;
    }
    if (kindOf(is) !== kindOf(was)) {
      problems.push(`${name} was a ${kindOf(was)} and is now a ${kindOf(is)}: keep the ${kindOf(was)}`);
      continue;
    }
    if (was instanceof protobuf.Type && is instanceof protobuf.Type) {
      for (const f of was.fieldsArray) {
        const g = is.fieldsById[f.id];
        if (g === undefined) {
          if (!reservedId(is, f.id)) problems.push(`${name}: field ${f.id} (${f.name}) removed without reserving its number: add \`reserved ${f.id};\` so it is never reused`);
        } else if (fieldShape(g) !== fieldShape(f)) {
          problems.push(`${name}: field ${f.id} (${f.name}) changed from ${fieldShape(f)} to ${fieldShape(g)}: a peer of the old version reads it as ${fieldShape(f)}; add a new field instead`);
        }
      }
    } else if (was instanceof protobuf.Enum && is instanceof protobuf.Enum) {
      const values = new Set(Object.values(is.values));
      for (const [value, n] of Object.entries(was.values)) {
        if (!values.has(n) && !reservedId(is, n)) problems.push(`${name}: value ${n} (${value}) removed without reserving its number: add \`reserved ${n};\``);
      }
    } else if (was instanceof protobuf.Service && is instanceof protobuf.Service) {
      for (const m of was.methodsArray) {
        const k = is.methods[m.name];
        if (k === undefined) {
          problems.push(`${name}: method ${m.name} is gone: keep it (a peer or lbadm of the old version calls /${name}/${m.name})`);
        } else if (methodShape(is, k) !== methodShape(was, m)) {
          problems.push(`${name}: method ${m.name} changed from ${methodShape(was, m)} to ${methodShape(is, k)}: add a new method instead`);
        }
      }
    }
  }
  return problems;
}
