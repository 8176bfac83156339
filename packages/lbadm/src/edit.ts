import { isDeepStrictEqual } from 'node:util';
import { isMap, isSeq, parseDocument, type Document, type YAMLMap, type YAMLSeq } from 'yaml';
import { canonicalAddress, familyOf, formatProblem, hostPort, serviceKey, type Config, type Endpoint, type Problem, type Service } from '@lbd/config';
import { splitHostPort, type ServerFields, type ServiceFields } from './args.js';

/**
 * The edits of `lbadm server` and `lbadm service`, as pure functions of the running config's text: the
 * text is edited as a YAML document, so the operator's comments, order and styles stay, and every line
 * the edit does not touch comes back byte for byte. What the edit means is checked here against the
 * typed config (which service, which real server, duplicates); whether the result is a valid config is
 * @lbd/config's business, which the caller asks next.
 */

export type EditOp =
  | { readonly kind: 'server add' | 'server edit'; readonly service: string; readonly server: string; readonly fields: ServerFields }
  | { readonly kind: 'server drain' | 'server enable' | 'server remove'; readonly service: string; readonly server: string }
  | { readonly kind: 'service add' | 'service edit'; readonly name: string; readonly fields: ServiceFields }
  | { readonly kind: 'service remove'; readonly name: string };

export interface EditResult {
  /** The edited config text (equal to the input when nothing changed). */
  readonly text: string;
  readonly changed: boolean;
  /** One line for the operator: what changed, or why nothing did. */
  readonly summary: string;
}

/** An edit that cannot be made: one problem, in the config's own words (field, value, rule, fix). */
export class EditError extends Error {
  constructor(readonly problem: Problem) {
    super(formatProblem(problem));
    this.name = 'EditError';
  }
}

const STRINGIFY = { lineWidth: 0 } as const;

/** Applies `op` to `text`, whose validated form is `config` (an empty text: no services yet). */
export function editConfig(text: string, config: Pick<Config, 'services'>, op: EditOp): EditResult {
  const doc = parseDocument(text);
  if (doc.contents === null) doc.contents = doc.createNode({ services: [] }) as unknown as typeof doc.contents;
  const before = doc.toString(STRINGIFY);
  const summary = apply(doc, config, op);
  if (summary.changed === false) return { text, changed: false, summary: summary.text };
  return { text: splice(text, before, doc), changed: true, summary: summary.text };
}

