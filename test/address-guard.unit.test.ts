import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isForbiddenAddress } from '../src/dispatchers/address-guard.ts';

const forbidden = [
  '127.0.0.1', '127.255.255.254', '10.0.0.1', '10.255.255.255', '172.16.0.1', '172.31.255.255',
  '192.168.1.1', '169.254.0.1', '169.254.169.254', '100.64.0.1', '100.127.255.255', '100.100.100.200',
  '0.0.0.0', '0.1.2.3', '224.0.0.1', '239.255.255.250', '255.255.255.255', '240.0.0.1',
  '192.0.0.192', '198.18.0.1', '192.0.2.1',
  '::', '::1', '0:0:0:0:0:0:0:1', 'fc00::1', 'fd12:3456::1', 'fd00:ec2::254', 'fe80::1', 'fe80::1%eth0',
  'febf::1', 'ff02::1', 'fec0::1', '100::1', '2001:db8::1',
  '::ffff:127.0.0.1', '::ffff:7f00:1', '::FFFF:10.1.2.3', '::ffff:169.254.169.254', '[::ffff:192.168.0.1]',
  '::ffff:0:10.0.0.1', '::127.0.0.1', '::8.8.8.8',
  '64:ff9b::10.0.0.1', '64:ff9b::a9fe:a9fe', '64:ff9b:1::1', '2002:0a00:0001::1', '2002:7f00:1::',
];
const allowed = [
  '8.8.8.8', '1.1.1.1', '93.184.216.34', '172.15.255.255', '172.32.0.0', '100.63.255.255', '100.128.0.0',
  '169.253.255.255', '192.169.0.1', '11.0.0.1', '223.255.255.255', '198.20.0.1',
  '2606:4700:4700::1111', '2001:4860:4860::8888', '::ffff:8.8.8.8', '::ffff:808:808', '64:ff9b::8.8.8.8',
  '2002:0808:0808::1', 'fbff::1',
];

test('forbidden addresses are refused', () => {
  for (const ip of forbidden) assert.equal(isForbiddenAddress(ip), true, ip);
});

test('public addresses are allowed', () => {
  for (const ip of allowed) assert.equal(isForbiddenAddress(ip), false, ip);
});

test('non-addresses fail closed', () => {
  for (const s of ['', 'localhost', 'example.com', '1.2.3', '256.1.1.1', '01.2.3.4', ':::', '1::2::3', 'g::1']) {
    assert.equal(isForbiddenAddress(s), true, s);
  }
});
