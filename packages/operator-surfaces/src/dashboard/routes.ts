import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { fileURLToPath } from 'node:url';
import type { LbdEvent } from '@lbd/config';
import type { ClusterStatus, GetHealthResponse, GetStatusResponse } from '@lbd/proto';
import { silentLogger, type Logger } from '@lbd/log';
import type { HealthSink } from '../admin-server.js';
import type { EventSource, OpsRoute } from '../ops-types.js';
import { LatencyRings, dashboardState, type Answers, type CounterSample, type DashboardState } from './state.js';

/**
 * The live health dashboard's routes on the agent's HTTPS ops listener (which authenticates the caller and
 * checks the role; every route here only reads):
 *
 *   GET /                    the page (static/index.html)
 *   GET /static/<file>       its script and style sheet, from a fixed list (nothing else on disk is reachable)
 *   GET /api/state           the director's state as JSON (state.ts)
 *   GET /api/events          kept events as JSON (?since=<unix ms>&kind=<kind>&limit=<n>)
 *   GET /api/events/stream   server-sent events: `state` (a snapshot on connect and on every change) and
 *                            `lbd-event` (each event log entry, with its id, so a reconnecting browser
 *                            sends Last-Event-ID and misses none that are still kept)
 *
 * The agent is read only while a page watches: a poll of status (the kernel's counters and conntrack,
 * the cluster) every `pollMs`, of health (in memory) every `healthPollMs` for the latency sparklines, and
 * at once on a health transition or an event, so a server that goes down shows within one round trip.
 * Health alone is read on for `keepSamplingMs` after the last page closed, so the next one has history.
 * Each stream is bounded: a browser that stops reading gets newer snapshots in place of older ones and at
 * most `maxQueuedEvents` events waiting, after which its stream is cut (it reconnects and catches up).
 *
 * Not here: TLS, client certificates and roles (the ops listener's), the event log itself (the agent's EventLog).
 */

/** What the dashboard reads of the agent: the admin API's read calls (the Agent implements them). */
export interface DashboardBackend {
  status(): Promise<GetStatusResponse>;
  healthStatus(service: string): Promise<GetHealthResponse>;
  clusterStatus(): Promise<ClusterStatus>;
  /** Health transitions as they happen: the page then changes at once rather than on the next poll. */
  watchHealth?(sinceUnixMs: number, sink: HealthSink): () => void;
}

export interface DashboardOptions {
  readonly backend: DashboardBackend;
  /** The event log: the timeline and the drill results. Null: the page shows neither. */
  readonly events?: EventSource | null;
  readonly log?: Logger;
  /** How often status and cluster are read while a page watches (default 2000 ms). */
  readonly pollMs?: number;
  /** How often health is read while a page watches (default 500 ms; it is in memory). */
  readonly healthPollMs?: number;
  /** Streams open at once (default 32); one more is answered 503. */
  readonly maxStreams?: number;
  /** Events a stream may hold for a browser that does not read before it is cut (default 256). */
  readonly maxQueuedEvents?: number;
  /** A comment line this often keeps idle streams open through proxies (default 15 s). */
  readonly keepaliveMs?: number;
  /** Probe results kept per check for the sparklines (default 40). */
  readonly latencySamples?: number;
  /**
   * After the last page closes, health is still read this long (default 10 min), so a page opened again
   * (a reload, the next look) finds its sparklines filled. Nobody looking for longer: nothing is read.
   */
  readonly keepSamplingMs?: number;
  readonly now?: () => number;
}

/** The page's files, read once: a fixed list, so no path from a request ever reaches the file system. */
const STATIC_FILES: Readonly<Record<string, string>> = {
  'index.html': 'text/html; charset=utf-8',
  'dashboard.js': 'text/javascript; charset=utf-8',
  'dashboard.css': 'text/css; charset=utf-8',
};

/**
 * Where the page's files are. They are served as written (plain HTML, CSS and a JavaScript module; no
 * build step, no CDN), from the package's source tree: dist/dashboard/routes.js and
 * src/dashboard/static/ sit in the same package directory, which is how lbd-agent runs (from a checkout,
 * built in place).
 */
