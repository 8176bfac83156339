// lbd dashboard: draws the agent's state (GET /api/events/stream, `state` events: see
// packages/operator-surfaces/src/dashboard/state.ts for its shape) and its event log (`lbd-event` events).
// Plain DOM, no framework and nothing from outside the agent. Every value from the agent is set as
// text, never as HTML.

const STREAM_URL = '/api/events/stream';
const MAX_EVENTS = 500;
const TIMELINE_ROWS = 150;
const DRILL_ROWS = 10;
const RECONNECT_FIRST_MS = 1000;
const RECONNECT_MAX_MS = 30_000;

/** @type {any} */
let state = null;
/** Agent clock minus browser clock, so ages are the agent's ("down for 4 s"), not skewed by this machine. */
let skewMs = 0;
/** @type {Map<string, any>} */
const events = new Map();
let receivedAt = 0;

// ---- connection ---------------------------------------------------------------------------------

let source = null;
let reconnectMs = RECONNECT_FIRST_MS;
let reconnectTimer = 0;

/**
 * EventSource reconnects by itself after a network error; after an answer it cannot use (the agent
 * restarting answers 503, a proxy's error page) it gives up, so this opens a new one with a backoff.
 */
function connect() {
  clearTimeout(reconnectTimer);
  setConn('connecting');
  const es = new EventSource(STREAM_URL);
  source = es;
  es.addEventListener('open', () => {
    reconnectMs = RECONNECT_FIRST_MS;
    setConn('live');
  });
  es.addEventListener('state', (m) => {
    state = JSON.parse(m.data);
    receivedAt = Date.now();
    skewMs = state.sampledAtUnixMs - receivedAt;
    render();
  });
  es.addEventListener('lbd-event', (m) => {
    const e = JSON.parse(m.data);
    events.set(e.id, e);
    if (events.size > MAX_EVENTS) {
      const ids = [...events.keys()].sort();
      for (const id of ids.slice(0, events.size - MAX_EVENTS)) events.delete(id);
    }
    renderEvents();
  });
  es.addEventListener('error', () => {
    if (source !== es) return;
    if (es.readyState !== EventSource.CLOSED) {
      setConn('connecting');
      return;
    }
    es.close();
    setConn('offline');
    reconnectTimer = setTimeout(connect, reconnectMs);
    reconnectMs = Math.min(reconnectMs * 2, RECONNECT_MAX_MS);
  });
}

function setConn(word) {
  const el = byId('conn');
  el.dataset.state = word;
  el.textContent = word === 'live' ? 'live' : word === 'connecting' ? 'reconnecting…' : 'offline, retrying';
}

// ---- helpers ------------------------------------------------------------------------------------

function byId(id) {
  return /** @type {HTMLElement} */ (document.getElementById(id));
}

/** An element with attributes (`class`, `data-*`, `title`, ...) and children (nodes or text). */
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null && v !== false) el.setAttribute(k, String(v));
  for (const c of children.flat()) if (c !== undefined && c !== null && c !== false) el.append(c instanceof Node ? c : String(c));
  return el;
}

function svg(tag, attrs = {}) {
  const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return el;
}

function agentNow() {
  return Date.now() + skewMs;
}

