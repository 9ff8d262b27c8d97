//! The per-packet NAT44 decision and rewrite, independent of the NF SDK
//! (the `nat` NF type in `mod.rs` is a thin wrapper around [`Nat`]).

use sluice_packet::{parse, ParseError};

use super::endpoint::Endpoint;
use super::pool::Pool;
use super::rewrite::{rd16, rd32, rewrite, rewrite_addr, rewrite_quoted, Quoted, Side};
use super::table::{Refused, TableStats, Tables, FAST_IN, FAST_OUT, NONE};

/// NF-local drop reasons, by index into the type's `drop_reasons`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum NatDrop {
    /// Outbound packet that got no mapping (pool ports exhausted, tables
    /// full) or outbound ICMP error about no known session.
    NoMapping = 0,
    /// Inbound packet no mapping admits (unsolicited, or refused by the
    /// filtering behaviour), or inbound ICMP error about no known session.
    Filtered = 1,
    /// IPv4 fragment to translate (reassembly is not supported).
    Fragment = 2,
    /// Protocol the NAT cannot translate (not TCP, UDP, ICMP echo or ICMP
    /// error), or ICMP to be hairpinned.
    Unsupported = 3,
}

/// What the NAT did with one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Outbound: source translated.
    Out,
    /// Inbound: destination translated.
    In,
    /// Inside to inside through an external address: both translated
    /// (RFC 4787 REQ-9); leaves by the ingress port.
    Hairpin,
    /// An ICMP error and its quoted packet translated (RFC 5508);
    /// `outbound` tells the direction.
    IcmpError {
        /// From inside to outside.
        outbound: bool,
    },
    /// Not NAT traffic (non-IPv4, inside to inside, outside to a
    /// non-external address): passed unchanged.
    Untranslated,
    /// Dropped by the NAT.
    Drop(NatDrop),
    /// Dropped: the frame does not parse.
    Malformed(ParseError),
}

/// Counters of the translator (cumulative).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NatStats {
    /// Outbound packets translated.
    pub translated_out: u64,
    /// Inbound packets translated.
    pub translated_in: u64,
    /// Hairpinned packets.
    pub hairpinned: u64,
    /// ICMP errors translated (both directions).
    pub icmp_errors_translated: u64,
    /// Drops for want of a mapping.
    pub no_mapping: u64,
    /// Inbound drops by filtering.
    pub filtered: u64,
    /// Packets passed unchanged.
    pub untranslated: u64,
}

/// Which packets come from inside.
pub(crate) struct Inside {
    /// Inside prefixes as (network, mask).
    pub nets: Vec<(u32, u32)>,
    /// Ingress ports that are inside (bit per port index < 256).
    pub ports: [u64; 4],
    pub by_port: bool,
}

impl Inside {
    #[inline(always)]
    fn has_addr(&self, a: u32) -> bool {
        self.nets.iter().any(|&(n, m)| a & m == n)
    }

    #[inline(always)]
    pub(super) fn has_port(&self, p: u16) -> bool {
        self.ports
            .get(usize::from(p) / 64)
            .is_some_and(|w| w >> (p % 64) & 1 != 0)
    }
}

/// The NAT44 state and translator.
pub struct Nat {
    pub(crate) inside: Inside,
    pub(crate) pool: Pool,
    pub(crate) tables: Tables,
    /// Extra external addresses of port-forwarding rules outside the pool.
    pub(crate) forward_addrs: Vec<u32>,
    pub(crate) hairpin: bool,
    /// Per platform flow id: session slot + 1 (0 = none), a hint checked
    /// against the packet's tuple before use.
    pub(super) cache: Vec<u32>,
    pub(super) stats: NatStats,
}

/// Session slots checked for expiry per batch (a full sweep of 128 k
/// sessions every ≈ 2 k batches; `tick` sweeps more, traffic or not).
/// Blocks of slots where nothing can have timed out are passed unread
/// (`expiry.rs`).
pub const SWEEP_PER_BATCH: usize = 64;

