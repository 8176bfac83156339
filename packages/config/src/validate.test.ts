import assert from 'node:assert/strict';
import { formatProblem, validateConfig } from './validate.js';
import { ADMIN_DEFAULTS, DEFAULT_ADMIN_SOCKET, VIP_GROUP_DEFAULTS, type Config, type Service, type VipGroup } from './types.js';

/**
 * Table-driven tests of validateConfig: every rule, each asserted by its exact one-line message, and valid
 * inputs asserted as the exact typed Config (defaults applied). The messages are the product here: an
 * operator reads them instead of the source, so a changed word is a changed test.
 */

type Raw = Record<string, unknown>;

/** A valid fullnat service; cases derive from it by overriding (undefined removes a field). */
const WEB: Raw = {
  name: 'web',
  vip: '198.18.0.10',
  port: 80,
  mode: 'fullnat',
  localAddresses: ['198.18.2.10'],
  realServers: [{ address: '198.19.1.11', port: 8080 }],
};

function svc(over: Raw, base: Raw = WEB): Raw {
  const out: Raw = { ...base, ...over };
  for (const k of Object.keys(out)) if (out[k] === undefined) delete out[k];
  return out;
}

function one(over: Raw, base: Raw = WEB): Raw {
  return { services: [svc(over, base)] };
}

/** The expected typed service for WEB with `over` applied. */
function typed(over: Partial<Service> = {}): Service {
  return {
    name: 'web', family: 4, vip: '198.18.0.10', port: 80, protocol: 'tcp', mode: 'fullnat', scheduler: 'wrr',
    persistenceSec: 0, localAddresses: { first: '198.18.2.10', last: '198.18.2.10', size: 1 }, expireOnRemove: false,
    onDown: 'quiesce', slowStartMs: 0, fallback: 'drop', sorryServer: null, vipGroup: 'default', sync: { enabled: true, minAgeMs: 0 }, ecmp: false, synProxy: false, connectionLimit: null,
    realServers: [{ address: '198.19.1.11', port: 8080, weight: 1, healthCheck: null }],
    ...over,
  };
}

/** The vip groups validation fills in for services that name no declared group. */
function defaultGroups(services: readonly Service[]): VipGroup[] {
  return [...new Set(services.map((x) => x.vipGroup))].map((name) => ({ name, ...VIP_GROUP_DEFAULTS, announce: { ...VIP_GROUP_DEFAULTS.announce }, gateways: [] }));
}

const AGENT = { adminSocket: DEFAULT_ADMIN_SOCKET, cluster: null, admin: ADMIN_DEFAULTS };

const VIP_FIX = 'give an IPv4 address such as 198.18.0.10 or an IPv6 address such as fd00::10 (no prefix length, port or zone)';
const PORT = 'is not a port (a whole number from 1 to 65535); give a whole number from 1 to 65535';
const WEIGHT = 'is not a weight (a whole number from 0 to 65535, 0 = quiescent); give a whole number from 0 to 65535';
const PERSIST = 'is not a persistence time (whole seconds from 0 to 31536000, 0 = off); give whole seconds, e.g. 300, or 0 for no source-address affinity';
const NAME_FIX = 'use 1 to 63 lower-case letters, digits, "-", "_" or ".", starting and ending with a letter or digit';
const FAMILY = 'and nftables NAT cannot translate between families';
const SERVICE_FIELDS = 'name, vip, port, protocol, mode, scheduler, persistenceSec, localAddresses, expireOnRemove, realServers, healthCheck, onDown, slowStartMs, fallback, sorryServer, vipGroup, sync, ecmp, synProxy, connectionLimit';

interface Bad { name: string; raw: unknown; want: string[] }