function age(unixMs) {
  if (!unixMs) return '';
  const s = Math.max(0, Math.round((agentNow() - unixMs) / 1000));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86_400)} d`;
}

function clock(unixMs) {
  const d = new Date(unixMs);
  return d.toLocaleTimeString([], { hour12: false }) + '.' + String(d.getMilliseconds()).padStart(3, '0');
}

function perSec(n, unit) {
  if (n === null || n === undefined) return '';
  if (n >= 1e9) return `${(n / 1e9).toFixed(1)} G${unit}/s`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)} M${unit}/s`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)} k${unit}/s`;
  return `${n} ${unit}/s`;
}

function replace(el, ...children) {
  el.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined));
}

// ---- rendering ----------------------------------------------------------------------------------

function render() {
  if (state === null) return;
  byId('self').textContent = state.cluster.clustered ? `director ${state.self}` : 'single director';
  byId('config').textContent = `config revision ${state.config.revision}` +
    (state.config.lastApply ? `, last apply ${state.config.lastApply.result}` : '');
  const problems = byId('problems');
  problems.hidden = state.problems.length === 0;
  replace(problems, state.problems.map((p) => h('div', {}, `Cannot read ${p}`)));
  renderCluster();
  renderServices();
  byId('timeline-section').hidden = !state.eventLog;
  byId('drills-section').hidden = !state.eventLog;
  renderEvents();
  tick();
}

function renderCluster() {
  const c = state.cluster;
  byId('topology-section').hidden = false;
  if (!c.clustered) {
    byId('cluster-summary').textContent = 'This director runs alone (no agent.cluster): no vip groups, no peers.';
    replace(byId('directors'));
    byId('groups').hidden = true;
    byId('sync').textContent = '';
    byId('ecmp').textContent = '';
    return;
  }
  byId('groups').hidden = false;
  byId('cluster-summary').textContent =
    `etcd ${c.etcdReachable ? 'reachable' : 'UNREACHABLE'} · worst-case takeover ${c.worstCaseTakeoverMs} ms · timing ${c.timingProfile}`;
  replace(byId('directors'), c.directors.map((d) => h('div', { class: 'director', 'data-director': d.id, 'data-healthy': d.healthy },
    h('div', {}, h('span', { class: 'name' }, d.id), ' ', h('span', { class: 'muted' }, d.self ? '(this page)' : d.version ? `v${d.version}` : '')),
    h('div', {},
      h('span', { class: `badge ${d.healthy ? 'ok' : 'bad'}` }, d.healthy ? 'healthy' : 'unhealthy'),
      d.self ? null : h('span', { class: `badge ${d.peerReachable ? 'ok' : 'bad'}`, 'data-peer-link': d.peerReachable ? 'up' : 'down', title: d.peerAddress },
        d.peerReachable ? 'peer link up' : 'peer link DOWN'),
      d.leaseLeftMs >= 0 ? h('span', { class: 'muted' }, ` lease ${(d.leaseLeftMs / 1000).toFixed(1)} s`) : null),
    h('div', {}, d.roles.map((r) => h('span', { class: `badge ${r.role}`, 'data-group': r.group, 'data-role': r.role, title: r.reason },
      `${r.group}: ${r.role} (prio ${r.priority})`))),
    d.problems.map((p) => h('div', { class: 'problem' }, p)))));
  replace(byId('groups').querySelector('tbody'), c.groups.map((g) => h('tr', { 'data-group': g.name },
    h('td', {}, g.name),
    h('td', { class: 'leader' }, g.leader || 'vacant'),
    h('td', {}, String(g.term)),
    h('td', { 'data-since': g.sinceUnixMs }, age(g.sinceUnixMs)),
    h('td', { class: 'mono' }, g.addresses.join(', ')),
    h('td', { class: 'muted' }, g.reason))));
  const s = c.sync;
  byId('sync').textContent = !s.enabled
    ? `connection sync off: ${s.disabledReason}`
    : 'connection sync: ' + (s.peers.length === 0 ? 'no peer stream' : s.peers.map((p) =>
      `${p.direction} ${p.peer} ${p.state}${p.caughtUp ? ', caught up' : ''}${p.direction === 'to' ? `, lag p99 ${p.lagP99Ms} ms` : ''}${p.lastError ? ` (${p.lastError})` : ''}`).join(' · '));
  // The ECMP tier: this director's paths and BGP sessions (its slots are rows of the groups table).
  const e = c.ecmp;
  byId('ecmp').textContent = e === null ? '' : 'ECMP tier: '
    + (e.withdrawnBecause ? `every path WITHDRAWN (${e.withdrawnBecause})` : `${e.pathsAnnounced} paths announced`)
    + (e.sessions.length === 0 ? ' · no BGP session' : e.sessions.map((x) => ` · BGP ${x.router} (AS ${x.asn}) ${x.state}`).join(''))
    + (e.lastError ? ` · speaker error: ${e.lastError}` : '');
}

function renderServices() {
  replace(byId('services'), state.services.map((svc) => h('div', { class: 'service', 'data-service': svc.key },
    h('div', { class: 'head' },
      h('span', { class: 'name' }, svc.name || svc.key),
      h('span', { class: 'mono' }, svc.key),
      h('span', { class: 'muted' }, `${svc.mode} ${svc.scheduler}`),
      h('span', { class: 'muted' }, `${svc.counts.up} up, ${svc.counts.down + svc.counts['held-down']} down${svc.counts.drained ? `, ${svc.counts.drained} drained` : ''}`),
      svc.flags.map((f) => h('span', { class: 'flag' }, f))),
    h('div', { class: 'grid' }, svc.realServers.map((rs) => tile(svc, rs))))));
}

function tile(svc, rs) {
  const words = { up: 'up', down: 'down', 'held-down': 'held down', drained: 'drained' };
  const c = rs.check;
  const last = c && c.lastResult;
  // How long it has been in its health state; a drained server's weight is the operator's, not health's.
  const since = c && c.sinceUnixMs && rs.state !== 'drained' ? ` ${age(c.sinceUnixMs)}` : '';
  return h('div', { class: 'rs', 'data-server': rs.server, 'data-service': svc.key, 'data-state': rs.state },
    h('div', { class: 'top' }, h('span', { class: 'addr mono' }, rs.server), h('span', { class: 'state' }, words[rs.state] + since)),
    h('div', {},
      `weight ${rs.effectiveWeight}`, rs.effectiveWeight !== rs.weight ? ` of ${rs.weight}` : '',
      ` · conns ${rs.activeConnections} active, ${rs.inactiveConnections} other`),
    rs.packetsPerSec !== null ? h('div', { class: 'muted' }, `${perSec(rs.packetsPerSec, 'pkt')} · ${perSec(rs.bytesPerSec, 'B')}`) : null,
    rs.state === 'held-down' && c && c.heldDownUntilUnixMs ? h('div', { class: 'flag' }, `held down until ${clock(c.heldDownUntilUnixMs)} (flapping)`) : null,
    // Words the state above does not already say: ramping, removed, kept, not-in-kernel, ...
    rs.flags.some((f) => f !== 'down' && f !== 'held-down') ? h('div', { class: 'flag' }, rs.flags.filter((f) => f !== 'down' && f !== 'held-down').join(' ')) : null,
    // The probe's message starts with what it probed ("http GET /: got 200").
    c ? h('div', { class: 'check', title: last ? last.message : c.description }, last ? `${last.message} [${last.latencyMs} ms]` : `${c.description}: not probed yet`)
      : h('div', { class: 'check' }, 'no health check'),
    c ? sparkline(rs.latencies, c.intervalMs) : null);
}

/** The check's recent probe latencies; failed probes are red dots on the baseline. */
function sparkline(samples, intervalMs) {
  const W = 196;
  const H = 30;
  const el = svg('svg', { class: 'spark', width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img' });
  if (samples.length === 0) return el;
  const max = Math.max(1, ...samples.map((s) => s.latencyMs));
  const step = samples.length > 1 ? (W - 4) / (samples.length - 1) : 0;
  const x = (i) => 2 + i * step;
  const y = (ms) => H - 3 - ((H - 6) * ms) / max;
  const ok = samples.map((s, i) => [i, s]).filter(([, s]) => s.ok);
  if (ok.length > 0) {
    el.append(svg('polyline', { points: ok.map(([i, s]) => `${x(i).toFixed(1)},${y(s.latencyMs).toFixed(1)}`).join(' ') }));
    // The latest result as a dot: a single sample is a line of no length.
    const [i, s] = ok[ok.length - 1];
    el.append(svg('circle', { class: 'ok', cx: x(i).toFixed(1), cy: y(s.latencyMs).toFixed(1), r: 2 }));
  }
  samples.forEach((s, i) => { if (!s.ok) el.append(svg('circle', { class: 'fail', cx: x(i).toFixed(1), cy: H - 3, r: 2.2 })); });
  const lat = ok.map(([, s]) => s.latencyMs);
  const title = svg('title');
  title.textContent = lat.length === 0 ? `last ${samples.length} probes failed`
    : `last ${samples.length} probes (every ${intervalMs} ms): ${Math.min(...lat)} / ${Math.round(lat.reduce((a, b) => a + b, 0) / lat.length * 10) / 10} / ${Math.max(...lat)} ms min/avg/max, ${samples.length - lat.length} failed`;
  el.prepend(title);
  return el;
}

function renderEvents() {
  if (state !== null && !state.eventLog) return;
  const all = [...events.values()].sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
  replace(byId('timeline'), all.slice(0, TIMELINE_ROWS).map((e) => h('li', { 'data-kind': e.kind, 'data-to': e.to, 'data-id': e.id },
    h('span', { class: 'mono', title: new Date(e.timeUnixMs).toISOString() }, clock(e.timeUnixMs)),
    h('span', {}, e.director),
    h('span', { class: 'kind' }, e.kind),
    h('span', {}, h('span', { class: 'what' }, `${e.subject}: ${e.from ? `${e.from} → ` : ''}${e.to}`), e.reason ? h('span', { class: 'muted' }, ` — ${e.reason}`) : null))));
  const drills = all.filter((e) => e.kind === 'drill').slice(0, DRILL_ROWS);
  replace(byId('drills').querySelector('tbody'), drills.length === 0
    ? [h('tr', {}, h('td', { colspan: 7, class: 'muted' }, 'no drill recorded yet (deploy/lab/lab drill records one)'))]
    : drills.map((e) => h('tr', { 'data-id': e.id, 'data-result': e.to },
      h('td', { title: new Date(e.timeUnixMs).toISOString() }, `${age(e.timeUnixMs)} ago`),
      h('td', {}, e.director),
      h('td', {}, e.subject),
      h('td', { class: e.to === 'pass' ? 'pass' : 'fail' }, e.to),
      // The fields a drill records (@lbd/testkit's drillRecord, recorded by the lab's drills).
      h('td', {}, e.fields.failedRequests !== undefined ? `${e.fields.failedRequests} of ${e.fields.requests ?? '?'}` : ''),
      h('td', {}, e.fields.noServiceMs !== undefined ? `${e.fields.noServiceMs} ms` : ''),
      h('td', { class: 'muted' }, e.reason))));
}

/** Once a second: how old the picture is (a stream that went quiet shows it). */
function tick() {
  if (receivedAt === 0) return;
  byId('updated').textContent = `last change ${Math.round((Date.now() - receivedAt) / 1000)} s ago`;
}

setInterval(tick, 1000);
connect();