export const STATIC_DIR = fileURLToPath(new URL('../../src/dashboard/static/', import.meta.url));

/** Events sent to a page that connects: the last ones of the timeline, and the drill results. */
const BACKLOG_EVENTS = 200;
const BACKLOG_DRILLS = 10;
const BACKLOG_WINDOW_MS = 24 * 3600_000;
/** GET /api/state answers from a state younger than this instead of reading the kernel again. */
const STATE_REUSE_MS = 500;
/** After a health transition: when to read the kernel again, to show the weights the agent then applied. */
const AFTER_TRANSITION_MS = 250;
const MAX_EVENTS_LIMIT = 5000;
/** Sent on connect: how long the browser waits before reconnecting after the stream breaks. */
const RETRY_MS = 2000;

/**
 * One dashboard per agent: routes(), and the shared poller behind every stream. Streams end when the
 * agent stops (its health watch ends) or on close().
 */
export class Dashboard {
  private readonly backend: DashboardBackend;
  private readonly events: EventSource | null;
  private readonly log: Logger;
  private readonly pollMs: number;
  private readonly healthPollMs: number;
  private readonly maxStreams: number;
  private readonly maxQueuedEvents: number;
  private readonly keepaliveMs: number;
  private readonly now: () => number;
  private readonly files = new Map<string, { body: Buffer; type: string }>();
  private readonly streams = new Set<SseStream>();
  private readonly rings: LatencyRings;

  private status: GetStatusResponse | null = null;
  private cluster: ClusterStatus | null = null;
  private health: GetHealthResponse | null = null;
  private statusAt = 0;
  private partProblems = new Map<string, string>();
  /** Counters before the current status, and of it: rates are their difference. */
  private prevCounters: CounterSample | null = null;
  private currentCounters: CounterSample | null = null;
  private state: DashboardState | null = null;
  private stateKey = '';

  private refreshing: Promise<void> | null = null;
  /** A refresh asked for while one runs: 'full' reads everything, 'health' only health. */
  private again: 'full' | 'health' | null = null;
  private readonly keepSamplingMs: number;
  /** Status and cluster reads: while a page watches. */
  private statusTimer: ReturnType<typeof setInterval> | null = null;
  /** Health reads: while a page watches, and for keepSamplingMs after. */
  private healthTimer: ReturnType<typeof setInterval> | null = null;
  private idleSince = 0;
  private followUp: ReturnType<typeof setTimeout> | null = null;
  private unwatch: (() => void) | null = null;
  private unsubscribe: (() => void) | null = null;
  private closed = false;

  constructor(opts: DashboardOptions) {
    this.backend = opts.backend;
    this.events = opts.events ?? null;
    this.log = opts.log ?? silentLogger;
    this.pollMs = opts.pollMs ?? 2000;
    this.healthPollMs = opts.healthPollMs ?? 500;
    this.maxStreams = opts.maxStreams ?? 32;
    this.maxQueuedEvents = opts.maxQueuedEvents ?? 256;
    this.keepaliveMs = opts.keepaliveMs ?? 15_000;
    this.rings = new LatencyRings(opts.latencySamples ?? 40);
    this.keepSamplingMs = opts.keepSamplingMs ?? 600_000;
    this.now = opts.now ?? Date.now;
    for (const [name, type] of Object.entries(STATIC_FILES)) {
      this.files.set(name, { body: readFileSync(`${STATIC_DIR}${name}`), type });
    }
  }

  /** Open streams (tests wait on it). */
  get streamCount(): number {
    return this.streams.size;
  }

  /** Whether the status poller, health watch and event subscription run (only while a stream is open). */
  get watching(): boolean {
    return this.statusTimer !== null;
  }

  /** Whether health is read for the sparklines (while a stream is open, and keepSamplingMs after). */
  get sampling(): boolean {
    return this.healthTimer !== null;
  }