const invalid: Bad[] = [
  // Unknown fields, with did-you-mean when the name is a likely typo.
  {
    name: 'unknown service field close to a known one, and the field it replaced is missing',
    raw: one({ vip: undefined, vips: '198.18.0.10' }),
    want: [
      'services[0].vips: "198.18.0.10" is not a known field; did you mean "vip"?',
      'services[0].vip: a vip is required; give an IPv4 address such as 198.18.0.10 or an IPv6 address such as fd00::10',
    ],
  },
  {
    name: 'unknown field far from every known one lists the known fields',
    raw: one({ foo: 1 }),
    want: [`services[0].foo: 1 is not a known field; known fields: ${SERVICE_FIELDS}`],
  },
  {
    name: 'unknown field differing only in case',
    raw: one({ realServers: undefined, realservers: [] }),
    want: ['services[0].realservers: [] is not a known field; did you mean "realServers"?'],
  },
  {
    name: 'unknown field in snake_case',
    raw: one({ localAddresses: undefined, local_addresses: ['198.18.2.10'] }),
    want: [
      'services[0].local_addresses: ["198.18.2.10"] is not a known field; did you mean "localAddresses"?',
      'services[0].localAddresses: fullnat needs at least one local address (the SNAT pool real servers reply to); add localAddresses: [198.18.2.10] or a range such as [198.18.2.10-198.18.2.13], addresses this director owns',
    ],
  },
  {
    name: 'unknown top-level field',
    raw: { service: [] },
    want: ['service: [] is not a known field; did you mean "services"?'],
  },
  {
    name: 'unknown agent field',
    raw: { agent: { adminsock: '/run/lbd.sock' }, services: [] },
    want: ['agent.adminsock: "/run/lbd.sock" is not a known field; did you mean "adminSocket"?'],
  },
  {
    name: 'unknown real server field (transposed letters)',
    raw: one({ realServers: [{ address: '198.19.1.11', port: 8080, weigth: 2 }] }),
    want: ['services[0].realServers[0].weigth: 2 is not a known field; did you mean "weight"?'],
  },

  // agent
  {
    name: 'agent is not a mapping',
    raw: { agent: '/run/lbd.sock', services: [] },
    want: ['agent: "/run/lbd.sock" is a string, not a mapping; write agent: {adminSocket: /run/lbd/admin.sock} or leave it out'],
  },
  {
    name: 'agent.adminSocket is relative',
    raw: { agent: { adminSocket: 'run/lbd.sock' }, services: [] },
    want: ['agent.adminSocket: "run/lbd.sock" is not an absolute path; give an absolute path such as /run/lbd/admin.sock'],
  },

  // Top level and list shapes.
  {
    name: 'empty document',
    raw: null,
    want: ['(top level): the document is empty; write "services:" followed by a list of services, or "services: []" for none'],
  },
  {
    name: 'top level is a list',
    raw: [{ name: 'web' }],
    want: ['(top level): [{"name":"web"}] is a list, not a mapping; start the file with "services:" followed by a list of services'],
  },
  {
    name: 'top level is a string',
    raw: 'services',
    want: ['(top level): "services" is a string, not a mapping; start the file with "services:" followed by a list of services'],
  },
  {
    name: 'services is a mapping',
    raw: { services: { name: 'web' } },
    want: ['services: {"name":"web"} is a mapping, not a list; write services as a list, each item starting with "- name:", or "services: []" for none'],
  },
  {
    name: 'services is empty (YAML "services:" with nothing after it)',
    raw: { services: null },
    want: ['services: null is empty, not a list; write services as a list, each item starting with "- name:", or "services: []" for none'],
  },
  {
    name: 'a service is not a mapping',
    raw: { services: ['web'] },
    want: ['services[0]: "web" is a string, not a service; write a mapping with name, vip, port, protocol, mode and realServers'],
  },

  // name
  {
    name: 'missing name',
    raw: one({ name: undefined }),
    want: [`services[0].name: a service name is required; ${NAME_FIX}`],
  },
  {
    name: 'invalid name',
    raw: one({ name: 'Web Server' }),
    want: [`services[0].name: "Web Server" is not a valid service name; ${NAME_FIX}`],
  },

  // vip
  {
    name: 'vip out of range',
    raw: one({ vip: '10.0.0.300' }),
    want: [`services[0].vip: "10.0.0.300" is not an IPv4 or IPv6 address; ${VIP_FIX}`],
  },
  {
    name: 'vip with a prefix length',
    raw: one({ vip: '198.18.0.10/32' }),
    want: [`services[0].vip: "198.18.0.10/32" is not an IPv4 or IPv6 address; ${VIP_FIX}`],
  },
  {
    name: 'vip with a zone index',
    raw: one({ vip: 'fe80::1%eth0', localAddresses: ['fe80::2'], realServers: [] }),
    want: [`services[0].vip: "fe80::1%eth0" is not an IPv4 or IPv6 address; ${VIP_FIX}`],
  },
  {
    name: 'vip is a number',
    raw: one({ vip: 42 }),
    want: [`services[0].vip: 42 is not an IPv4 or IPv6 address; ${VIP_FIX}`],
  },
  {
    name: 'vip is the unspecified address',
    raw: one({ vip: '0.0.0.0' }),
    want: ['services[0].vip: "0.0.0.0" is the unspecified address; give a unicast address such as 198.18.0.10'],
  },
  {
    name: 'vip is multicast (IPv6)',
    raw: one({ vip: 'ff02::1', localAddresses: ['fd00:2::10'], realServers: [] }),
    want: ['services[0].vip: "ff02::1" is a multicast address; give a unicast address such as fd00::10'],
  },
  {
    name: 'vip is IPv4-mapped IPv6',
    raw: one({ vip: '::ffff:198.18.0.10' }),
    want: ['services[0].vip: "::ffff:198.18.0.10" is an IPv4-mapped IPv6 address; write the IPv4 address 198.18.0.10 instead'],
  },

  // port
  { name: 'missing port', raw: one({ port: undefined }), want: ['services[0].port: a port is required; give a whole number from 1 to 65535'] },
  { name: 'port 0', raw: one({ port: 0 }), want: [`services[0].port: 0 ${PORT}`] },
  { name: 'port 65536', raw: one({ port: 65536 }), want: [`services[0].port: 65536 ${PORT}`] },
  { name: 'port negative', raw: one({ port: -80 }), want: [`services[0].port: -80 ${PORT}`] },
  { name: 'port not an integer', raw: one({ port: 80.5 }), want: [`services[0].port: 80.5 ${PORT}`] },
  { name: 'port infinite (YAML .inf)', raw: one({ port: Infinity }), want: [`services[0].port: Infinity ${PORT}`] },
  { name: 'port is a service name', raw: one({ port: 'http' }), want: [`services[0].port: "http" ${PORT}`] },
  { name: 'port in quotes', raw: one({ port: '80' }), want: ['services[0].port: "80" is text, not a number; write it without quotes: 80'] },
  {
    name: 'real server port out of range',
    raw: one({ realServers: [{ address: '198.19.1.11', port: 70000 }] }),
    want: [`services[0].realServers[0].port: 70000 ${PORT}`],
  },

  // protocol, mode, scheduler
  { name: 'protocol in upper case', raw: one({ protocol: 'TCP' }), want: ['services[0].protocol: "TCP" is not a supported protocol; write it in lower case: tcp'] },
  { name: 'protocol unsupported', raw: one({ protocol: 'sctp' }), want: ['services[0].protocol: "sctp" is not a supported protocol; use one of: tcp, udp'] },
  { name: 'mode missing (no default)', raw: one({ mode: undefined }), want: ['services[0].mode: a forwarding mode is required; set it to one of: fullnat, nat, dr'] },
  { name: 'mode unsupported', raw: one({ mode: 'tun' }), want: ['services[0].mode: "tun" is not a supported forwarding mode; use one of: fullnat, nat, dr'] },
  {
    name: 'dr with a scheduler that keeps state, persistence, local addresses and a translated port',
    raw: one({ mode: 'dr', scheduler: 'wrr', persistenceSec: 300, localAddresses: ['198.18.2.10'], realServers: [{ address: '198.19.1.11', port: 8080 }, { address: '198.19.1.12' }] }),
    want: [
      'services[0].localAddresses: ["198.18.2.10"] is set but dr mode does not translate source addresses; remove localAddresses, or use mode: fullnat',
      'services[0].scheduler: "wrr" is wrr, but a dr flow is remembered only by the director that saw it, and any other director schedules its packets again, so only a hash of the packet (mh, sh) keeps a connection on one real server through a failover; use scheduler: mh (weighted Maglev, the default for dr) or sh (source hash), or another mode',
      'services[0].persistenceSec: 300 is set, but a dr service keeps no state (persistence records each client\'s real server); remove persistenceSec and use scheduler: sh to keep each client on one real server, or use mode fullnat or nat',
      'services[0].realServers[0].port: 8080 is not the service\'s port 80: dr does not rewrite the packet, so the real server receives it on the vip\'s port; remove the port (it defaults to 80), or use mode fullnat or nat to translate ports',
    ],
  },
  {
    name: 'dr with rr, and a sorry server on another port',
    raw: one({ mode: 'dr', localAddresses: undefined, scheduler: 'rr', realServers: [{ address: '198.19.1.11' }], fallback: 'sorry-server', sorryServer: { address: '198.19.1.99', port: 8080 } }),
    want: [
      'services[0].scheduler: "rr" is rr, but a dr flow is remembered only by the director that saw it, and any other director schedules its packets again, so only a hash of the packet (mh, sh) keeps a connection on one real server through a failover; use scheduler: mh (weighted Maglev, the default for dr) or sh (source hash), or another mode',
      'services[0].sorryServer.port: 8080 is not the service\'s port 80: dr does not rewrite the packet; remove the port (it defaults to 80)',
    ],
  },
  {
    name: 'synProxy where it cannot work: UDP, dr; a synced one is fine',
    raw: { services: [
      svc({ name: 'dns', protocol: 'udp', synProxy: true, sync: { enabled: false } }),
      svc({ name: 'drweb', mode: 'dr', localAddresses: undefined, realServers: [{ address: '198.19.1.11' }], synProxy: true, sync: { enabled: false } }),
      svc({ name: 'web', synProxy: true }),
      svc({ name: 'flag', synProxy: 'yes' }),
    ] },
    want: [
      'services[0].synProxy: true is set on a UDP service, but a SYN proxy completes TCP handshakes; remove synProxy, or set protocol: tcp',
      'services[1].synProxy: true is set on a dr service, but the proxy must see the whole handshake and a dr real server answers the client directly; remove synProxy, or use mode fullnat or nat',
      'services[3].synProxy: "yes" is not true or false; write true or false without quotes',
    ],
  },
  {
    name: 'connectionLimit: not a count, or on a dr service',
    raw: { services: [
      svc({ name: 'a', connectionLimit: 0 }),
      svc({ name: 'b', connectionLimit: 1.5 }),
      svc({ name: 'c', connectionLimit: '1000' }),
      svc({ name: 'd', mode: 'dr', localAddresses: undefined, realServers: [{ address: '198.19.1.11' }], connectionLimit: 1000 }),
    ] },
    want: [
      'services[0].connectionLimit: 0 is not a connection limit (a whole number of connections from 1 to 2147483647); give the most connections this service may hold on a director, e.g. 100000, or remove connectionLimit for none',
      'services[1].connectionLimit: 1.5 is not a connection limit (a whole number of connections from 1 to 2147483647); give the most connections this service may hold on a director, e.g. 100000, or remove connectionLimit for none',
      'services[2].connectionLimit: "1000" is text, not a number; write it without quotes: 1000',
      'services[3].connectionLimit: 1000 is set on a dr service, but dr keeps no conntrack entry per connection, so there is nothing to count; remove connectionLimit, or use mode fullnat or nat',
    ],
  },
  { name: 'scheduler unsupported', raw: one({ scheduler: 'wlc' }), want: ['services[0].scheduler: "wlc" is not a supported scheduler; use one of: rr, wrr, sh, mh'] },
  { name: 'scheduler not a string', raw: one({ scheduler: 1 }), want: ['services[0].scheduler: 1 is not a supported scheduler; use one of: rr, wrr, sh, mh'] },

  // persistenceSec, expireOnRemove
  { name: 'persistenceSec negative', raw: one({ persistenceSec: -1 }), want: [`services[0].persistenceSec: -1 ${PERSIST}`] },
  { name: 'persistenceSec fractional', raw: one({ persistenceSec: 1.5 }), want: [`services[0].persistenceSec: 1.5 ${PERSIST}`] },
  { name: 'persistenceSec over a year', raw: one({ persistenceSec: 31536001 }), want: [`services[0].persistenceSec: 31536001 ${PERSIST}`] },
  { name: 'persistenceSec with a unit', raw: one({ persistenceSec: '5m' }), want: [`services[0].persistenceSec: "5m" ${PERSIST}`] },
  { name: 'persistenceSec in quotes', raw: one({ persistenceSec: '300' }), want: ['services[0].persistenceSec: "300" is text, not a number; write it without quotes: 300'] },
  { name: 'expireOnRemove as text', raw: one({ expireOnRemove: 'yes' }), want: ['services[0].expireOnRemove: "yes" is not true or false; write true or false without quotes'] },
  {
    name: 'expireOnRemove as a number',
    raw: one({ expireOnRemove: 1 }),
    want: ['services[0].expireOnRemove: 1 is not true or false; write true to expire a removed real server\'s connections, false to let them finish'],
  },

  // localAddresses
  {
    name: 'fullnat without local addresses',
    raw: one({ localAddresses: undefined }),
    want: ['services[0].localAddresses: fullnat needs at least one local address (the SNAT pool real servers reply to); add localAddresses: [198.18.2.10] or a range such as [198.18.2.10-198.18.2.13], addresses this director owns'],
  },
  {
    name: 'fullnat with an empty local address list (IPv6 examples for an IPv6 vip)',
    raw: one({ vip: 'fd00::10', localAddresses: [], realServers: [] }),
    want: ['services[0].localAddresses: [] is empty, but fullnat needs at least one local address (the SNAT pool real servers reply to); add an address such as fd00:2::10 or a range such as fd00:2::10-fd00:2::13, addresses this director owns'],
  },
  {
    name: 'local addresses as a single string',
    raw: one({ localAddresses: '198.18.2.10' }),
    want: ['services[0].localAddresses: "198.18.2.10" is a string, not a list; write a list such as [198.18.2.10, 198.18.2.11] or [198.18.2.10-198.18.2.13]'],
  },
  {
    name: 'nat with local addresses',
    raw: one({ mode: 'nat', localAddresses: ['198.18.2.10'] }),
    want: ['services[0].localAddresses: ["198.18.2.10"] is set but nat mode does not translate source addresses; remove localAddresses, or use mode: fullnat'],
  },
  {
    name: 'local address of the wrong family',
    raw: one({ localAddresses: ['fd00:2::10'] }),
    want: [`services[0].localAddresses[0]: "fd00:2::10" is IPv6 but the vip is IPv4, ${FAMILY}; use IPv4 local addresses`],
  },
  {
    name: 'local addresses of two families while the vip is bad',
    raw: one({ vip: 'web.example', localAddresses: ['198.18.2.10', 'fd00:2::10'] }),
    want: [
      `services[0].vip: "web.example" is not an IPv4 or IPv6 address; ${VIP_FIX}`,
      `services[0].localAddresses[1]: "fd00:2::10" is IPv6 but the first local address is IPv4, ${FAMILY}; use IPv4 local addresses`,
    ],
  },
  {
    name: 'local address range mixing families',
    raw: one({ localAddresses: ['198.18.2.10-fd00::2'] }),
    want: ['services[0].localAddresses[0]: "198.18.2.10-fd00::2" is not an address or a first-last address range; write 198.18.2.10 or 198.18.2.10-198.18.2.13'],
  },
  {
    name: 'local address as a prefix',
    raw: one({ localAddresses: ['198.18.2.8/30'] }),
    want: ['services[0].localAddresses[0]: "198.18.2.8/30" is not an address or a first-last address range; write 198.18.2.10 or 198.18.2.10-198.18.2.13'],
  },
  {
    name: 'local address range written backwards',
    raw: one({ localAddresses: ['198.19.1.103-198.19.1.100'] }),
    want: ['services[0].localAddresses[0]: "198.19.1.103-198.19.1.100" is a range whose last address comes before its first; write the lower address first'],
  },
  {
    name: 'local address range with a gap after it',
    raw: one({ localAddresses: ['198.19.1.100-198.19.1.103', '198.19.1.105'] }),
    want: ['services[0].localAddresses: ["198.19.1.100-198.19.1.103","198.19.1.105"] is not one contiguous range (198.19.1.104 is missing); use consecutive addresses, e.g. 198.19.1.100-198.19.1.104, or add the missing ones'],
  },
  {
    name: 'local addresses with a gap (IPv6, listed out of order)',
    raw: one({ vip: 'fd00::10', localAddresses: ['fd00:2::12', 'fd00:2::10'], realServers: [] }),
    want: ['services[0].localAddresses: ["fd00:2::12","fd00:2::10"] is not one contiguous range (fd00:2::11 is missing); use consecutive addresses, e.g. fd00:2::10-fd00:2::11, or add the missing ones'],
  },
  {
    name: 'local addresses overlapping',
    raw: one({ localAddresses: ['198.19.1.100-198.19.1.103', '198.19.1.102'] }),
    want: ['services[0].localAddresses: ["198.19.1.100-198.19.1.103","198.19.1.102"] lists 198.19.1.102 more than once (in "198.19.1.100-198.19.1.103" and "198.19.1.102"); list each local address once'],
  },
  {
    name: 'local address is multicast',
    raw: one({ localAddresses: ['224.0.0.1'] }),
    want: ['services[0].localAddresses[0]: "224.0.0.1" is a multicast address; give a unicast address such as 198.18.0.10'],
  },

  // realServers
  {
    name: 'realServers is not a list',
    raw: one({ realServers: { address: '198.19.1.11' } }),
    want: ['services[0].realServers: {"address":"198.19.1.11"} is a mapping, not a list; write a list of {address, port, weight} entries, or [] for none'],
  },
  {
    name: 'real server written as host:port text',
    raw: one({ realServers: ['198.19.1.11:8080'] }),
    want: ['services[0].realServers[0]: "198.19.1.11:8080" is a string, not a real server; write {address: 198.18.1.11, port: 8080, weight: 1}'],
  },
  {
    name: 'real server without an address',
    raw: one({ realServers: [{ port: 8080 }] }),
    want: ['services[0].realServers[0].address: a real server address is required; give an IPv4 address such as 198.18.0.10 or an IPv6 address such as fd00::10'],
  },
  {
    name: 'real server of the other family',
    raw: one({ realServers: [{ address: 'fd00:3::11', port: 8080 }] }),
    want: [`services[0].realServers[0].address: "fd00:3::11" is IPv6 but the vip is IPv4, ${FAMILY}; use an IPv4 real server, or put it in a service with an IPv6 vip`],
  },
  { name: 'weight negative', raw: one({ realServers: [{ address: '198.19.1.11', weight: -1 }] }), want: [`services[0].realServers[0].weight: -1 ${WEIGHT}`] },
  { name: 'weight 65536', raw: one({ realServers: [{ address: '198.19.1.11', weight: 65536 }] }), want: [`services[0].realServers[0].weight: 65536 ${WEIGHT}`] },
  { name: 'weight fractional', raw: one({ realServers: [{ address: '198.19.1.11', weight: 0.5 }] }), want: [`services[0].realServers[0].weight: 0.5 ${WEIGHT}`] },
  { name: 'drained not a boolean', raw: one({ realServers: [{ address: '198.19.1.11', drained: 'yes' }] }), want: ['services[0].realServers[0].drained: "yes" is not true or false; write true to drain it (weight 0, established connections live on), or remove the field (lbadm server enable does)'] },
  { name: 'weight in quotes', raw: one({ realServers: [{ address: '198.19.1.11', weight: '3' }] }), want: ['services[0].realServers[0].weight: "3" is text, not a number; write it without quotes: 3'] },
  {
    name: 'duplicate real server spelled two ways (IPv6)',
    raw: one({ vip: 'fd00::10', localAddresses: ['fd00:2::10'], realServers: [
      { address: 'fd00:3::11', port: 8080 }, { address: 'fd00:3::12', port: 8080 }, { address: 'FD00:3:0::11', port: 8080, weight: 5, healthCheck: null },
    ] }),
    want: ['services[0].realServers[2]: "[fd00:3::11]:8080" repeats services[0].realServers[0] (same address and port); list each real server once (to send it more traffic, raise its weight)'],
  },
  {
    name: 'duplicate real server through the default port',
    raw: one({ realServers: [{ address: '198.19.1.11' }, { address: '198.19.1.11', port: 80 }] }),
    want: ['services[0].realServers[1]: "198.19.1.11:80" repeats services[0].realServers[0] (same address and port); list each real server once (to send it more traffic, raise its weight)'],
  },
  {
    name: 'a real server without a port is not reported again when the service port is bad',
    raw: one({ port: 0, realServers: [{ address: '198.19.1.11' }] }),
    want: [`services[0].port: 0 ${PORT}`],
  },

  // Cross-service checks.
  {
    name: 'duplicate vip:port/protocol names the first service',
    raw: { services: [svc({}), svc({ name: 'web2', realServers: [] })] },
    want: ['services[1]: "198.18.0.10:80/tcp" is already defined by services[0] ("web"); each vip:port/protocol must be unique: change the vip, port or protocol, or merge the two services'],
  },
  {
    name: 'duplicate vip:port/protocol with the IPv6 vip spelled two ways',
    raw: { services: [
      svc({ name: 'v6', vip: 'fd00:0:0:1::10', localAddresses: ['fd00:2::10'], realServers: [] }),
      svc({ name: 'other', port: 443 }),
      svc({ name: 'v6-again', vip: 'FD00:0:0:1:0:0:0:10', localAddresses: ['fd00:2::11'], realServers: [] }),
    ] },
    want: ['services[2]: "[fd00:0:0:1::10]:80/tcp" is already defined by services[0] ("v6"); each vip:port/protocol must be unique: change the vip, port or protocol, or merge the two services'],
  },
  {
    name: 'duplicate name',
    raw: { services: [svc({}), svc({ port: 443 })] },
    want: ['services[1].name: "web" is already used by services[0]; give every service its own name'],
  },

  // Several problems at once: all of them, in document order.
  {
    name: 'several problems in several services, in order',
    raw: {
      agent: { adminSocket: 'lbd.sock' },
      services: [
        svc({ vip: '10.0.0.300', protocol: 'icmp', realServers: [{ address: '198.19.1.11', port: 0, weight: 70000, healthCheck: null }] }),
        svc({ name: 'ok', port: 443 }),
        svc({ name: 'nat', mode: 'nat', localAddresses: ['198.18.2.10'], scheduler: 'lc', extra: true }),
      ],
    },
    want: [
      'agent.adminSocket: "lbd.sock" is not an absolute path; give an absolute path such as /run/lbd/admin.sock',
      `services[0].vip: "10.0.0.300" is not an IPv4 or IPv6 address; ${VIP_FIX}`,
      'services[0].protocol: "icmp" is not a supported protocol; use one of: tcp, udp',
      `services[0].realServers[0].port: 0 ${PORT}`,
      `services[0].realServers[0].weight: 70000 ${WEIGHT}`,
      `services[2].extra: true is not a known field; known fields: ${SERVICE_FIELDS}`,
      'services[2].scheduler: "lc" is not a supported scheduler; use one of: rr, wrr, sh, mh',
      'services[2].localAddresses: ["198.18.2.10"] is set but nat mode does not translate source addresses; remove localAddresses, or use mode: fullnat',
    ],
  },
  // Addresses that parse but cannot work where they are put.
  {
    name: 'a loopback vip',
    raw: one({ vip: '127.0.0.1' }),
    want: ['services[0].vip: "127.0.0.1" is a loopback address: packets to it never leave a host, so no client can reach the service; give the address clients connect to, such as 198.18.0.10'],
  },
  {
    name: 'the IPv6 loopback as vip',
    raw: one({ vip: '::1', localAddresses: ['fd00:2::10'], realServers: [] }),
    want: ['services[0].vip: "::1" is a loopback address: packets to it never leave a host, so no client can reach the service; give the address clients connect to, such as fd00::10'],
  },
  {
    name: 'a loopback real server and sorry server',
    raw: one({ realServers: [{ address: '127.0.0.53', port: 53 }], fallback: 'sorry-server', sorryServer: { address: '127.0.0.1', port: 8080 } }),
    want: [
      'services[0].realServers[0].address: "127.0.0.53" is a loopback address: the director would send the traffic to itself, not to a server; give the server\'s own address, such as 198.19.1.11',
      'services[0].sorryServer.address: "127.0.0.1" is a loopback address: the director would send the traffic to itself, not to a server; give the server\'s own address, such as 198.19.1.11',
    ],
  },
  {
    name: 'a real server or sorry server that is the vip itself',
    raw: one({ realServers: [{ address: '198.18.0.10', port: 8080 }, { address: '198.19.1.11' }], fallback: 'sorry-server', sorryServer: { address: '198.18.0.10' } }),
    want: [
      'services[0].realServers[0].address: "198.18.0.10" is the service\'s own vip: the director would send the vip\'s traffic back to the vip, never to a server; give the real server\'s own address (the vip is the address clients connect to)',
      'services[0].sorryServer.address: "198.18.0.10" is the service\'s own vip: the director would send the vip\'s traffic back to the vip, never to a server; give the sorry server\'s own address (the vip is the address clients connect to)',
    ],
  },
  {
    name: 'loopback local addresses, alone or inside a range',
    raw: { services: [svc({ localAddresses: ['127.0.0.1'] }), svc({ name: 'api', port: 81, localAddresses: ['126.255.255.254-127.0.0.2'] })] },
    want: [
      'services[0].localAddresses[0]: "127.0.0.1" is a loopback address: real servers cannot send their replies to it; give addresses the director owns on the real servers\' network, such as 198.19.1.100',
      'services[1].localAddresses[0]: "126.255.255.254-127.0.0.2" holds 127.0.0.0, which is a loopback address: real servers cannot send their replies to it; give addresses the director owns on the real servers\' network, such as 198.19.1.100',
    ],
  },
  {
    name: 'a local address that is the service\'s vip, another service\'s vip, or a real server of either',
    raw: { services: [
      svc({ localAddresses: ['198.18.0.8-198.18.0.12'] }),
      svc({ name: 'api', vip: '198.18.0.12', localAddresses: ['198.19.1.11-198.19.1.12'], realServers: [{ address: '198.19.1.12', port: 8080 }] }),
    ] },
    want: [
      'services[0].localAddresses: ["198.18.0.8-198.18.0.12"] holds 198.18.0.10, which is the service\'s own vip; choose local addresses that no vip, real server or other vip group\'s local addresses use',
      'services[0].localAddresses: ["198.18.0.8-198.18.0.12"] holds 198.18.0.12, which is the vip of services[1] ("api"); choose local addresses that no vip, real server or other vip group\'s local addresses use',
      'services[1].localAddresses: ["198.19.1.11-198.19.1.12"] holds 198.19.1.11, which is a real server of services[0] ("web"); choose local addresses that no vip, real server or other vip group\'s local addresses use',
      'services[1].localAddresses: ["198.19.1.11-198.19.1.12"] holds 198.19.1.12, which is a real server of the service; choose local addresses that no vip, real server or other vip group\'s local addresses use',
    ],
  },
  {
    name: 'local addresses shared by services of two vip groups (one group may share them)',
    raw: { services: [
      svc({ localAddresses: ['198.18.2.10-198.18.2.13'] }),
      svc({ name: 'web2', port: 81, localAddresses: ['198.18.2.10-198.18.2.11'] }),
      svc({ name: 'api', vip: '198.18.0.20', vipGroup: 'api', localAddresses: ['198.18.2.12-198.18.2.15'] }),
    ] },
    want: [
      'services[2].localAddresses: ["198.18.2.12-198.18.2.15"] overlaps the local addresses of services[0] ("web") at 198.18.2.12, but that service is in vip group "default" and this one in "api": both groups\' leaders would claim 198.18.2.12; give services in different vip groups separate local addresses, or put them in the same vip group',
    ],
  },
];