impl Nat {
    pub(crate) fn new(
        inside: Inside,
        pool: Pool,
        tables: Tables,
        forward_addrs: Vec<u32>,
        hairpin: bool,
        flow_capacity: u32,
    ) -> Nat {
        Nat {
            inside,
            pool,
            tables,
            forward_addrs,
            hairpin,
            cache: sluice_sys::vec_on_huge_pages(flow_capacity as usize, 0),
            stats: NatStats::default(),
        }
    }

    /// Cumulative translator counters.
    pub fn stats(&self) -> NatStats {
        self.stats
    }

    /// Cumulative mapping counters.
    pub fn table_stats(&self) -> TableStats {
        self.tables.stats
    }

    /// Live dynamic mappings.
    pub fn mapping_count(&self) -> usize {
        self.tables.mapping_count()
    }

    /// Live sessions.
    pub fn session_count(&self) -> usize {
        self.tables.session_count()
    }

    /// The external endpoint mapped to `internal` for traffic to `remote`
    /// (`proto` 6, 17 or 1), if a mapping exists.
    pub fn mapping_of(&self, proto: u8, internal: Endpoint, remote: Endpoint) -> Option<Endpoint> {
        self.tables.mapping_of(proto, internal, remote)
    }

    /// Expires timed-out sessions among the next `budget` slots.
    pub fn expire(&mut self, now: u64, budget: usize) -> usize {
        self.tables.expire(now, budget, &mut self.pool)
    }

    /// [`Self::expire`] reading every slot (the reference of the
    /// per-block bounds' tests).
    #[cfg(test)]
    pub(crate) fn expire_plain(&mut self, now: u64, budget: usize) -> usize {
        self.tables.expire_plain(now, budget, &mut self.pool)
    }

    /// Forgets the per-flow hint of a platform flow that ended.
    pub fn flow_end(&mut self, flow_id: u32) {
        if let Some(c) = self.cache.get_mut(flow_id as usize) {
            *c = 0;
        }
    }

    /// Back to the just-built state (port-forwarding rules kept).
    pub fn reset(&mut self) {
        self.tables.reset(&mut self.pool);
        self.cache.fill(0);
        self.stats = NatStats::default();
    }

    #[inline(always)]
    fn is_external(&self, a: u32) -> bool {
        self.pool.contains(a) || self.forward_addrs.contains(&a)
    }

    /// Translates one frame in place. `port_in` is its ingress port,
    /// `flow_id` the platform's flow id (a cache hint only), `now` the
    /// clock in ns.
    #[inline]
    pub fn translate(&mut self, f: &mut [u8], port_in: u16, flow_id: u32, now: u64) -> Action {
        if let Some(a) = self.fast(f, port_in, flow_id, now) {
            return a;
        }
        self.translate_slow(f, port_in, flow_id, now)
    }

    /// [`Self::translate`] without the per-flow-id fast path.
    #[inline(never)]
    pub(super) fn translate_slow(
        &mut self,
        f: &mut [u8],
        port_in: u16,
        flow_id: u32,
        now: u64,
    ) -> Action {
        let h = match parse(f) {
            Ok(h) => h,
            Err(e) => return Action::Malformed(e),
        };
        if h.ip_version != 4 {
            self.stats.untranslated += 1;
            return Action::Untranslated;
        }
        let (l3, l4) = (usize::from(h.l3_offset), usize::from(h.l4_offset));
        let (src, dst) = (rd32(f, l3 + 12), rd32(f, l3 + 16));
        let from_inside = if self.inside.by_port {
            self.inside.has_port(port_in)
        } else {
            self.inside.has_addr(src)
        };
        let outbound = from_inside && !self.inside.has_addr(dst);
        if !outbound && (from_inside || !self.is_external(dst)) {
            self.stats.untranslated += 1;
            return Action::Untranslated;
        }
        if h.fragment {
            return Action::Drop(NatDrop::Fragment);
        }
        let proto = h.l4_protocol.0;
        let (sp, dp, flags) = match proto {
            6 => (
                rd16(f, l4),
                rd16(f, l4 + 2),
                f.get(l4 + 13).copied().unwrap_or(0),
            ),
            17 => (rd16(f, l4), rd16(f, l4 + 2), 0),
            1 => match f.get(l4).copied().unwrap_or(255) {
                // Echo: the id is the inside/external "port"; remotes have 0.
                0 | 8 if outbound => (rd16(f, l4 + 4), 0, 0),
                0 | 8 => (0, rd16(f, l4 + 4), 0),
                3 | 4 | 5 | 11 | 12 => {
                    let end = (l3 + usize::from(rd16(f, l3 + 2))).min(f.len());
                    return self.icmp_error(f, l3, l4, end, outbound, now);
                }
                _ => return Action::Drop(NatDrop::Unsupported),
            },
            _ => return Action::Drop(NatDrop::Unsupported),
        };
        let (a, b) = (Endpoint::new(src, sp), Endpoint::new(dst, dp));
        if outbound {
            self.outbound(f, l3, l4, proto, a, b, flags, flow_id, now)
        } else {
            self.inbound(f, l3, l4, proto, a, b, flags, flow_id, now)
        }
    }