  routes(): OpsRoute[] {
    return [
      { method: 'GET', path: '/', role: 'read', handle: (req, res) => this.file(req, res, 'index.html') },
      { method: 'GET', path: '/static/', prefix: true, role: 'read', handle: (req, res) => this.file(req, res, pathOf(req).slice('/static/'.length)) },
      { method: 'GET', path: '/api/state', role: 'read', handle: (req, res) => this.stateRoute(req, res) },
      { method: 'GET', path: '/api/events', role: 'read', handle: (req, res) => this.eventsRoute(req, res) },
      { method: 'GET', path: '/api/events/stream', role: 'read', handle: (req, res) => this.stream(req, res) },
    ];
  }

  /** Ends every stream and stops reading the agent. */
  close(): void {
    this.closed = true;
    for (const s of [...this.streams]) s.end();
    this.stopWatching();
    this.stopSampling();
  }

  private file(req: IncomingMessage, res: ServerResponse, name: string): void {
    const f = this.files.get(name);
    // `/` only: `/index.html/x` or `/foo` are not the page.
    if (f === undefined || (name === 'index.html' && pathOf(req) !== '/')) {
      sendText(res, 404, `${pathOf(req)}: not found; the dashboard is at /`);
      return;
    }
    res.writeHead(200, {
      'content-type': f.type, 'content-length': f.body.length, 'cache-control': 'no-cache', 'x-content-type-options': 'nosniff',
      // Everything comes from the agent itself: no CDN, nothing inline.
      'content-security-policy': "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; frame-ancestors 'none'",
    });
    res.end(req.method === 'HEAD' ? undefined : f.body);
  }

  private async stateRoute(_req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (!this.fresh()) await this.refresh('full');
    sendJson(res, 200, this.state);
  }

  private eventsRoute(req: IncomingMessage, res: ServerResponse): void {
    const q = new URL(req.url ?? '/', 'http://x').searchParams;
    const problems: string[] = [];
    const since = intParam(q, 'since', 0, Number.MAX_SAFE_INTEGER, 0, problems);
    const limit = intParam(q, 'limit', 1, MAX_EVENTS_LIMIT, 500, problems);
    const kind = q.get('kind') ?? '';
    if (problems.length > 0) {
      sendJson(res, 400, { error: problems.join('; ') });
      return;
    }
    let events = this.events?.recent(since) ?? [];
    if (kind !== '') events = events.filter((e) => e.kind === kind);
    sendJson(res, 200, { events: events.slice(-limit) });
  }

  private stream(req: IncomingMessage, res: ServerResponse): void {
    if (this.closed) {
      sendText(res, 503, 'the agent is stopping; try again when it is back');
      return;
    }
    if (this.streams.size >= this.maxStreams) {
      sendText(res, 503, `${this.maxStreams} dashboard streams are open, the most this agent serves; close a dashboard tab and reload`);
      return;
    }
    const s = new SseStream(res, this.maxQueuedEvents, this.keepaliveMs, () => {
      this.streams.delete(s);
      if (this.streams.size === 0) this.stopWatching();
    });
    this.streams.add(s);
    s.open(RETRY_MS);
    for (const e of this.backlog(lastEventId(req))) s.event(e);
    if (!this.watching) this.startWatching();
    if (this.fresh()) s.state(this.stateJson());
    // A changed state reaches every stream, this one included; an unchanged one only this one.
    else void this.refresh('full').then(() => { if (!s.hasState && this.state !== null) s.state(this.stateJson()); });
  }