interface Good { name: string; raw: unknown; want: Omit<Config, 'vipGroups' | 'ecmp'> }

const valid: Good[] = [
  { name: 'empty mapping: no services, default agent settings', raw: {}, want: { agent: AGENT, services: [] } },
  { name: 'explicit empty service list', raw: { services: [] }, want: { agent: AGENT, services: [] } },
  {
    name: 'minimal fullnat service: protocol tcp, scheduler wrr, persistence off, weight 1 by default',
    raw: one({}),
    want: { agent: AGENT, services: [typed()] },
  },
  {
    name: 'real server without a port takes the service port',
    raw: one({ realServers: [{ address: '198.19.1.11' }] }),
    want: { agent: AGENT, services: [typed({ realServers: [{ address: '198.19.1.11', port: 80, weight: 1, healthCheck: null }] })] },
  },
  {
    name: 'a drained real server is programmed at weight 0; drained: false is as if absent',
    raw: one({ realServers: [{ address: '198.19.1.11', port: 8080, weight: 3, drained: true }, { address: '198.19.1.12', port: 8080, weight: 2, drained: false }] }),
    want: { agent: AGENT, services: [typed({ realServers: [
      { address: '198.19.1.11', port: 8080, weight: 0, drained: true, healthCheck: null }, { address: '198.19.1.12', port: 8080, weight: 2, healthCheck: null },
    ] })] },
  },
  {
    name: 'every field set, at the edges of their ranges',
    raw: {
      agent: { adminSocket: '/run/lbd/other.sock' },
      services: [svc({
        port: 65535, protocol: 'udp', scheduler: 'mh', persistenceSec: 31536000, expireOnRemove: true,
        realServers: [{ address: '198.19.1.11', port: 1, weight: 0, healthCheck: null }, { address: '198.19.1.12', port: 65535, weight: 65535, healthCheck: null }],
      })],
    },
    want: {
      agent: { adminSocket: '/run/lbd/other.sock', cluster: null, admin: ADMIN_DEFAULTS },
      services: [typed({
        port: 65535, protocol: 'udp', scheduler: 'mh', persistenceSec: 31536000, expireOnRemove: true,
        realServers: [{ address: '198.19.1.11', port: 1, weight: 0, healthCheck: null }, { address: '198.19.1.12', port: 65535, weight: 65535, healthCheck: null }],
      })],
    },
  },
  {
    name: 'nat service: no local addresses (an empty list is accepted)',
    raw: one({ mode: 'nat', localAddresses: [], scheduler: 'sh', persistenceSec: 0 }),
    want: { agent: AGENT, services: [typed({ mode: 'nat', scheduler: 'sh', localAddresses: null })] },
  },
  {
    name: 'dr service: mh by default, real servers on the vip\'s port',
    raw: one({ mode: 'dr', localAddresses: undefined, realServers: [{ address: '198.19.1.11' }, { address: '198.19.1.12', port: 80, weight: 2 }] }),
    want: { agent: AGENT, services: [typed({ mode: 'dr', scheduler: 'mh', localAddresses: null, realServers: [
      { address: '198.19.1.11', port: 80, weight: 1, healthCheck: null }, { address: '198.19.1.12', port: 80, weight: 2, healthCheck: null },
    ] })] },
  },
  {
    name: 'a SYN proxy and a connection limit',
    raw: one({ mode: 'nat', localAddresses: undefined, synProxy: true, sync: { enabled: false }, connectionLimit: 50000 }),
    want: { agent: AGENT, services: [typed({ mode: 'nat', localAddresses: null, synProxy: true, sync: { enabled: false, minAgeMs: 0 }, connectionLimit: 50000 })] },
  },
  {
    name: 'IPv6 addresses are canonicalised (RFC 5952) everywhere',
    raw: one({
      vip: 'FD00:0:0:1:0:0:0:10', localAddresses: ['fd00:2:0::10-FD00:2::13'],
      realServers: [{ address: 'FD00:0003:0000:0000:0000:0000:0000:0011', port: 8080, weight: 3, healthCheck: null }],
    }),
    want: { agent: AGENT, services: [typed({
      family: 6, vip: 'fd00:0:0:1::10', localAddresses: { first: 'fd00:2::10', last: 'fd00:2::13', size: 4 },
      realServers: [{ address: 'fd00:3::11', port: 8080, weight: 3, healthCheck: null }],
    })] },
  },
  {
    name: 'local addresses in pieces, out of order, that form one range',
    raw: one({ localAddresses: ['198.19.1.102', '198.19.1.100-198.19.1.101', ' 198.19.1.103 '] }),
    want: { agent: AGENT, services: [typed({ localAddresses: { first: '198.19.1.100', last: '198.19.1.103', size: 4 } })] },
  },
  {
    name: 'same vip and port with another protocol, and another port, are different services',
    raw: { services: [svc({}), svc({ name: 'dns', protocol: 'udp' }), svc({ name: 'tls', port: 443 })] },
    want: { agent: AGENT, services: [typed(), typed({ name: 'dns', protocol: 'udp' }), typed({ name: 'tls', port: 443 })] },
  },
  {
    name: 'ecmp: false is as if absent (a vip group\'s leader serves it)',
    raw: one({ ecmp: false }),
    want: { agent: AGENT, services: [typed()] },
  },
  {
    name: 'a service with no real servers yet',
    raw: one({ realServers: undefined }),
    want: { agent: AGENT, services: [typed({ realServers: [] })] },
  },
];

