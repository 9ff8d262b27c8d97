//! Decoding of the rule fields `acl` and `firewall` share (prefixes, port
//! ranges, protocols), with the same error texts for both.

use serde::Deserialize;
use sluice_spec::{proto_number, IpNet, PortRange};

/// A config scalar written as a number or as text (`53` or `"1-1023"`).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Scalar {
    /// A number.
    Num(i64),
    /// Text.
    Text(String),
}

/// An address prefix or a bare address (`10.0.0.0/8`, `2001:db8::1`).
pub fn prefix(s: &str) -> Result<IpNet, String> {
    s.parse::<IpNet>()
        .or_else(|_| s.parse::<std::net::IpAddr>().map(IpNet::from))
        .map_err(|_| format!("invalid prefix `{s}` (expected e.g. 10.0.0.0/8 or 2001:db8::/32)"))
}

/// A port (`N`) or port range (`"A-B"`).
pub fn port_range(v: &Scalar) -> Result<PortRange, String> {
    match v {
        Scalar::Num(n) => u16::try_from(*n)
            .map(PortRange::single)
            .map_err(|_| format!("port {n} is out of range 0-65535")),
        Scalar::Text(s) => s
            .parse::<PortRange>()
            .map_err(|_| format!("invalid port range `{s}` (expected N or A-B)")),
    }
}

/// An IP protocol by number or name.
pub fn protocol(v: &Scalar) -> Result<u8, String> {
    match v {
        Scalar::Num(n) => {
            u8::try_from(*n).map_err(|_| format!("protocol {n} is out of range 0-255"))
        }
        Scalar::Text(s) => proto_number(s)
            .ok_or_else(|| format!("unknown protocol `{s}` (tcp, udp, icmp, icmpv6 or 0-255)")),
    }
}