function apply(doc: Document, config: Pick<Config, 'services'>, op: EditOp): { changed: boolean; text: string } {
  if ('name' in op) {
    if (op.kind === 'service add') return addService(doc, config, op.name, op.fields);
    const i = findService(config, op.name, 'NAME');
    const svc = config.services[i]!;
    if (op.kind === 'service remove') {
      doc.deleteIn(['services', i]);
      return { changed: true, text: `removed service ${svc.name} (${serviceKey(svc)}) and its ${svc.realServers.length} real server(s)` };
    }
    return editService(doc, i, svc, op.fields);
  }
  const i = findService(config, op.service, 'SERVICE');
  const svc = config.services[i]!;
  const ep = parseEndpoint(op.server);
  const label = `${hostPort(ep.address, ep.port)} of ${svc.name}`;
  const j = svc.realServers.findIndex((rs) => rs.address === ep.address && rs.port === ep.port);
  if (op.kind === 'server add') {
    if (j >= 0) {
      throw new EditError({
        path: 'ADDR:PORT', value: op.server, rule: `is already a real server of ${svc.name} (services[${i}].realServers[${j}])`,
        fix: 'change it with lbadm server edit, or give another address or port',
      });
    }
    if (op.fields.healthPort !== undefined && doc.getIn(['services', i, 'healthCheck']) == null) throw noCheck(op.fields.healthPort, svc.name);
    return addServer(doc, i, svc, ep, op.fields, label);
  }
  if (j < 0) {
    const have = svc.realServers.map((rs) => hostPort(rs.address, rs.port));
    throw new EditError({
      path: 'ADDR:PORT', value: op.server, rule: `is not a real server of ${svc.name}`,
      fix: have.length === 0 ? `${svc.name} has no real servers yet: add one with lbadm server add` : `give one of: ${have.join(', ')}`,
    });
  }
  const rsPath = ['services', i, 'realServers', j];
  const rs = svc.realServers[j]!;
  if (op.kind === 'server edit' && op.fields.healthPort !== undefined && rs.healthCheck === null) throw noCheck(op.fields.healthPort, svc.name);
  const configured = configuredWeight(doc, rsPath);
  switch (op.kind) {
    case 'server drain':
      if (rs.drained) return { changed: false, text: `${label} is already drained; nothing to change` };
      doc.setIn([...rsPath, 'drained'], true);
      return {
        changed: true,
        // A dr flow stays on its server through the director's flow memory, which is the director's own.
        text: svc.mode === 'dr'
          ? `drained ${label}: weight 0 (flows a director has seen live on, in its flow memory; no new ones; a flow that moves to another director, on a failover, moves to another server and breaks); lbadm server enable restores weight ${configured}`
          : `drained ${label}: weight 0 (established connections live on, no new ones); lbadm server enable restores weight ${configured}`,
      };
    case 'server enable':
      if (!rs.drained) return { changed: false, text: `${label} is not drained; nothing to change` };
      doc.deleteIn([...rsPath, 'drained']);
      return { changed: true, text: `enabled ${label}: back to weight ${configured}` };
    case 'server remove':
      doc.deleteIn(rsPath);
      return {
        changed: true,
        text: `removed ${label}${svc.mode === 'dr' ? ' (a dr flow goes only to a server of the service: its connections move to the other servers now, and break)'
          : svc.expireOnRemove ? ' (its connections are expired: expireOnRemove)' : ' (its established connections live on until they end)'}`,
      };
    case 'server edit':
      return editServer(doc, rsPath, rs.drained === true, configured, rs.healthCheck?.port ?? null, op.fields, label);
  }
}

/** --health-port overrides the port of the service's check: without one there is nothing to override. */
function noCheck(port: number, service: string): EditError {
  return new EditError({
    path: '--health-port', value: port, rule: `overrides the port of ${service}'s health check, and ${service} has none`,
    fix: `give ${service} a healthCheck first (e.g. {kind: tcp} in its config, applied with lbadm apply -f FILE), or leave --health-port out`,
  });
}

/** The weight the config gives the real server (a drained server's typed weight is 0, not this). */
function configuredWeight(doc: Document, rsPath: readonly (string | number)[]): number {
  const w = doc.getIn([...rsPath, 'weight']);
  return typeof w === 'number' ? w : 1;
}

