import { keys } from './records.js';

/**
 * etcd's role-based access for one lbd cluster (issue 14): who may write what under the cluster prefix.
 * Derived from the same key layout the coordinator uses (records.ts), so a key a director writes cannot be
 * forgotten here without the real-etcd test (rbac.test.ts) failing.
 *
 * - every director (role `<base>-director`) reads the whole prefix and writes the elections' records
 *   (`groups/`: leader records by compare-and-swap, handoff requests), which all directors share;
 * - each director (role `<base>-director-<id>`) writes only its own registration, its etcd probe key and
 *   its own event history;
 * - operators (role `<base>-operator`) read the whole prefix and write the cluster config and its history,
 *   which no director may: the config can hold exec health checks that run as root on every director, so
 *   a director's certificate (root on one box) must not reach the others through it.
 *
 * etcd knows a client by its certificate's common name (--client-cert-auth): a director's certificate
 * names its director id, an operator's the operator user.
 */
interface EtcdPermission {
  readonly access: 'read' | 'readwrite';
  readonly key: string;
  /** The key and every key under it (etcd's --prefix), or the key alone. */
  readonly prefix: boolean;
}

interface EtcdRole {
  readonly name: string;
  readonly permissions: readonly EtcdPermission[];
}

export interface EtcdRolePlan {
  readonly prefix: string;
  readonly roles: readonly EtcdRole[];
  /** User (a certificate's common name) and the roles granted to it. */
  readonly users: ReadonlyArray<{ readonly name: string; readonly roles: readonly string[] }>;
}

/** `/lbd` → `lbd`, `/lbd/prod` → `lbd-prod`: role names per cluster, so clusters on one etcd keep apart. */
export function roleBase(prefix: string): string {
  return prefix.replace(/\/+$/, '').replace(/^\/+/, '').replace(/\//g, '-') || 'lbd';
}

export function etcdRolePlan(prefix: string, directors: readonly string[], operators: readonly string[]): EtcdRolePlan {
  const k = keys(prefix);
  const root = `${prefix.replace(/\/+$/, '')}/`;
  const base = roleBase(prefix);
  const director = `${base}-director`;
  const operator = `${base}-operator`;
  const own = (id: string): EtcdRole => ({
    name: `${director}-${id}`,
    permissions: [
      { access: 'readwrite', key: k.director(id), prefix: false },
      { access: 'readwrite', key: k.probe(id), prefix: false },
      { access: 'readwrite', key: `${root}events/${id}/`, prefix: true },
    ],
  });
  return {
    prefix,
    roles: [
      { name: director, permissions: [{ access: 'read', key: root, prefix: true }, { access: 'readwrite', key: `${root}groups/`, prefix: true }] },
      ...directors.map(own),
      { name: operator, permissions: [{ access: 'read', key: root, prefix: true }, { access: 'readwrite', key: `${root}config/`, prefix: true }] },
    ],
    users: [
      ...directors.map((id) => ({ name: id, roles: [director, `${director}-${id}`] })),
      ...operators.map((name) => ({ name, roles: [operator] })),
    ],
  };
}

const SAFE = /^[A-Za-z0-9_.:@/-]+$/;

function quote(s: string): string {
  return SAFE.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

/**
 * The plan as a POSIX shell script of etcdctl commands (Debian's etcd-client), safe to run again: it adds
 * what is missing, grants what the plan says and, last, enables authentication (etcd needs its root user
 * for that; the script makes one, known by a certificate whose common name is root). Run with etcdctl's
 * environment set to etcd's root certificate.
 */
export function etcdRoleScript(plan: EtcdRolePlan): string {
  const lines = [
    '#!/bin/sh',
    `# etcd roles for the lbd cluster under ${plan.prefix} (lbadm etcd roles). Run it with etcdctl's environment`,
    '# set to etcd\'s root certificate, for example:',
    '#   ETCDCTL_API=3 ETCDCTL_ENDPOINTS=https://10.0.3.11:2379 ETCDCTL_CACERT=etcd-ca.pem \\',
    '#   ETCDCTL_CERT=root.pem ETCDCTL_KEY=root.key sh roles.sh',
    '# A client is known by its certificate\'s common name: a director\'s names its director id.',
    'set -eu',
    'export ETCDCTL_API=3',
    // etcd 3.5 adds users without a password (certificate only); 3.4 needs one, so it gets a random one
    // nobody knows.
    'if etcdctl user add --help 2>/dev/null | grep -q -- --no-password; then nopass=--no-password; else nopass=; fi',
    'add_user() { etcdctl user get "$1" >/dev/null 2>&1 || if [ -n "$nopass" ]; then etcdctl user add "$1" --no-password; else etcdctl user add "$1" --new-user-password="$(head -c 24 /dev/urandom | od -An -tx1 | tr -d \' \\n\')"; fi; }',
    'add_role() { etcdctl role get "$1" >/dev/null 2>&1 || etcdctl role add "$1"; }',
    'add_user root',
    'add_role root',
    'etcdctl user grant-role root root',
  ];
  for (const r of plan.roles) {
    lines.push(`add_role ${quote(r.name)}`);
    for (const p of r.permissions) {
      lines.push(`etcdctl role grant-permission ${quote(r.name)}${p.prefix ? ' --prefix=true' : ''} ${p.access} ${quote(p.key)}`);
    }
  }
  for (const u of plan.users) {
    lines.push(`add_user ${quote(u.name)}`);
    for (const r of u.roles) lines.push(`etcdctl user grant-role ${quote(u.name)} ${quote(r)}`);
  }
  lines.push('etcdctl auth enable');
  return `${lines.join('\n')}\n`;
}
