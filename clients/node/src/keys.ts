// Keys for clients known only by their address.
//
// An IPv6 client is limited by its /64: one host usually holds a whole /64
// and can change address within it at will, so a limit per address limits
// nothing. An IPv4 address mapped into IPv6 (::ffff:192.0.2.1, as a dual
// stack socket reports IPv4 peers) is the IPv4 address. The key is the one
// PostgreSQL's network(set_masklen(address, 64)) and Python's ipaddress
// write, so that applications in either language share buckets:
// "ip:192.0.2.1", "ip:2001:db8:1:2::/64".

import { isIP } from 'node:net';

/** The 8 groups of an IPv6 address, or null if it is not one. */
function ipv6Groups(address: string): number[] | null {
  let text = address;
  const v4 = /^(.*:)(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4) {
    // The last 32 bits written as IPv4.
    const bytes = v4[2].split('.').map(Number);
    text = v4[1] + ((bytes[0] << 8) | bytes[1]).toString(16) + ':' + ((bytes[2] << 8) | bytes[3]).toString(16);
  }
  const halves = text.split('::');
  if (halves.length > 2) return null;
  const part = (s: string) => (s === '' ? [] : s.split(':').map((g) => parseInt(g, 16)));
  const head = part(halves[0]);
  const tail = halves.length === 2 ? part(halves[1]) : [];
  const fill = 8 - head.length - tail.length;
  if (halves.length === 2 ? fill < 1 : fill !== 0) return null;
  return [...head, ...new Array<number>(halves.length === 2 ? fill : 0).fill(0), ...tail];
}

/** An IPv6 address in RFC 5952's form: the longest run of two or more zero groups as "::". */
function formatIpv6(groups: number[]): string {
  let best = -1;
  let bestLength = 1;
  for (let i = 0; i < 8;) {
    let j = i;
    while (j < 8 && groups[j] === 0) j += 1;
    if (j - i > bestLength) {
      best = i;
      bestLength = j - i;
    }
    i = j === i ? i + 1 : j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (best < 0) return hex.join(':');
  return hex.slice(0, best).join(':') + '::' + hex.slice(best + bestLength).join(':');
}

/**
 * The key of a client known by its address: `ip:` and the IPv4 address, or
 * the IPv6 address's /64. An address that is not one (a missing peer
 * address) gives `ip:unknown`, one bucket shared by all such requests.
 */
export function addressKey(address: string | undefined | null): string {
  if (!address) return 'ip:unknown';
  const bare = address.replace(/%.*$/, ''); // a zone index (fe80::1%eth0)
  const family = isIP(bare);
  if (family === 4) return `ip:${bare}`;
  if (family !== 6) return 'ip:unknown';
  const groups = ipv6Groups(bare);
  if (!groups) return 'ip:unknown';
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
    return `ip:${groups[6] >> 8}.${groups[6] & 0xff}.${groups[7] >> 8}.${groups[7] & 0xff}`;
  }
  return `ip:${formatIpv6([...groups.slice(0, 4), 0, 0, 0, 0])}/64`;
}
