import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { hostname, tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { EXIT } from '@lbd/config';
import { FakeDataPlane } from '@lbd/dataplane/testing';
import { Agent } from '@lbd/director-agent';
import { main } from '@lbd/lbadm';

/**
 * `lbadm events` against a real lbd-agent (FakeDataPlane, temp config and socket), through lbadm's CLI
 * entry point with captured output: management commands leave a trail, --since selects by time (a
 * duration or an RFC 3339 time), --follow streams new events until interrupted. Here, not in
 * packages/lbadm, because only test/ may import both programs.
 */

const CONFIG = `services:
  - name: web
    vip: 198.18.0.10
    port: 80
    mode: nat
    realServers:
      - { address: 198.19.1.11, port: 8080, weight: 2 }
      - { address: 198.19.1.12, port: 8080, weight: 1 }
`;

interface Run { code: number; out: string; err: string }

describe('lbadm events against lbd-agent (end to end)', () => {
  let dir: string;
  let socket: string;
  let agent: Agent;

  async function lbadm(argv: string[], extra: { interrupt?: AbortSignal; onOut?: (t: string) => void; now?: () => number } = {}): Promise<Run> {
    let out = '';
    let err = '';
    const code = await main(['--socket', socket, ...argv], {
      stdout: (t) => { out += t; extra.onOut?.(t); }, stderr: (t) => { err += t; }, env: {},
      ...(extra.interrupt ? { interrupt: extra.interrupt } : {}), ...(extra.now ? { now: extra.now } : {}),
    });
    return { code, out, err };
  }

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'lbadm-events-'));
    socket = join(dir, 'admin.sock');
    const configPath = join(dir, 'lbd.yaml');
    await writeFile(configPath, CONFIG);
    agent = await Agent.start({ configPath, dataPlane: new FakeDataPlane(), adminSocket: socket, watch: false });
  });

  after(async () => {
    await agent.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('an lbadm apply leaves a trail in lbadm events: who applied, from which file, what changed', async () => {
    const next = join(dir, 'drain-rs2.yaml');
    await writeFile(next, CONFIG.replace('weight: 1 }', 'weight: 0 }'));
    const applied = await lbadm(['apply', '-f', next]);
    assert.equal(applied.code, EXIT.ok, applied.err);
    const r = await lbadm(['events', '--since', '10m']);
    assert.equal(r.code, EXIT.ok, r.err);
    const lines = r.out.trimEnd().split('\n');
    assert.match(lines[0]!, /^TIME +DIRECTOR +KIND +SUBJECT +CHANGE +REASON$/);
    const me = `${userInfo().username}@${hostname()}`;
    assert.equal(lines.length, 3, r.out);
    assert.match(lines[1]!, /^\S+Z +\S+ +config config +applied +revision 1 applied \(start from .*lbd\.yaml\): \+web; /);
    const [, change, reason] = /^\S+Z +\S+ +config +config +(applied -> applied) +(.*)$/.exec(lines[2]!) ?? [];
    assert.equal(change, 'applied -> applied', lines[2]);
    assert.equal(reason, `revision 2 applied (apply-rpc from ${next} by ${me}): ~web (198.19.1.12:8080 weight 1 -> 0); 1 operation`);
    const json = JSON.parse((await lbadm(['events', '--kind', 'config', '--json'])).out) as { events: { fields: Record<string, string> }[] };
    assert.deepEqual(json.events.map((e) => [e.fields.revision, e.fields.author, e.fields.caller]), [['1', '', undefined], ['2', me, 'unix-socket']]);
  });

  it('--since selects by time: a duration before now and an RFC 3339 time', async () => {
    const all = agent.events.recent(0);
    const last = all[all.length - 1]!;
    // "now" one hour after the last event: --since 30m shows nothing, --since 2h everything.
    const later = (): number => last.timeUnixMs + 3_600_000;
    const none = await lbadm(['events', '--since', '30m'], { now: later });
    assert.equal(none.code, EXIT.ok);
    assert.equal(none.out, '');
    assert.match(none.err, /^lbadm: no events since \S+Z\n$/);
    const some = await lbadm(['events', '--since', '2h', '--json'], { now: later });
    assert.equal((JSON.parse(some.out) as { events: unknown[] }).events.length, all.length);
    const at = new Date(last.timeUnixMs).toISOString();
    const fromLast = JSON.parse((await lbadm(['events', '--since', at, '--json'])).out) as { events: { id: string }[] };
    assert.deepEqual(fromLast.events.map((e) => e.id), all.filter((e) => e.timeUnixMs >= last.timeUnixMs).map((e) => e.id));
    const bad = await lbadm(['events', '--since', 'last tuesday']);
    assert.equal(bad.code, EXIT.usage);
    assert.match(bad.err, /--since: "last tuesday" is neither a duration before now/);
  });

  it('--follow prints the history, then each new event until interrupted (exit 0)', async () => {
    const ac = new AbortController();
    const seen: string[] = [];
    let resolveDrill: () => void = () => {};
    const drillSeen = new Promise<void>((r) => { resolveDrill = r; });
    const run = lbadm(['events', '--follow', '--kind', 'drill'], {
      interrupt: ac.signal,
      onOut: (t) => { seen.push(t); if (t.includes('box-death')) resolveDrill(); },
    });
    // The follower subscribes (the history has no drill yet), then a drill result is recorded.
    for (let i = 0; i < 400 && agent.events.subscriberCount === 0; i++) await new Promise((r) => setTimeout(r, 5));
    agent.admin.recordDrill({ scenario: 'box-death', result: 'pass', reason: 'no service for 352 ms; 0 broken connections', fields: {} }, { role: 'write', name: 'lab' });
    await drillSeen;
    ac.abort();
    const r = await run;
    assert.equal(r.code, EXIT.ok, r.err);
    assert.equal(r.err, 'lbadm: following events; Ctrl-C ends\n');
    assert.equal(seen.length, 1);
    assert.match(seen[0]!, /^\S+Z \S+ +drill +box-death +pass +no service for 352 ms; 0 broken connections\n$/);
  });
});
