//! Which IP addresses a webhook may be delivered to.
//!
//! An allowlist in spirit: an IPv4 address must be outside every special-purpose block of the
//! IANA registry that is not globally reachable; an IPv6 address must be global unicast
//! (`2000::/3`) outside the special blocks, or an IPv4-mapped / NAT64 address whose embedded
//! IPv4 address passes the IPv4 rules. Everything else is refused, named by its class.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What kind of address an IP is, for the delivery policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddressClass {
    /// Globally reachable unicast: the only class a webhook may go to in production.
    Public,
    Loopback,
    /// RFC 1918 and IPv6 unique local (`fc00::/7`).
    Private,
    /// `100.64.0.0/10`, carrier-grade NAT (RFC 6598).
    SharedCgnat,
    LinkLocal,
    Multicast,
    Unspecified,
    /// `255.255.255.255`.
    Broadcast,
    /// TEST-NET-1/2/3, `2001:db8::/32`, `3fff::/20`.
    Documentation,
    /// Anything else that is not globally reachable: `0.0.0.0/8`, `192.0.0.0/24`,
    /// `198.18.0.0/15`, `240.0.0.0/4`, IPv4-compatible IPv6, Teredo, 6to4, discard-only,
    /// site-local, local-use NAT64, space outside `2000::/3`...
    Reserved,
}

impl AddressClass {
    pub const fn as_str(self) -> &'static str {
        match self {
            AddressClass::Public => "public",
            AddressClass::Loopback => "loopback",
            AddressClass::Private => "private",
            AddressClass::SharedCgnat => "shared (CGNAT)",
            AddressClass::LinkLocal => "link-local",
            AddressClass::Multicast => "multicast",
            AddressClass::Unspecified => "unspecified",
            AddressClass::Broadcast => "broadcast",
            AddressClass::Documentation => "documentation",
            AddressClass::Reserved => "reserved",
        }
    }
}

impl fmt::Display for AddressClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

fn in_v4(ip: Ipv4Addr, net: [u8; 4], prefix: u32) -> bool {
    let mask = if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - prefix)
    };
    u32::from(ip) & mask == u32::from(Ipv4Addr::from(net)) & mask
}

fn in_v6(ip: Ipv6Addr, net: Ipv6Addr, prefix: u32) -> bool {
    let mask = if prefix == 0 {
        0
    } else {
        u128::MAX << (128 - prefix)
    };
    u128::from(ip) & mask == u128::from(net) & mask
}

/// The class of an IPv4 address.
pub fn classify_v4(ip: Ipv4Addr) -> AddressClass {
    use AddressClass::*;
    // Order matters only where blocks nest; none of these overlap except 240/4 and broadcast.
    const TABLE: &[([u8; 4], u32, AddressClass)] = &[
        ([255, 255, 255, 255], 32, Broadcast),
        ([0, 0, 0, 0], 32, Unspecified),
        ([0, 0, 0, 0], 8, Reserved),
        ([10, 0, 0, 0], 8, Private),
        ([100, 64, 0, 0], 10, SharedCgnat),
        ([127, 0, 0, 0], 8, Loopback),
        ([169, 254, 0, 0], 16, LinkLocal),
        ([172, 16, 0, 0], 12, Private),
        ([192, 0, 0, 0], 24, Reserved),
        ([192, 0, 2, 0], 24, Documentation),
        ([192, 31, 196, 0], 24, Reserved),
        ([192, 52, 193, 0], 24, Reserved),
        ([192, 88, 99, 0], 24, Reserved),
        ([192, 168, 0, 0], 16, Private),
        ([192, 175, 48, 0], 24, Reserved),
        ([198, 18, 0, 0], 15, Reserved),
        ([198, 51, 100, 0], 24, Documentation),
        ([203, 0, 113, 0], 24, Documentation),
        ([224, 0, 0, 0], 4, Multicast),
        ([240, 0, 0, 0], 4, Reserved),
    ];
    TABLE
        .iter()
        .find(|(net, prefix, _)| in_v4(ip, *net, *prefix))
        .map_or(Public, |(_, _, class)| *class)
}