describe('validateConfig', () => {
  describe('rejects with every problem, exactly worded', () => {
    for (const tc of invalid) {
      it(tc.name, () => {
        const result = validateConfig(tc.raw);
        assert.equal(result.ok, false, 'expected the config to be rejected');
        if (result.ok) return;
        assert.deepEqual(result.problems.map(formatProblem), tc.want);
        for (const p of result.problems) {
          // "path: VALUE rule; fix" must stay splittable: one "; " per line.
          assert.ok(!p.rule.includes(';') && !p.fix.includes(';'), `";" inside rule or fix: ${formatProblem(p)}`);
        }
      });
    }
  });

  describe('accepts into the exact typed Config', () => {
    for (const tc of valid) {
      it(tc.name, () => {
        const result = validateConfig(tc.raw);
        assert.deepEqual(result, { ok: true, config: { ...tc.want, ecmp: null, vipGroups: defaultGroups(tc.want.services) } });
      });
    }
  });

  it('does not modify its input', () => {
    const raw = one({ vip: 'FD00::10', localAddresses: ['fd00::1'], realServers: [{ address: 'FD00::11' }] });
    const before = structuredClone(raw);
    validateConfig(raw);
    assert.deepEqual(raw, before);
  });
});

describe('formatProblem', () => {
  const cases: { name: string; problem: Parameters<typeof formatProblem>[0]; want: string }[] = [
    { name: 'missing value: the rule reads on its own', problem: { path: 'a.b', value: undefined, rule: 'a b is required', fix: 'add one' }, want: 'a.b: a b is required; add one' },
    { name: 'string value is quoted', problem: { path: 'a', value: 'x', rule: 'is bad', fix: 'fix it' }, want: 'a: "x" is bad; fix it' },
    { name: 'null', problem: { path: 'a', value: null, rule: 'is bad', fix: 'fix it' }, want: 'a: null is bad; fix it' },
    { name: 'NaN keeps its name', problem: { path: 'a', value: NaN, rule: 'is bad', fix: 'fix it' }, want: 'a: NaN is bad; fix it' },
    { name: '-Infinity keeps its name', problem: { path: 'a', value: -Infinity, rule: 'is bad', fix: 'fix it' }, want: 'a: -Infinity is bad; fix it' },
    { name: 'nested Infinity', problem: { path: 'a', value: [1, Infinity], rule: 'is bad', fix: 'fix it' }, want: 'a: [1,"Infinity"] is bad; fix it' },
  ];
  for (const tc of cases) {
    it(tc.name, () => assert.equal(formatProblem(tc.problem), tc.want));
  }
});
