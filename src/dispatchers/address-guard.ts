import { isIPv4, isIPv6 } from 'node:net';

// [network, prefix length] of IPv4 ranges an outbound request must never reach.
const V4_BLOCKED: ReadonlyArray<readonly [number, number]> = [
  [0x00000000, 8], // 0.0.0.0/8 "this network"
  [0x0a000000, 8], // 10/8
  [0x64400000, 10], // 100.64/10 CGNAT (includes 100.100.100.200 metadata)
  [0x7f000000, 8], // 127/8
  [0xa9fe0000, 16], // 169.254/16 (includes 169.254.169.254 metadata)
  [0xac100000, 12], // 172.16/12
  [0xc0000000, 24], // 192.0.0/24 IETF protocol assignments
  [0xc0000200, 24], // 192.0.2/24 TEST-NET-1
  [0xc0a80000, 16], // 192.168/16
  [0xc6120000, 15], // 198.18/15 benchmarking, also used by fake-IP DNS proxies
  [0xc6336400, 24], // 198.51.100/24 TEST-NET-2
  [0xcb007100, 24], // 203.0.113/24 TEST-NET-3
  [0xe0000000, 3], // 224/4 multicast, 240/4 reserved, 255.255.255.255 broadcast
];

function isForbiddenV4(addr: number): boolean {
  for (const [net, len] of V4_BLOCKED) {
    const shift = 32 - len;
    if (addr >>> shift === net >>> shift) return true;
  }
  return false;
}

function parseV4(ip: string): number | undefined {
  const parts = ip.split('.');
  if (parts.length !== 4) return undefined;
  let n = 0;
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p)) return undefined;
    const v = Number(p);
    if (v > 255) return undefined;
    n = n * 256 + v;
  }
  return n;
}

/** Eight 16-bit groups; the input must already satisfy net.isIPv6. */
function parseV6(ip: string): number[] | undefined {
  let text = ip;
  const lastColon = text.lastIndexOf(':');
  const last = text.slice(lastColon + 1);
  if (last.includes('.')) {
    const v4 = parseV4(last);
    if (v4 === undefined) return undefined;
    text = `${text.slice(0, lastColon + 1)}${(v4 >>> 16).toString(16)}:${(v4 & 0xffff).toString(16)}`;
  }
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const toGroups = (s: string | undefined): number[] => (s ? s.split(':').map((g) => parseInt(g, 16)) : []);
  const head = toGroups(halves[0]);
  const tail = toGroups(halves[1]);
  const missing = 8 - head.length - tail.length;
  if (halves.length === 1 ? missing !== 0 : missing < 0) return undefined;
  const groups = [...head, ...new Array<number>(missing).fill(0), ...tail];
  return groups.some((g) => Number.isNaN(g) || g > 0xffff) ? undefined : groups;
}

function embeddedV4(hi: number, lo: number): number {
  return ((hi << 16) | lo) >>> 0;
}

function isForbiddenV6(g: number[]): boolean {
  const [w0 = 0, w1 = 0, w2 = 0, w3 = 0, w4 = 0, w5 = 0, w6 = 0, w7 = 0] = g;
  const zero0to3 = w0 === 0 && w1 === 0 && w2 === 0 && w3 === 0;
  if (zero0to3 && w4 === 0 && w5 === 0) return true; // ::, ::1, deprecated ::a.b.c.d
  if (zero0to3 && w4 === 0 && w5 === 0xffff) return isForbiddenV4(embeddedV4(w6, w7)); // ::ffff:0:0/96
  if (zero0to3 && w4 === 0xffff && w5 === 0) return isForbiddenV4(embeddedV4(w6, w7)); // ::ffff:0:0:0/96
  if (w0 === 0x64 && w1 === 0xff9b) {
    if (w2 === 1) return true; // 64:ff9b:1::/48 local-use NAT64
    if (w2 === 0 && w3 === 0 && w4 === 0 && w5 === 0) return isForbiddenV4(embeddedV4(w6, w7));
  }
  if (w0 === 0x2002) return isForbiddenV4(embeddedV4(w1, w2)); // 6to4
  if (w0 === 0x100 && w1 === 0 && w2 === 0 && w3 === 0) return true; // 100::/64 discard
  if (w0 === 0x2001 && w1 === 0xdb8) return true; // documentation
  if ((w0 & 0xfe00) === 0xfc00) return true; // fc00::/7 ULA (includes fd00:ec2::254)
  if ((w0 & 0xffc0) === 0xfe80 || (w0 & 0xffc0) === 0xfec0) return true; // link-local, site-local
  if ((w0 & 0xff00) === 0xff00) return true; // multicast
  return false;
}

/**
 * True when an outbound request must not connect to `ip`. Anything that is not a
 * valid IPv4/IPv6 literal counts as forbidden (fail closed).
 */
export function isForbiddenAddress(ip: string): boolean {
  let addr = ip.trim();
  if (addr.startsWith('[') && addr.endsWith(']')) addr = addr.slice(1, -1);
  const zone = addr.indexOf('%');
  if (zone !== -1) addr = addr.slice(0, zone);
  if (isIPv4(addr)) {
    const v4 = parseV4(addr);
    return v4 === undefined || isForbiddenV4(v4);
  }
  if (!isIPv6(addr)) return true;
  const groups = parseV6(addr.toLowerCase());
  return groups === undefined || isForbiddenV6(groups);
}