const fn v6(segments: [u16; 8]) -> Ipv6Addr {
    Ipv6Addr::new(
        segments[0],
        segments[1],
        segments[2],
        segments[3],
        segments[4],
        segments[5],
        segments[6],
        segments[7],
    )
}

fn embedded_v4(ip: Ipv6Addr) -> Ipv4Addr {
    let o = ip.octets();
    Ipv4Addr::new(o[12], o[13], o[14], o[15])
}

/// The class of an IPv6 address. IPv4-mapped (`::ffff:0:0/96`) and NAT64 well-known-prefix
/// (`64:ff9b::/96`) addresses take the class of the IPv4 address they carry.
pub fn classify_v6(ip: Ipv6Addr) -> AddressClass {
    use AddressClass::*;
    if ip == Ipv6Addr::UNSPECIFIED {
        return Unspecified;
    }
    if ip == Ipv6Addr::LOCALHOST {
        return Loopback;
    }
    if in_v6(ip, v6([0, 0, 0, 0, 0, 0xffff, 0, 0]), 96)
        || in_v6(ip, v6([0x64, 0xff9b, 0, 0, 0, 0, 0, 0]), 96)
    {
        return classify_v4(embedded_v4(ip));
    }
    const SPECIAL: &[([u16; 8], u32, AddressClass)] = &[
        // Multicast and the link/site-local and unique-local blocks lie outside 2000::/3 but
        // are named for a clearer refusal.
        ([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, Multicast),
        ([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, LinkLocal),
        ([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10, Reserved),
        ([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, Private),
        // Inside 2000::/3.
        ([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32, Documentation),
        ([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20, Documentation),
        // IETF protocol assignments: Teredo (2001::/32), ORCHID, benchmarking, AMT...
        ([0x2001, 0, 0, 0, 0, 0, 0, 0], 23, Reserved),
        // 6to4 carries an IPv4 address of any kind; deprecated (RFC 7526).
        ([0x2002, 0, 0, 0, 0, 0, 0, 0], 16, Reserved),
        // SRv6 segment identifiers.
        ([0x5f00, 0, 0, 0, 0, 0, 0, 0], 16, Reserved),
    ];
    if let Some((_, _, class)) = SPECIAL
        .iter()
        .find(|(net, prefix, _)| in_v6(ip, v6(*net), *prefix))
    {
        return *class;
    }
    if in_v6(ip, v6([0x2000, 0, 0, 0, 0, 0, 0, 0]), 3) {
        Public
    } else {
        // ::/96 (IPv4-compatible), ::ffff:0:0:0/96 (IPv4-translated), 64:ff9b:1::/48
        // (local-use NAT64), 100::/64 (discard-only) and all unassigned space.
        Reserved
    }
}

pub fn classify(ip: IpAddr) -> AddressClass {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

/// Where webhooks may go: public addresses, plus loopback when the operator allowed it for
/// local use (`webhooks.allow_insecure_loopback`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AddressPolicy {
    pub allow_insecure_loopback: bool,
}

/// An address the policy refuses, with its class (safe to show the operator).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{ip} is a {class} address, where webhooks may not be delivered")]
pub struct ForbiddenAddress {
    pub ip: IpAddr,
    pub class: AddressClass,
}

impl AddressPolicy {
    /// Whether a webhook may connect to `ip`.
    pub fn check(self, ip: IpAddr) -> Result<(), ForbiddenAddress> {
        match classify(ip) {
            AddressClass::Public => Ok(()),
            AddressClass::Loopback if self.allow_insecure_loopback => Ok(()),
            class => Err(ForbiddenAddress { ip, class }),
        }
    }

    /// Every address must pass: a name that resolves to one public and one private address is
    /// refused, or an attacker could steer the connection to the private one.
    pub fn check_all(self, ips: &[IpAddr]) -> Result<(), ForbiddenAddress> {
        ips.iter().try_for_each(|ip| self.check(*ip))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use AddressClass::*;

    fn c(s: &str) -> AddressClass {
        classify(s.parse().unwrap())
    }

    #[test]
    fn ipv4_classes() {
        for (ip, class) in [
            ("8.8.8.8", Public),
            ("1.1.1.1", Public),
            ("93.184.215.14", Public),
            ("100.63.255.255", Public),
            ("100.128.0.0", Public),
            ("172.15.255.255", Public),
            ("172.32.0.0", Public),
            ("223.255.255.255", Public),
            ("0.0.0.0", Unspecified),
            ("0.1.2.3", Reserved),
            ("10.0.0.1", Private),
            ("10.255.255.255", Private),
            ("100.64.0.1", SharedCgnat),
            ("100.127.255.255", SharedCgnat),
            ("127.0.0.1", Loopback),
            ("127.255.255.254", Loopback),
            ("169.254.169.254", LinkLocal),
            ("172.16.0.1", Private),
            ("172.31.255.255", Private),
            ("192.0.0.8", Reserved),
            ("192.0.2.1", Documentation),
            ("192.88.99.1", Reserved),
            ("192.168.1.1", Private),
            ("198.18.0.1", Reserved),
            ("198.19.255.255", Reserved),
            ("198.51.100.7", Documentation),
            ("203.0.113.9", Documentation),
            ("224.0.0.1", Multicast),
            ("239.255.255.250", Multicast),
            ("240.0.0.1", Reserved),
            ("255.255.255.255", Broadcast),
        ] {
            assert_eq!(c(ip), class, "{ip}");
        }
    }

    #[test]
    fn ipv6_classes() {
        for (ip, class) in [
            ("2606:4700:4700::1111", Public),
            ("2a00:1450:4001:81b::200e", Public),
            ("::", Unspecified),
            ("::1", Loopback),
            ("::ffff:127.0.0.1", Loopback),
            ("::ffff:7f00:1", Loopback),
            ("::ffff:10.1.2.3", Private),
            ("::ffff:169.254.169.254", LinkLocal),
            ("::ffff:8.8.8.8", Public),
            ("::127.0.0.1", Reserved),
            ("::8.8.8.8", Reserved),
            ("::ffff:0:127.0.0.1", Reserved),
            ("64:ff9b::127.0.0.1", Loopback),
            ("64:ff9b::10.0.0.1", Private),
            ("64:ff9b::a9fe:a9fe", LinkLocal),
            ("64:ff9b::8.8.8.8", Public),
            ("64:ff9b:1::1", Reserved),
            ("100::1", Reserved),
            ("2001::1", Reserved),
            ("2001:db8::1", Documentation),
            ("3fff::1", Documentation),
            ("2002:7f00:1::1", Reserved),
            ("fc00::1", Private),
            ("fd12:3456::1", Private),
            ("fe80::1", LinkLocal),
            ("febf::1", LinkLocal),
            ("fec0::1", Reserved),
            ("ff02::1", Multicast),
            ("ff05::2", Multicast),
            ("4000::1", Reserved),
        ] {
            assert_eq!(c(ip), class, "{ip}");
        }
    }

    #[test]
    fn the_policy_allows_loopback_only_when_asked() {
        let strict = AddressPolicy::default();
        let local = AddressPolicy {
            allow_insecure_loopback: true,
        };
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        let private: IpAddr = "10.0.0.1".parse().unwrap();
        let public: IpAddr = "8.8.8.8".parse().unwrap();
        assert_eq!(strict.check(lo).unwrap_err().class, Loopback);
        assert!(local.check(lo).is_ok());
        assert!(local.check("::1".parse().unwrap()).is_ok());
        assert_eq!(local.check(private).unwrap_err().class, Private);
        assert!(strict.check(public).is_ok());
        assert!(strict.check_all(&[public, private]).is_err());
        assert!(strict.check_all(&[public]).is_ok());
        assert!(strict
            .check(lo)
            .unwrap_err()
            .to_string()
            .contains("loopback"));
    }
}
