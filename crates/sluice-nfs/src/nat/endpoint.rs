//! A transport endpoint, what every NAT table and rewrite speaks of.

/// An IPv4 transport endpoint (for ICMP queries, the port is the query id
/// on the inside/external side and 0 on the remote side).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Endpoint {
    /// IPv4 address (host order).
    pub addr: u32,
    /// Port or ICMP query id.
    pub port: u16,
}

impl Endpoint {
    /// `addr:port`.
    pub const fn new(addr: u32, port: u16) -> Endpoint {
        Endpoint { addr, port }
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", std::net::Ipv4Addr::from(self.addr), self.port)
    }
}
