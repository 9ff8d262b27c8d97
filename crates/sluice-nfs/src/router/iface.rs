//! The router's interfaces: a sluice port with a MAC and addresses.

use sluice_nf::PortId;

/// One router interface.
#[derive(Debug, Clone)]
pub struct Iface {
    /// Its name (the sluice port name).
    pub name: String,
    /// The sluice port.
    pub port: PortId,
    /// The interface's MAC (source of everything it sends).
    pub mac: [u8; 6],
    /// IPv4 addresses with prefix lengths, first = primary.
    pub v4: Vec<(u32, u8)>,
    /// IPv6 addresses with prefix lengths (link-local last: the EUI-64
    /// one derived from the MAC is always there).
    pub v6: Vec<(u128, u8)>,
}

/// The EUI-64 link-local address of `mac` (RFC 4291 §2.5.1, RFC 4862 §5.3).
pub fn link_local(mac: [u8; 6]) -> u128 {
    let iid = [
        mac[0] ^ 2,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ];
    (0xfe80u128 << 112) | u64::from_be_bytes(iid) as u128
}

/// Whether `a` is a link-local unicast address (fe80::/10).
pub fn is_link_local(a: u128) -> bool {
    (a >> 118) == 0xfe80 >> 6
}

impl Iface {
    /// The primary IPv4 address.
    pub fn v4_addr(&self) -> Option<u32> {
        self.v4.first().map(|a| a.0)
    }

    /// The source address for packets to `dst`: link-local for link-local
    /// destinations, otherwise the first global address, else link-local
    /// (a reduced RFC 6724 source selection).
    pub fn v6_source_for(&self, dst: u128) -> Option<u128> {
        let ll = self.v6.iter().find(|a| is_link_local(a.0)).map(|a| a.0);
        if is_link_local(dst) {
            return ll;
        }
        self.v6
            .iter()
            .find(|a| !is_link_local(a.0))
            .map(|a| a.0)
            .or(ll)
    }

    /// Whether `a` is one of this interface's IPv6 addresses.
    pub fn has_v6(&self, a: u128) -> bool {
        self.v6.iter().any(|x| x.0 == a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eui64_link_local() {
        let a = link_local([0x02, 0, 0, 0, 0x01, 0x01]);
        assert_eq!(std::net::Ipv6Addr::from(a).to_string(), "fe80::ff:fe00:101");
        assert!(is_link_local(a));
        assert!(!is_link_local(0x2001_0db8u128 << 96));
    }
}
