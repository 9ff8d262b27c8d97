//! The routing table: both LPM structures and the next-hop groups their
//! values point to. Identical next-hop sets are stored once, so a million
//! routes through a few gateways share a few groups (and cache lines).

use std::collections::HashMap;
use std::net::IpAddr;

use super::lpm_v4::LpmV4;
use super::lpm_v6::LpmV6;
use super::routes_file::RouteSpec;
use sluice_spec::IpNet;

/// One resolved next hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NextHop {
    /// Index of the output interface in the router's interface list.
    pub iface: u16,
    /// The gateway (IPv4 as an IPv4-mapped address); `None` for a
    /// connected route, whose neighbour is the destination itself.
    pub gateway: Option<u128>,
}

#[derive(Clone, Copy)]
struct Group {
    start: u32,
    len: u32,
}

/// Routes for both families.
pub struct RouteTable {
    v4: LpmV4,
    v6: LpmV6,
    groups: Vec<Group>,
    hops: Vec<NextHop>,
    routes: u64,
}

/// Encodes an address as the 128-bit key used for gateways and neighbours.
pub fn key_of(a: IpAddr) -> u128 {
    match a {
        IpAddr::V4(a) => super::neighbour::v4_key(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

impl RouteTable {
    /// Builds the table. `iface_of` maps a `dev` name to an interface
    /// index; the error names the route (by index in `routes`) whose `dev`
    /// is unknown. A later route for the same prefix replaces an earlier
    /// one (`ip route replace`).
    pub fn build(
        routes: &[RouteSpec],
        iface_of: impl Fn(&str) -> Option<u16>,
    ) -> Result<RouteTable, (usize, String)> {
        let mut interned: HashMap<Vec<NextHop>, u32> = HashMap::new();
        let mut groups = Vec::new();
        let mut hops = Vec::new();
        let mut v4 = Vec::new();
        let mut v6 = Vec::new();
        for (i, r) in routes.iter().enumerate() {
            let mut set = Vec::with_capacity(r.nexthops.len());
            for n in &r.nexthops {
                let iface = iface_of(&n.dev).ok_or_else(|| {
                    (
                        i,
                        format!(
                            "route {}: `dev {}` is not one of the router's interfaces",
                            r.prefix, n.dev
                        ),
                    )
                })?;
                set.push(NextHop {
                    iface,
                    gateway: n.via.map(key_of),
                });
            }
            let next = groups.len() as u32;
            let g = *interned.entry(set).or_insert_with_key(|set| {
                groups.push(Group {
                    start: hops.len() as u32,
                    len: set.len() as u32,
                });
                hops.extend_from_slice(set);
                next
            });
            let value = g + 1;
            match r.prefix {
                IpNet::V4(n) => v4.push((u32::from(n.network()), n.prefix_len(), value)),
                IpNet::V6(n) => v6.push((u128::from(n.network()), n.prefix_len(), value)),
            }
        }
        let routes_n = (v4.len() + v6.len()) as u64;
        Ok(RouteTable {
            v4: LpmV4::build(&v4),
            v6: LpmV6::build(&v6),
            groups,
            hops,
            routes: routes_n,
        })
    }

    /// Number of routes (both families, duplicates included).
    pub fn routes(&self) -> u64 {
        self.routes
    }

    #[inline]
    fn pick(&self, value: u32, hash: u32) -> Option<&NextHop> {
        let g = self.groups.get(value.checked_sub(1)? as usize)?;
        // ECMP: hash-threshold by multiply-shift (RFC 2992 spirit: a
        // flow stays on one next hop while the set is unchanged).
        let k = ((hash as u64 * g.len as u64) >> 32) as u32;
        self.hops.get((g.start + k) as usize)
    }

    /// The LPM values (0: no route) of many IPv6 destinations at once,
    /// their walks advancing together (see [`LpmV6::lookup_batch`]).
    pub fn v6_values(&self, dsts: &[u128], out: &mut [u32]) {
        self.v6.lookup_batch(dsts, out);
    }

    /// The LPM value (0: no route) of IPv4 `dst`.
    #[inline]
    pub fn v4_value(&self, dst: u32) -> u32 {
        self.v4.lookup(dst)
    }

    /// The next hop for an LPM value from [`Self::v6_values`] or
    /// [`Self::v4_value`].
    #[inline]
    pub fn pick_value(&self, value: u32, hash: u32) -> Option<&NextHop> {
        self.pick(value, hash)
    }

    /// The next hop for IPv4 `dst`; `hash` picks among ECMP next hops.
    #[inline]
    pub fn lookup_v4(&self, dst: u32, hash: u32) -> Option<&NextHop> {
        self.pick(self.v4.lookup(dst), hash)
    }

    /// The next hop for IPv6 `dst`; `hash` picks among ECMP next hops.
    #[inline]
    pub fn lookup_v6(&self, dst: u128, hash: u32) -> Option<&NextHop> {
        self.pick(self.v6.lookup(dst), hash)
    }

    /// The next hop for `dst` (either family).
    pub fn lookup(&self, dst: IpAddr, hash: u32) -> Option<&NextHop> {
        match dst {
            IpAddr::V4(a) => self.lookup_v4(u32::from(a), hash),
            IpAddr::V6(a) => self.lookup_v6(u128::from(a), hash),
        }
    }

    /// Every next hop of the route `dst` matches (ECMP set, in order).
    pub fn nexthops(&self, dst: IpAddr) -> &[NextHop] {
        let v = match dst {
            IpAddr::V4(a) => self.v4.lookup(u32::from(a)),
            IpAddr::V6(a) => self.v6.lookup(u128::from(a)),
        };
        match v.checked_sub(1).and_then(|g| self.groups.get(g as usize)) {
            Some(g) => &self.hops[g.start as usize..(g.start + g.len) as usize],
            None => &[],
        }
    }

    /// Distinct next-hop groups.
    pub fn groups(&self) -> usize {
        self.groups.len()
    }
}