    #[inline]
    fn cached(
        &mut self,
        flow_id: u32,
        proto: u8,
        a: Endpoint,
        b: Endpoint,
        outbound: bool,
        now: u64,
    ) -> u32 {
        match self.cache.get(flow_id as usize) {
            Some(&c) if c != 0 && self.tables.check_cached(c - 1, proto, a, b, outbound, now) => {
                c - 1
            }
            _ => NONE,
        }
    }

    #[inline]
    fn remember(&mut self, flow_id: u32, s: u32) {
        if let Some(c) = self.cache.get_mut(flow_id as usize) {
            *c = s.wrapping_add(1);
        }
    }

    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn outbound(
        &mut self,
        f: &mut [u8],
        l3: usize,
        l4: usize,
        proto: u8,
        internal: Endpoint,
        remote: Endpoint,
        flags: u8,
        flow_id: u32,
        now: u64,
    ) -> Action {
        let hairpin = self.is_external(remote.addr);
        if hairpin && (proto == 1 || !self.hairpin) {
            return Action::Drop(NatDrop::Unsupported);
        }
        // The full path: packets the fast path (`fast.rs`) does not take
        // (new flows, no platform flow id, VLAN tags, IP options, ICMP).
        // ≈ 440 instructions and ≈ 320 ns/packet under load with a
        // flow-id hit at 100 k mappings (callgrind and bench
        // nat/outbound_100k, measured before the fast path existed).
        let mut s = self.cached(flow_id, proto, internal, remote, true, now);
        if s == NONE {
            s = match self
                .tables
                .outbound(proto, internal, remote, now, &mut self.pool)
            {
                Ok(s) => s,
                Err(_) => {
                    self.stats.no_mapping += 1;
                    return Action::Drop(NatDrop::NoMapping);
                }
            };
            self.remember(flow_id, s);
        }
        self.tables.touch(s, flags, true, now);
        let external = self.tables.sessions[s as usize].external;
        if !hairpin {
            // This tuple is plain outbound traffic of `s`: so is any packet
            // with the same tuple (and ingress side), until `s` goes.
            self.tables.sessions[s as usize].fast |= FAST_OUT;
            rewrite(f, l3, l4, proto, Side::Src, external);
            self.stats.translated_out += 1;
            return Action::Out;
        }
        // Hairpin: the packet re-enters as if from the external endpoint
        // just mapped (RFC 4787 REQ-9 "external source IP address and
        // port"), and the target's mapping and filtering apply.
        let s2 = match self
            .tables
            .inbound(proto, external, remote, now, &mut self.pool)
        {
            Ok(s2) => s2,
            Err(r) => return self.refused(r),
        };
        self.tables.touch(s2, flags, false, now);
        let target = self.tables.sessions[s2 as usize].internal;
        rewrite(f, l3, l4, proto, Side::Src, external);
        rewrite(f, l3, l4, proto, Side::Dst, target);
        self.stats.hairpinned += 1;
        Action::Hairpin
    }

    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn inbound(
        &mut self,
        f: &mut [u8],
        l3: usize,
        l4: usize,
        proto: u8,
        remote: Endpoint,
        external: Endpoint,
        flags: u8,
        flow_id: u32,
        now: u64,
    ) -> Action {
        let mut s = self.cached(flow_id, proto, remote, external, false, now);
        if s == NONE {
            s = match self
                .tables
                .inbound(proto, remote, external, now, &mut self.pool)
            {
                Ok(s) => s,
                Err(r) => return self.refused(r),
            };
            self.remember(flow_id, s);
        }
        self.tables.touch(s, flags, false, now);
        let x = &mut self.tables.sessions[s as usize];
        x.fast |= FAST_IN;
        let internal = x.internal;
        rewrite(f, l3, l4, proto, Side::Dst, internal);
        self.stats.translated_in += 1;
        Action::In
    }