  /** The events a page gets on connect: after the one it last saw, or the recent timeline and the last drills. */
  private backlog(lastId: string | null): LbdEvent[] {
    if (this.events === null) return [];
    if (lastId !== null) {
      const ms = Number(lastId.slice(0, 13));
      if (Number.isFinite(ms)) return this.events.recent(ms).filter((e) => e.id > lastId);
    }
    const recent = this.events.recent(this.now() - BACKLOG_WINDOW_MS).slice(-BACKLOG_EVENTS);
    const have = new Set(recent.map((e) => e.id));
    const drills = this.events.recent(0).filter((e) => e.kind === 'drill' && !have.has(e.id)).slice(-BACKLOG_DRILLS);
    return [...drills, ...recent].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  private startWatching(): void {
    this.statusTimer = setInterval(() => { void this.refresh('full'); }, this.pollMs);
    this.statusTimer.unref();
    if (this.healthTimer === null) {
      this.healthTimer = setInterval(() => {
        if (this.streams.size === 0 && this.now() - this.idleSince > this.keepSamplingMs) this.stopSampling();
        else void this.refresh('health');
      }, this.healthPollMs);
      this.healthTimer.unref();
    }
    // Only live transitions: a time in the future skips the kept history.
    this.unwatch = this.backend.watchHealth?.(Number.MAX_SAFE_INTEGER, {
      event: () => {
        void this.refresh('health');
        this.scheduleFollowUp();
      },
      // The agent is stopping: nothing more will change.
      end: () => this.close(),
    }) ?? null;
    this.unsubscribe = this.events?.subscribe((e) => {
      for (const s of this.streams) s.event(e);
      this.scheduleFollowUp();
    }) ?? null;
  }

  private stopSampling(): void {
    if (this.healthTimer !== null) clearInterval(this.healthTimer);
    this.healthTimer = null;
  }

  /** The last stream went: status and the subscriptions stop; health sampling goes on for keepSamplingMs. */
  private stopWatching(): void {
    this.idleSince = this.now();
    if (this.statusTimer !== null) clearInterval(this.statusTimer);
    this.statusTimer = null;
    if (this.followUp !== null) clearTimeout(this.followUp);
    this.followUp = null;
    this.unwatch?.();
    this.unwatch = null;
    this.unsubscribe?.();
    this.unsubscribe = null;
  }

  /** A full read soon after a change, to show what the agent did about it (weights applied, vips moved). */
  private scheduleFollowUp(): void {
    if (this.followUp !== null || !this.watching) return;
    this.followUp = setTimeout(() => {
      this.followUp = null;
      void this.refresh('full');
    }, AFTER_TRANSITION_MS);
    this.followUp.unref();
  }

  /** Reads the agent (one read at a time; asks made meanwhile run once after it) and sends a changed state. */
  private refresh(what: 'full' | 'health'): Promise<void> {
    if (this.refreshing !== null) {
      if (this.again !== 'full') this.again = what;
      return this.refreshing;
    }
    this.refreshing = (async () => {
      try {
        await this.read(what);
      } finally {
        this.refreshing = null;
      }
      const next = this.again;
      this.again = null;
      if (next !== null && !this.closed) await this.refresh(next);
    })();
    return this.refreshing;
  }

  private async read(what: 'full' | 'health'): Promise<void> {
    const part = async <T>(name: string, call: () => Promise<T>): Promise<T | null> => {
      try {
        const v = await call();
        this.partProblems.delete(name);
        return v;
      } catch (err) {
        const message = `${name}: ${err instanceof Error ? err.message : String(err)}`;
        if (this.partProblems.get(name) !== message) this.log.warn('dashboard cannot read the agent', { part: name, error: message });
        this.partProblems.set(name, message);
        return null;
      }
    };
    const [health, status, cluster] = await Promise.all([
      part('health', () => this.backend.healthStatus('')),
      what === 'full' ? part('status', () => this.backend.status()) : Promise.resolve(undefined),
      what === 'full' ? part('cluster status', () => this.backend.clusterStatus()) : Promise.resolve(undefined),
    ]);
    const now = this.now();
    if (health !== null) {
      this.health = health;
      this.rings.record(health, now);
    }
    if (status !== undefined) {
      // A failed read shows the last answer, with the problem said above it.
      if (status !== null) {
        this.status = status;
        this.statusAt = now;
        this.prevCounters = this.currentCounters;
      }
      if (cluster !== null && cluster !== undefined) this.cluster = cluster;
    }
    const answers: Answers = {
      status: this.status, health: this.health, cluster: this.cluster, statusAtUnixMs: this.statusAt, eventLog: this.events !== null, problems: [...this.partProblems.values()],
    };
    const { state, counters } = dashboardState(answers, now, this.prevCounters, (key) => this.rings.samples(key));
    if (status) this.currentCounters = counters;
    this.state = state;
    const key = JSON.stringify({ ...state, sampledAtUnixMs: 0 });
    if (key === this.stateKey) return;
    this.stateKey = key;
    const json = this.stateJson();
    for (const s of this.streams) s.state(json);
  }

  /** Whether the last state is young enough to answer with instead of reading the agent again. */
  private fresh(): boolean {
    return this.state !== null && this.now() - this.state.sampledAtUnixMs <= STATE_REUSE_MS;
  }

  private stateJson(): string {
    return JSON.stringify(this.state);
  }
}

/**
 * One server-sent-events response. Writes go straight out while the socket keeps up; while it does not,
 * the newest state replaces any older one waiting and events queue up to a bound, past which the
 * stream is cut (the browser reconnects with Last-Event-ID and gets what it missed from the backlog).
 */
class SseStream {
  /** Whether a state was sent (or waits to be): the first one goes out on connect. */
  hasState = false;
  private blocked = false;
  private pendingState: string | null = null;
  private readonly pendingEvents: string[] = [];
  private ended = false;
  private readonly keepalive: ReturnType<typeof setInterval>;