function addServer(doc: Document, i: number, svc: Service, ep: Endpoint, fields: ServerFields, label: string): { changed: boolean; text: string } {
  const item: Record<string, unknown> = { address: ep.address, port: ep.port, weight: fields.weight ?? 1 };
  if (fields.healthPort !== undefined) item.healthCheck = { port: fields.healthPort };
  const list = doc.getIn(['services', i, 'realServers']);
  const node = doc.createNode(item) as YAMLMap;
  if (isSeq(list)) {
    // Written like its neighbours: one `{ ... }` line among one-line servers, a block among blocks; the
    // first one as a `{ ... }` line in a block list (not all on the line of `realServers: []`).
    const last = list.items[list.items.length - 1];
    if (list.items.length === 0) list.flow = false;
    node.flow = isMap(last) ? last.flow === true : true;
    const hc: unknown = node.get('healthCheck', true);
    if (isMap(hc)) hc.flow = true;
    list.add(node);
  } else {
    doc.setIn(['services', i, 'realServers'], doc.createNode([item]));
  }
  return { changed: true, text: `added ${label} at weight ${item.weight as number}${svc.realServers.length === 0 ? ` (${svc.name}'s first real server)` : ''}` };
}

function editServer(
  doc: Document, rsPath: readonly (string | number)[], drained: boolean, weight: number, healthPort: number | null, fields: ServerFields, label: string,
): { changed: boolean; text: string } {
  const changes: string[] = [];
  if (fields.weight !== undefined && fields.weight !== weight) {
    doc.setIn([...rsPath, 'weight'], fields.weight);
    changes.push(`weight ${weight} -> ${fields.weight}${drained ? ' (it stays drained at 0 until lbadm server enable)' : ''}`);
  }
  if (fields.healthPort !== undefined && fields.healthPort !== healthPort) {
    const hc = doc.getIn([...rsPath, 'healthCheck']);
    if (isMap(hc)) hc.set('port', fields.healthPort);
    else {
      const node = doc.createNode({ port: fields.healthPort }) as YAMLMap;
      node.flow = true;
      doc.setIn([...rsPath, 'healthCheck'], node);
    }
    changes.push(`health check port ${healthPort ?? 'its own'} -> ${fields.healthPort}`);
  }
  if (changes.length === 0) return { changed: false, text: `${label} already has those settings; nothing to change` };
  return { changed: true, text: `${label}: ${changes.join(', ')}` };
}

/** The service's fields the flags set (each named as in the config), in the order a new service writes them. */
const SERVICE_KEYS: readonly (keyof ServiceFields)[] = ['vip', 'port', 'protocol', 'mode', 'scheduler', 'localAddresses', 'vipGroup', 'synProxy', 'connectionLimit'];

function addService(doc: Document, config: Pick<Config, 'services'>, name: string, fields: ServiceFields): { changed: boolean; text: string } {
  const same = config.services.findIndex((s) => s.name === name);
  if (same >= 0) {
    throw new EditError({ path: 'NAME', value: name, rule: `is already a service (services[${same}])`, fix: 'change it with lbadm service edit, or choose another name' });
  }
  const item = doc.createNode({ name }) as YAMLMap;
  for (const key of SERVICE_KEYS) {
    const v = fields[key];
    if (v === undefined || v === null) continue;
    item.set(key, valueNode(doc, v));
  }
  item.set('realServers', doc.createNode([]));
  const list = doc.getIn(['services']);
  if (isSeq(list)) list.add(item);
  else doc.setIn(['services'], doc.createNode([item]));
  return { changed: true, text: `added service ${name} with no real servers yet (add them with lbadm server add ${name} ADDR:PORT)` };
}

function editService(doc: Document, i: number, svc: Service, fields: ServiceFields): { changed: boolean; text: string } {
  const changes: string[] = [];
  const current: Record<keyof ServiceFields, unknown> = {
    vip: svc.vip, port: svc.port, protocol: svc.protocol, mode: svc.mode, scheduler: svc.scheduler,
    localAddresses: svc.localAddresses === null ? null : doc.toJS().services?.[i]?.localAddresses, vipGroup: svc.vipGroup,
    synProxy: svc.synProxy, connectionLimit: svc.connectionLimit,
  };
  for (const key of SERVICE_KEYS) {
    const v = fields[key];
    if (v === undefined) continue;
    const was = current[key];
    if (isDeepStrictEqual(v, was) || (key === 'vip' && typeof v === 'string' && familyOf(v) !== null && canonicalAddress(v) === was)) continue;
    if (v === null) doc.deleteIn(['services', i, key]);
    else doc.setIn(['services', i, key], valueNode(doc, v));
    changes.push(`${key} ${show(was)} -> ${v === null ? '(none)' : show(v)}`);
  }
  if (changes.length === 0) return { changed: false, text: `service ${svc.name} already has those settings; nothing to change` };
  return { changed: true, text: `service ${svc.name}: ${changes.join(', ')}` };
}

function show(v: unknown): string {
  if (v === null || v === undefined) return '(none)';
  return Array.isArray(v) ? `[${v.join(', ')}]` : String(v);
}

function valueNode(doc: Document, v: string | number | boolean | readonly string[]): unknown {
  return Array.isArray(v) ? flowSeq(doc, v) : v;
}

function flowSeq(doc: Document, items: readonly unknown[]): YAMLSeq {
  const node = doc.createNode([...items]) as YAMLSeq;
  node.flow = true;
  return node;
}

/** The index of the service named `ref` or keyed `ref` (vip:port/protocol); otherwise an error listing them. */
function findService(config: Pick<Config, 'services'>, ref: string, field: string): number {
  const i = config.services.findIndex((s) => s.name === ref || serviceKey(s) === ref);
  if (i >= 0) return i;
  const names = config.services.map((s) => s.name);
  throw new EditError({
    path: field, value: ref, rule: 'is not the name or key of a service in the running config',
    fix: names.length === 0 ? 'there are no services yet: add one with lbadm service add' : `give one of: ${names.join(', ')}`,
  });
}

/** `198.19.1.12:8080` or `[fd00::12]:8080`, the address in canonical form. */
function parseEndpoint(text: string): Endpoint {
  const { host: address, port } = splitHostPort(text) ?? { host: '', port: 0 };
  if (familyOf(address) === null || port < 1 || port > 65535) {
    throw new EditError({
      path: 'ADDR:PORT', value: text, rule: 'is not a real server address and port',
      fix: 'write address:port, e.g. 198.19.1.12:8080, or [fd00::12]:8080 for IPv6 (port 1 to 65535)',
    });
  }
  return { address: canonicalAddress(address), port };
}

/**
 * The edited text, keeping the operator's own lines: `yaml` re-renders a whole document (comment spacing,
 * padding inside brackets), so only the lines the edit changed are taken from its rendering and every
 * other line from the original. When the original's lines do not correspond one to one with the
 * rendering of the unedited document, or the spliced text would not mean the same as the edited
 * document, the rendering is used whole.
 */
function splice(original: string, before: string, doc: Document): string {
  const after = doc.toString(STRINGIFY);
  const o = original.split('\n');
  const b = before.split('\n');
  const a = after.split('\n');
  if (o.length !== b.length) return after;
  const { prefix, suffix } = common(b, a);
  const spliced = [...o.slice(0, prefix), ...a.slice(prefix, a.length - suffix), ...o.slice(o.length - suffix)].join('\n');
  return isDeepStrictEqual(parseDocument(spliced).toJS(), doc.toJS()) ? spliced : after;
}

/** Lines equal at the start and at the end (not overlapping). */
function common(x: readonly string[], y: readonly string[]): { prefix: number; suffix: number } {
  let prefix = 0;
  while (prefix < x.length && prefix < y.length && x[prefix] === y[prefix]) prefix++;
  let suffix = 0;
  while (suffix < x.length - prefix && suffix < y.length - prefix && x[x.length - 1 - suffix] === y[y.length - 1 - suffix]) suffix++;
  return { prefix, suffix };
}

/**
 * A unified diff of two config texts, with `context` lines around the one changed region (an edit
 * changes one place; the lines between its first and last change are shown as removed and added).
 */
export function diffLines(oldText: string, newText: string, oldName: string, newName: string, context = 3): string {
  if (oldText === newText) return '';
  const x = oldText.split('\n');
  const y = newText.split('\n');
  // A final newline is not a line of its own.
  if (x[x.length - 1] === '') x.pop();
  if (y[y.length - 1] === '') y.pop();
  const { prefix, suffix } = common(x, y);
  const start = Math.max(0, prefix - context);
  const xEnd = Math.min(x.length, x.length - suffix + context);
  const yEnd = Math.min(y.length, y.length - suffix + context);
  const lines = [`--- ${oldName}`, `+++ ${newName}`, `@@ -${start + 1},${xEnd - start} +${start + 1},${yEnd - start} @@`];
  for (let k = start; k < prefix; k++) lines.push(` ${x[k]}`);
  for (let k = prefix; k < x.length - suffix; k++) lines.push(`-${x[k]}`);
  for (let k = prefix; k < y.length - suffix; k++) lines.push(`+${y[k]}`);
  for (let k = x.length - suffix; k < xEnd; k++) lines.push(` ${x[k]}`);
  return `${lines.join('\n')}\n`;
}
