//! IP protocol numbers shared by IPv4 (protocol) and IPv6 (next header).

use core::fmt;

/// An IP protocol / IPv6 next-header number.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct IpProtocol(pub u8);

impl IpProtocol {
    /// IPv6 hop-by-hop options (0).
    pub const HOPOPT: IpProtocol = IpProtocol(0);
    /// ICMP for IPv4 (1).
    pub const ICMP: IpProtocol = IpProtocol(1);
    /// TCP (6).
    pub const TCP: IpProtocol = IpProtocol(6);
    /// UDP (17).
    pub const UDP: IpProtocol = IpProtocol(17);
    /// IPv6 routing header (43).
    pub const IPV6_ROUTE: IpProtocol = IpProtocol(43);
    /// IPv6 fragment header (44).
    pub const IPV6_FRAG: IpProtocol = IpProtocol(44);
    /// GRE (47).
    pub const GRE: IpProtocol = IpProtocol(47);
    /// IPsec ESP (50).
    pub const ESP: IpProtocol = IpProtocol(50);
    /// IPsec AH (51).
    pub const AH: IpProtocol = IpProtocol(51);
    /// ICMP for IPv6 (58).
    pub const ICMPV6: IpProtocol = IpProtocol(58);
    /// IPv6 "no next header" (59).
    pub const IPV6_NONXT: IpProtocol = IpProtocol(59);
    /// IPv6 destination options (60).
    pub const IPV6_OPTS: IpProtocol = IpProtocol(60);
    /// SCTP (132).
    pub const SCTP: IpProtocol = IpProtocol(132);

    /// Short lowercase name for well-known protocols (`"tcp"`, `"udp"`, ...).
    pub const fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            0 => "hopopt",
            1 => "icmp",
            6 => "tcp",
            17 => "udp",
            43 => "ipv6-route",
            44 => "ipv6-frag",
            47 => "gre",
            50 => "esp",
            51 => "ah",
            58 => "icmpv6",
            59 => "ipv6-nonxt",
            60 => "ipv6-opts",
            132 => "sctp",
            _ => return None,
        })
    }

    /// True for TCP, UDP and SCTP, whose first four bytes are the ports.
    pub const fn has_ports(self) -> bool {
        matches!(self.0, 6 | 17 | 132)
    }
}

impl fmt::Display for IpProtocol {
    /// The short name, or `proto-N` for others.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "proto-{}", self.0),
        }
    }
}

impl fmt::Debug for IpProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IpProtocol({})", self.0)
    }
}

impl From<u8> for IpProtocol {
    fn from(v: u8) -> Self {
        IpProtocol(v)
    }
}

impl From<IpProtocol> for u8 {
    fn from(v: IpProtocol) -> Self {
        v.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(IpProtocol::UDP.to_string(), "udp");
        assert_eq!(IpProtocol(253).to_string(), "proto-253");
        assert!(IpProtocol::SCTP.has_ports());
        assert!(!IpProtocol::ICMP.has_ports());
    }
}