    fn refused(&mut self, r: Refused) -> Action {
        match r {
            Refused::NoMapping => {
                self.stats.no_mapping += 1;
                Action::Drop(NatDrop::NoMapping)
            }
            Refused::Filtered => {
                self.stats.filtered += 1;
                Action::Drop(NatDrop::Filtered)
            }
        }
    }

    /// Translates an ICMP error and the packet it quotes (RFC 5508 §4):
    /// the quote is the reverse of a known session's traffic, so outbound
    /// errors get the quoted destination and the outer source mapped to
    /// the external endpoint, and inbound errors get the quoted source and
    /// the outer destination mapped back to the internal endpoint. Errors
    /// never create sessions.
    fn icmp_error(
        &mut self,
        f: &mut [u8],
        l3: usize,
        l4: usize,
        end: usize,
        outbound: bool,
        now: u64,
    ) -> Action {
        let e3 = l4 + 8;
        let ihl = usize::from(f.get(e3).copied().unwrap_or(0) & 0x0f) * 4;
        let e4 = e3 + ihl;
        if f.get(e3).copied().unwrap_or(0) >> 4 != 4 || ihl < 20 || e4 + 8 > end {
            return Action::Malformed(ParseError::Icmpv4Truncated);
        }
        // A quoted non-first fragment has no transport header.
        if rd16(f, e3 + 6) & 0x1fff != 0 {
            return Action::Drop(NatDrop::Unsupported);
        }
        let proto = f.get(e3 + 9).copied().unwrap_or(0);
        let (qs, qd) = (rd32(f, e3 + 12), rd32(f, e3 + 16));
        let (qsp, qdp) = match proto {
            6 | 17 => (rd16(f, e4), rd16(f, e4 + 2)),
            1 if matches!(f.get(e4), Some(0 | 8)) => {
                let id = rd16(f, e4 + 4);
                if outbound {
                    (0, id) // quotes an inbound packet: the id is on our side
                } else {
                    (id, 0)
                }
            }
            _ => return Action::Drop(NatDrop::Unsupported),
        };
        let q = Quoted {
            icmp: l4,
            l3: e3,
            l4: e4,
            end,
            proto,
        };
        let (qsrc, qdst) = (Endpoint::new(qs, qsp), Endpoint::new(qd, qdp));
        if outbound {
            // The quote went remote → internal.
            let Some(s) = self.tables.find_out(proto, qdst, qsrc, now, &mut self.pool) else {
                self.stats.no_mapping += 1;
                return Action::Drop(NatDrop::NoMapping);
            };
            let ext = self.tables.sessions[s as usize].external;
            rewrite_quoted(f, &q, Side::Dst, ext);
            rewrite_addr(f, l3, Side::Src, ext.addr);
        } else {
            // The quote went external → remote.
            let Some(s) = self.tables.find_in(proto, qdst, qsrc, now, &mut self.pool) else {
                self.stats.filtered += 1;
                return Action::Drop(NatDrop::Filtered);
            };
            let int = self.tables.sessions[s as usize].internal;
            rewrite_quoted(f, &q, Side::Src, int);
            rewrite_addr(f, l3, Side::Dst, int.addr);
        }
        self.stats.icmp_errors_translated += 1;
        Action::IcmpError { outbound }
    }
}