  constructor(
    private readonly res: ServerResponse,
    private readonly maxQueued: number,
    keepaliveMs: number,
    private readonly onEnd: () => void,
  ) {
    this.keepalive = setInterval(() => { if (!this.blocked) this.write(': keepalive\n\n'); }, keepaliveMs);
    this.keepalive.unref();
    res.on('close', () => this.end());
    res.on('error', () => this.end());
  }

  open(retryMs: number): void {
    this.res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', 'x-content-type-options': 'nosniff',
      // Proxies (nginx) must not buffer the stream.
      'x-accel-buffering': 'no',
    });
    this.write(`retry: ${retryMs}\n\n`);
  }

  state(json: string): void {
    this.hasState = true;
    const chunk = `event: state\ndata: ${json}\n\n`;
    if (this.blocked) this.pendingState = chunk;
    else this.write(chunk);
  }

  event(e: LbdEvent): void {
    // Ids are `<ms>-<director>-<seq>`: no newline can break the field.
    const chunk = `id: ${e.id.replace(/[\r\n]/g, '')}\nevent: lbd-event\ndata: ${JSON.stringify(e)}\n\n`;
    if (!this.blocked) {
      this.write(chunk);
      return;
    }
    if (this.pendingEvents.length >= this.maxQueued) {
      // The browser stopped reading: cut it off rather than buffer without end.
      this.res.destroy();
      this.end();
      return;
    }
    this.pendingEvents.push(chunk);
  }

  end(): void {
    if (this.ended) return;
    this.ended = true;
    clearInterval(this.keepalive);
    this.pendingEvents.length = 0;
    this.pendingState = null;
    if (!this.res.writableEnded) this.res.end();
    this.onEnd();
  }

  private write(chunk: string): void {
    if (this.ended) return;
    if (!this.res.write(chunk)) {
      this.blocked = true;
      this.res.once('drain', () => this.flush());
    }
  }

  private flush(): void {
    this.blocked = false;
    while (!this.blocked && !this.ended) {
      let next = this.pendingEvents.shift();
      if (next === undefined) {
        if (this.pendingState === null) return;
        next = this.pendingState;
        this.pendingState = null;
      }
      this.write(next);
    }
  }
}

function pathOf(req: IncomingMessage): string {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  return q < 0 ? url : url.slice(0, q);
}

function lastEventId(req: IncomingMessage): string | null {
  const h = req.headers['last-event-id'];
  const v = Array.isArray(h) ? h[0] : h;
  return v === undefined || v === '' || v.length > 200 ? null : v;
}

function intParam(q: URLSearchParams, name: string, min: number, max: number, dflt: number, problems: string[]): number {
  const raw = q.get(name);
  if (raw === null || raw === '') return dflt;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) {
    problems.push(`${name}: ${JSON.stringify(raw)} is not a whole number from ${min} to ${max}`);
    return dflt;
  }
  return n;
}

function sendJson(res: ServerResponse, code: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(code, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function sendText(res: ServerResponse, code: number, text: string): void {
  res.writeHead(code, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store', 'content-length': Buffer.byteLength(text) });
  res.end(`${text}`);
}
