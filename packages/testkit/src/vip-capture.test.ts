import assert from 'node:assert/strict';
import { dualFigures, parseCaptureLine, sentFigures, type VipPacket } from './vip-capture.js';

/** The capture's pure half: tcpdump lines to packets, packets to forwarding and answering figures. */
describe('vip capture', () => {
  const subjects = [{ name: 'dir1', mac: '02:00:00:00:00:01' }, { name: 'dir2', mac: '02:00:00:00:00:02' }];

  it('parses forwarded and ARP lines and names the sender by MAC', () => {
    assert.deepEqual(parseCaptureLine('1796136736.234258 02:00:00:00:00:01 > 6a:1f:00:00:00:fe, ethertype IPv4 (0x0800), length 74: 198.18.0.10.80 > 198.18.2.2.41822: Flags [S.], seq 1, ack 2, win 65160, length 0', subjects),
      { atUs: 1796136736234258, kind: 'forwarded', from: 'dir1', mac: '02:00:00:00:00:01' });
    assert.deepEqual(parseCaptureLine('1796136737.000001 02:00:00:00:00:02 > ff:ff:ff:ff:ff:ff, ethertype ARP (0x0806), length 42: Request who-has 198.18.0.10 (ff:ff:ff:ff:ff:ff) tell 198.18.0.10, length 28', subjects),
      { atUs: 1796136737000001, kind: 'arp', from: 'dir2', mac: '02:00:00:00:00:02' });
    assert.equal(parseCaptureLine('1796136737.000001 0a:00:00:00:00:09 > ff:ff:ff:ff:ff:ff, ethertype ARP (0x0806), length 42: Reply 198.18.0.10 is-at 0a:00:00:00:00:09, length 28', subjects)?.from, null);
    assert.equal(parseCaptureLine('listening on eth1, link-type EN10MB (Ethernet), snapshot length 96 bytes', subjects), undefined);
    assert.equal(parseCaptureLine('12 packets captured', subjects), undefined);
  });

  const at = (ms: number, from: string, kind: VipPacket['kind'] = 'forwarded'): VipPacket => ({ atUs: ms * 1000, kind, from, mac: '' });
  const cases: [string, VipPacket[], { packets: number; spanMs: number }][] = [
    ['no move: none', [at(0, 'dir1'), at(10, 'dir1'), at(900, 'dir1')], { packets: 0, spanMs: 0 }],
    ['a clean handover: none', [at(0, 'dir1'), at(100, 'dir1'), at(450, 'dir2'), at(460, 'dir2')], { packets: 0, spanMs: 0 }],
    ['the old leader after the new one\'s first', [at(0, 'dir1'), at(450, 'dir2'), at(451, 'dir1'), at(500, 'dir2'), at(2450.5, 'dir1'), at(2451, 'dir2')], { packets: 2, spanMs: 2000.5 }],
    ['a handover that bounced back: none', [at(0, 'dir1'), at(450, 'dir2'), at(500, 'dir2'), at(900, 'dir1'), at(905, 'dir1')], { packets: 0, spanMs: 0 }],
    ['the old leader beside the new one, then back alone: only the overlap', [at(0, 'dir1'), at(450, 'dir2'), at(460, 'dir1'), at(500, 'dir2'), at(900, 'dir1')], { packets: 1, spanMs: 10 }],
    ['the same instant counts', [at(450, 'dir2'), at(450, 'dir1')], { packets: 1, spanMs: 0 }],
    ['before the failure does not count', [at(-50, 'dir2'), at(-10, 'dir1'), at(20, 'dir1')], { packets: 0, spanMs: 0 }],
    ['other kinds and unknown senders do not count', [at(450, 'dir2'), at(500, 'dir1', 'arp'), at(510, 'x')], { packets: 0, spanMs: 0 }],
  ];
  for (const [what, packets, want] of cases) {
    it(`dual forwarding: ${what}`, () => {
      assert.deepEqual(dualFigures(packets, 'forwarded', 'dir1', 'dir2', 0), want);
    });
  }

  it('counts what each director sent after an instant, with its first and last', () => {
    const ps = [at(-5, 'dir1'), at(10, 'dir1'), at(12, 'dir1', 'arp'), at(30.25, 'dir1'), at(40, 'dir2')];
    assert.deepEqual(sentFigures(ps, 'forwarded', 'dir1', 0), { packets: 2, firstMs: 10, lastMs: 30.25 });
    assert.deepEqual(sentFigures(ps, 'arp', 'dir2', 0), { packets: 0, firstMs: null, lastMs: null });
  });
});
