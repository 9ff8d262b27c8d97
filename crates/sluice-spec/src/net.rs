//! Small network value types of the schema: port ranges, prefixes and
//! protocol names.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use ipnet::IpNet;

/// An inclusive range of TCP/UDP ports, written `1024-65535` or `80`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PortRange {
    /// First port of the range.
    pub lo: u16,
    /// Last port of the range (inclusive, `>= lo`).
    pub hi: u16,
}

impl PortRange {
    /// Every port, `0-65535`.
    pub const ALL: PortRange = PortRange { lo: 0, hi: 65_535 };

    /// The range `lo..=hi`, or `None` if `lo > hi`.
    pub const fn new(lo: u16, hi: u16) -> Option<PortRange> {
        if lo <= hi {
            Some(PortRange { lo, hi })
        } else {
            None
        }
    }

    /// The single port `port`.
    pub const fn single(port: u16) -> PortRange {
        PortRange { lo: port, hi: port }
    }

    /// Whether `port` is in the range.
    pub const fn contains(&self, port: u16) -> bool {
        self.lo <= port && port <= self.hi
    }

    /// Whether every port of `other` is in this range.
    pub const fn covers(&self, other: &PortRange) -> bool {
        self.lo <= other.lo && other.hi <= self.hi
    }

    /// Number of ports in the range (1..=65536).
    pub const fn len(&self) -> u32 {
        self.hi as u32 - self.lo as u32 + 1
    }

    /// Always false: a range holds at least one port.
    pub const fn is_empty(&self) -> bool {
        false
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.lo == self.hi {
            write!(f, "{}", self.lo)
        } else {
            write!(f, "{}-{}", self.lo, self.hi)
        }
    }
}

impl FromStr for PortRange {
    type Err = String;

    /// Parses `a-b` or `a` (0..=65535 each, `a <= b`).
    fn from_str(s: &str) -> Result<Self, String> {
        let port = |p: &str| -> Result<u16, String> {
            let p = p.trim();
            if p.is_empty() || !p.chars().all(|c| c.is_ascii_digit()) {
                return Err(format!(
                    "invalid port range {s:?}: expected a port (0-65535) or a range like 1024-65535"
                ));
            }
            p.parse::<u16>()
                .map_err(|_| format!("invalid port range {s:?}: port {p} is above 65535"))
        };
        match s.split_once('-') {
            Some((a, b)) => {
                let (lo, hi) = (port(a)?, port(b)?);
                PortRange::new(lo, hi).ok_or_else(|| {
                    format!("invalid port range {s:?}: the first port must not exceed the last")
                })
            }
            None => Ok(PortRange::single(port(s)?)),
        }
    }
}

/// Parses a CIDR prefix such as `10.0.0.0/8` or `fd00::/64`. A bare address
/// is a host prefix (`/32` or `/128`). Host bits must be zero.
pub(crate) fn parse_prefix(s: &str) -> Result<IpNet, String> {
    let net = if s.contains('/') {
        IpNet::from_str(s).map_err(|_| {
            format!("invalid CIDR prefix {s:?}: expected e.g. 10.0.0.0/8 or fd00::/64")
        })?
    } else {
        let addr = IpAddr::from_str(s).map_err(|_| {
            format!("invalid CIDR prefix {s:?}: expected e.g. 10.0.0.0/8 or fd00::/64")
        })?;
        IpNet::from(addr)
    };
    check_prefix(&net)?;
    Ok(net)
}

/// Rejects prefixes with host bits set, suggesting the network.
pub(crate) fn check_prefix(net: &IpNet) -> Result<(), String> {
    if net.trunc() != *net {
        return Err(format!(
            "prefix {net} has host bits set (did you mean {}?)",
            net.trunc()
        ));
    }
    Ok(())
}

/// The IP version (4 or 6) of a prefix.
pub(crate) fn family(net: &IpNet) -> u8 {
    match net {
        IpNet::V4(_) => 4,
        IpNet::V6(_) => 6,
    }
}

/// Protocol names accepted by `match.proto`, with their numbers.
pub(crate) const PROTO_NAMES: [(&str, u8); 4] =
    [("tcp", 6), ("udp", 17), ("icmp", 1), ("icmpv6", 58)];

/// The IP protocol number for a name accepted in `match.proto`
/// (`tcp`, `udp`, `icmp`, `icmpv6`).
pub fn proto_number(name: &str) -> Option<u8> {
    PROTO_NAMES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, p)| *p)
}

/// The name of an IP protocol number, if it has one in the schema.
pub fn proto_name(proto: u8) -> Option<&'static str> {
    PROTO_NAMES
        .iter()
        .find(|(_, p)| *p == proto)
        .map(|(n, _)| *n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_ranges() {
        assert_eq!("80".parse(), Ok(PortRange::single(80)));
        assert_eq!(
            "1024-65535".parse(),
            Ok(PortRange {
                lo: 1024,
                hi: 65535
            })
        );
        assert!("2000-1000".parse::<PortRange>().is_err());
        assert!("70000".parse::<PortRange>().is_err());
        assert!("a-b".parse::<PortRange>().is_err());
        assert!("".parse::<PortRange>().is_err());
        let r = PortRange::new(10, 20).unwrap();
        assert!(r.contains(10) && r.contains(20) && !r.contains(21));
        assert_eq!(r.len(), 11);
        assert_eq!(r.to_string(), "10-20");
        assert!(PortRange::ALL.covers(&r));
    }

    #[test]
    fn prefixes() {
        assert_eq!(
            parse_prefix("10.0.0.0/8").unwrap().to_string(),
            "10.0.0.0/8"
        );
        assert_eq!(parse_prefix("10.0.0.1").unwrap().to_string(), "10.0.0.1/32");
        assert_eq!(parse_prefix("fd00::/64").unwrap().to_string(), "fd00::/64");
        assert_eq!(
            parse_prefix("10.0.0.1/8").unwrap_err(),
            "prefix 10.0.0.1/8 has host bits set (did you mean 10.0.0.0/8?)"
        );
        assert!(parse_prefix("10.0.0/33").is_err());
        assert!(parse_prefix("10.0.0.0/33").is_err());
    }

    #[test]
    fn protocols() {
        assert_eq!(proto_number("udp"), Some(17));
        assert_eq!(proto_name(58), Some("icmpv6"));
        assert_eq!(proto_name(47), None);
    }
}
