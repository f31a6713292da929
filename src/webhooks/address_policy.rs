//! Which addresses a webhook may reach. Loopback, private, shared (CGNAT),
//! link-local, unique-local, unspecified, multicast, broadcast, documentation
//! and reserved ranges are refused unless private networks are allowed, in
//! every spelling (IPv4-mapped and -compatible IPv6, NAT64 included).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Whether `ip` is a public unicast address a webhook may be sent to.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    let refused = ip.is_unspecified()          // 0.0.0.0
        || a == 0                               // 0.0.0.0/8 "this network"
        || ip.is_loopback()                     // 127.0.0.0/8
        || ip.is_private()                      // 10/8, 172.16/12, 192.168/16
        || (a == 100 && (b & 0xc0) == 64)       // 100.64.0.0/10 shared address space
        || ip.is_link_local()                   // 169.254.0.0/16
        || (a == 192 && b == 0 && c == 0)       // 192.0.0.0/24 IETF protocol assignments
        || (a == 192 && b == 0 && c == 2)       // 192.0.2.0/24 TEST-NET-1
        || (a == 198 && (b & 0xfe) == 18)       // 198.18.0.0/15 benchmarking
        || (a == 198 && b == 51 && c == 100)    // 198.51.100.0/24 TEST-NET-2
        || (a == 203 && b == 0 && c == 113)     // 203.0.113.0/24 TEST-NET-3
        || ip.is_multicast()                    // 224.0.0.0/4
        || a >= 240; // 240.0.0.0/4 reserved, 255.255.255.255 broadcast
    !refused
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let segments = ip.segments();
    // IPv4-mapped (::ffff:a.b.c.d), IPv4-compatible (::a.b.c.d) and NAT64 (64:ff9b::a.b.c.d)
    // reach the embedded IPv4 address: judge that one.
    let embedded =
        |s: &[u16]| Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    if segments[..5] == [0; 5] && segments[5] == 0xffff {
        return is_public_v4(embedded(&segments));
    }
    if segments[..6] == [0; 6] && !ip.is_loopback() && !ip.is_unspecified() {
        return is_public_v4(embedded(&segments));
    }
    if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return is_public_v4(embedded(&segments));
    }
    let refused = ip.is_unspecified()                   // ::
        || ip.is_loopback()                              // ::1
        || (segments[0] & 0xfe00) == 0xfc00             // fc00::/7 unique local
        || (segments[0] & 0xffc0) == 0xfe80             // fe80::/10 link local
        || (segments[0] & 0xffc0) == 0xfec0             // fec0::/10 site local (deprecated)
        || (segments[0] & 0xff00) == 0xff00             // ff00::/8 multicast
        || (segments[0] == 0x2001 && segments[1] == 0x0db8) // 2001:db8::/32 documentation
        || (segments[0] == 0x0100 && segments[1..4] == [0, 0, 0]); // 100::/64 discard
    !refused
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_every_private_range_in_every_spelling() {
        let refused = [
            "0.0.0.0",
            "0.1.2.3",
            "127.0.0.1",
            "127.1.2.3",
            "10.0.0.1",
            "10.255.255.255",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.0.1",
            "192.168.255.255",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.255",
            "192.0.0.8",
            "192.0.2.1",
            "198.18.0.1",
            "198.51.100.1",
            "203.0.113.1",
            "224.0.0.1",
            "239.255.255.255",
            "240.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "fc00::1",
            "fdff:ffff::1",
            "fe80::1",
            "febf::1",
            "fec0::1",
            "ff02::1",
            "ff0e::1",
            "2001:db8::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:0.0.0.0",
            "::127.0.0.1",
            "::10.0.0.1",
            "64:ff9b::127.0.0.1",
            "64:ff9b::a00:1",
            "100::1",
        ];
        for text in refused {
            let ip: IpAddr = text.parse().unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
            assert!(!is_public(ip), "{text} must be refused");
        }
    }

    #[test]
    fn allows_public_addresses() {
        let allowed = [
            "1.1.1.1",
            "8.8.8.8",
            "93.184.216.34",
            "172.15.255.255",
            "172.32.0.1",
            "100.63.255.255",
            "100.128.0.1",
            "169.253.0.1",
            "2606:4700:4700::1111",
            "2001:4860:4860::8888",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ];
        for text in allowed {
            let ip: IpAddr = text.parse().unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
            assert!(is_public(ip), "{text} must be allowed");
        }
    }
}
