//! Sessions and mappings: the NAT's state, pre-sized at build time.
//!
//! A **mapping** binds an internal endpoint (plus, for address- or
//! address-and-port-dependent mapping, the remote address or endpoint) to
//! an external endpoint, which it owns exclusively (RFC 4787 §4.1: under
//! ADM/APDM, different remotes get different external endpoints). A
//! **session** is one conversation (5-tuple) through a mapping; it carries
//! the timer and, for TCP, the connection phase. A dynamic mapping lives as
//! long as one of its sessions does; port-forwarding rules are static
//! mappings that never expire.
//!
//! Indices (all [`Index`], no allocation after build):
//! sessions by inside key (internal, remote) and by outside key (remote,
//! external); mappings by internal key and by external endpoint; and, for
//! address-dependent filtering, a reference count per (mapping, remote
//! address).

use super::endpoint::Endpoint;
use super::index::{hash, Index};
use super::pool::{class_of, Pool};
use super::rewrite::delta;
use crate::expiry_bounds::{self, Bounds, Expiring};

// Tables as checkpoint records and rebuilt from them (`state.rs`).
#[path = "records.rs"]
mod records;
pub(super) use records::{MappingRec, SessionRec};

/// No slot.
pub(crate) const NONE: u32 = u32::MAX;
/// Session flag: its outbound tuple (internal → remote) is plain outbound
/// traffic, which `fast.rs` may translate without the full path.
pub(crate) const FAST_OUT: u8 = 1;
/// Session flag: its inbound tuple (remote → external) is plain inbound
/// traffic.
pub(crate) const FAST_IN: u8 = 2;

/// Mapping or filtering behaviour (RFC 4787 §4.1, §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Behaviour {
    /// Any remote endpoint (EIM / EIF).
    EndpointIndependent,
    /// Per remote address (ADM / ADF).
    AddressDependent,
    /// Per remote address and port (APDM / APDF).
    AddressAndPortDependent,
}

impl Behaviour {
    /// The part of `remote` this behaviour distinguishes.
    #[inline]
    fn mask(self, remote: Endpoint) -> Endpoint {
        match self {
            Behaviour::EndpointIndependent => Endpoint::default(),
            Behaviour::AddressDependent => Endpoint::new(remote.addr, 0),
            Behaviour::AddressAndPortDependent => remote,
        }
    }
}

/// Idle timeouts, ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// UDP (RFC 4787 REQ-5: ≥ 2 min).
    pub udp: u64,
    /// TCP established (RFC 5382 REQ-5: ≥ 2 h 4 min).
    pub tcp_established: u64,
    /// TCP partially open or closing.
    pub tcp_transitory: u64,
    /// ICMP query.
    pub icmp: u64,
}

const S: u64 = 1_000_000_000;

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            udp: 300 * S,
            tcp_established: 7440 * S,
            tcp_transitory: 240 * S,
            icmp: 60 * S,
        }
    }
}

/// TCP phase bits of a session.
pub(crate) mod tcp {
    pub const SEEN_OUT: u8 = 1;
    pub const SEEN_IN: u8 = 2;
    pub const FIN_OUT: u8 = 4;
    pub const FIN_IN: u8 = 8;
    pub const RST: u8 = 16;

    /// The phase after a segment with `flags` in direction `outbound`.
    #[inline]
    pub fn update(state: u8, flags: u8, outbound: bool) -> u8 {
        let (fin, syn, rst, ack) = (
            flags & 1 != 0,
            flags & 2 != 0,
            flags & 4 != 0,
            flags & 16 != 0,
        );
        // A new SYN on a closed tuple starts a new connection.
        let mut s = if syn && !ack && state & (FIN_OUT | FIN_IN | RST) != 0 {
            0
        } else {
            state
        };
        s |= if outbound { SEEN_OUT } else { SEEN_IN };
        if fin {
            s |= if outbound { FIN_OUT } else { FIN_IN };
        }
        if rst {
            s |= RST;
        }
        s
    }

    /// Established: traffic seen both ways, not reset, not closed both ways
    /// (RFC 5382 §5; anything else is transitory).
    #[inline]
    pub fn established(s: u8) -> bool {
        s & (SEEN_OUT | SEEN_IN) == SEEN_OUT | SEEN_IN
            && s & RST == 0
            && s & (FIN_OUT | FIN_IN) != FIN_OUT | FIN_IN
    }
}

/// One conversation through a mapping. One cache line each (60 B of
/// fields), so a cache-hit packet touches exactly one line of session state:
/// the fast path (`fast.rs`) reads the tuple, refreshes the timer and
/// rewrites with the precomputed checksum deltas, all from this line.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(64))]
pub(crate) struct Session {
    pub expires: u64,
    /// The expiry last propagated to the mapping and filter entry.
    pub marked: u64,
    pub internal: Endpoint,
    pub external: Endpoint,
    pub remote: Endpoint,
    pub mapping: u32,
    pub filter: u32,
    /// RFC 1624 sums (see `rewrite::delta`) of the outbound rewrite
    /// (internal → external): IP header, then transport checksum; in
    /// wire order (`to_be`), so the fast path adds them to checksum fields
    /// as loaded, with no byte swaps (`rewrite::apply` commutes with them).
    pub delta_out: [u16; 2],
    /// The same for the inbound rewrite (external → internal).
    pub delta_in: [u16; 2],
    pub proto: u8,
    pub tcp: u8,
    pub live: bool,
    /// [`FAST_OUT`] / [`FAST_IN`]: the full path translated this
    /// session's outbound (inbound) tuple as plain outbound (inbound)
    /// traffic, so the fast path may too. Cleared when the slot is reused.
    pub fast: u8,
}

#[derive(Debug, Clone, Copy, Default)]
struct Mapping {
    internal: Endpoint,
    key_remote: Endpoint,
    external: Endpoint,
    proto: u8,
    is_static: bool,
    live: bool,
    sessions: u32,
    /// Pool address number of `external`, or NONE outside the pool.
    pool_addr: u32,
    /// Upper bound of its sessions' expiries (see [`SLACK`]).
    expires: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct AddrRef {
    mapping: u32,
    addr: u32,
    refs: u32,
    /// Upper bound of its sessions' expiries.
    expires: u64,
}

/// How far ahead a session's expiry is propagated to its mapping and
/// filter entry, so the packet path writes those at most once per second
/// per session instead of on every packet. A mapping whose sessions all
/// timed out but were not yet swept admits inbound packets for at most
/// this much longer than its last session.
const SLACK: u64 = 1_000_000_000;

/// 5-tuple key: protocol and two endpoints, in the given order.
#[inline(always)]
pub(crate) fn key(proto: u8, a: Endpoint, b: Endpoint) -> u128 {
    (u128::from(a.addr) << 96)
        | (u128::from(b.addr) << 64)
        | (u128::from(a.port) << 48)
        | (u128::from(b.port) << 32)
        | u128::from(proto)
}

/// The checksum sums of a session's outbound and inbound rewrites (see
/// [`Session::delta_out`]).
#[inline]
fn deltas(internal: Endpoint, external: Endpoint) -> ([u16; 2], [u16; 2]) {
    let (ia, ea) = (internal.addr, external.addr);
    (
        [
            delta(ia, ea, 0, 0).to_be(),
            delta(ia, ea, internal.port, external.port).to_be(),
        ],
        [
            delta(ea, ia, 0, 0).to_be(),
            delta(ea, ia, external.port, internal.port).to_be(),
        ],
    )
}

/// A fixed-capacity slab with a free list.
struct Slab<T> {
    items: Vec<T>,
    free: Vec<u32>,
}

impl<T: Default + Clone> Slab<T> {
    fn new(cap: usize) -> Self {
        Slab {
            items: sluice_sys::vec_on_huge_pages(cap, T::default()),
            free: (0..cap as u32).rev().collect(),
        }
    }
    fn alloc(&mut self) -> Option<u32> {
        self.free.pop()
    }
    /// Returns `i` to the free list (within capacity: never reallocates).
    fn release(&mut self, i: u32) {
        if self.free.len() < self.items.len() {
            self.free.push(i);
        }
    }
    fn used(&self) -> usize {
        self.items.len() - self.free.len()
    }
    fn reset(&mut self) {
        self.items.fill(T::default());
        self.free.clear();
        self.free.extend((0..self.items.len() as u32).rev());
    }
}

/// Why a session could not be found or made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Outbound: no external port, or the tables are full.
    NoMapping,
    /// Inbound: no mapping admits this remote (unsolicited).
    Filtered,
}

/// Counters kept by the tables.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableStats {
    /// Dynamic mappings created.
    pub mapping_created: u64,
    /// Dynamic mappings expired (last session timed out).
    pub mapping_expired: u64,
}

/// Sessions, mappings and their indices.
pub(crate) struct Tables {
    seed: u64,
    pub sessions: Vec<Session>,
    /// Lower bounds of the expiries per block of sessions (the sweep's
    /// skip list).
    bounds: Bounds,
    s_slab: Slab<()>,
    s_in: Index,
    s_out: Index,
    mappings: Slab<Mapping>,
    m_int: Index,
    m_ext: Index,
    filters: Slab<AddrRef>,
    f_idx: Index,
    mapping: Behaviour,
    filtering: Behaviour,
    pub timeouts: Timeouts,
    statics: usize,
    has_statics: bool,
    hand: usize,
    pub stats: TableStats,
}

impl Tables {
    /// Tables for `capacity` sessions (and as many dynamic mappings).
    pub(crate) fn new(
        capacity: usize,
        statics: usize,
        mapping: Behaviour,
        filtering: Behaviour,
        timeouts: Timeouts,
        seed: u64,
    ) -> Tables {
        let adf = filtering == Behaviour::AddressDependent;
        let fcap = if adf { capacity } else { 0 };
        Tables {
            seed,
            sessions: sluice_sys::vec_on_huge_pages(capacity, Session::default()),
            bounds: Bounds::new(capacity),
            s_slab: Slab::new(capacity),
            s_in: Index::with_capacity(capacity),
            s_out: Index::with_capacity(capacity),
            mappings: Slab::new(capacity + statics),
            m_int: Index::with_capacity(capacity + statics),
            m_ext: Index::with_capacity(capacity + statics),
            filters: Slab::new(fcap),
            f_idx: Index::with_capacity(fcap),
            mapping,
            filtering,
            timeouts,
            statics: 0,
            has_statics: false,
            hand: 0,
            stats: TableStats::default(),
        }
    }

    #[inline(always)]
    fn h(&self, k: u128) -> u64 {
        hash(k, self.seed)
    }

    /// Live sessions.
    pub(crate) fn session_count(&self) -> usize {
        self.s_slab.used()
    }

    /// Live dynamic mappings.
    pub(crate) fn mapping_count(&self) -> usize {
        self.mappings.used() - self.statics
    }

    /// Adds a port-forwarding rule (static, endpoint-independent mapping).
    /// False if an endpoint is already taken.
    pub(crate) fn add_static(
        &mut self,
        proto: u8,
        internal: Endpoint,
        external: Endpoint,
        pool: &mut Pool,
    ) -> bool {
        let none = Endpoint::default();
        let (ik, ek) = (key(proto, internal, none), key(proto, external, none));
        if self.find_mapping(ik).is_some() || self.find_ext(ek).is_some() {
            return false;
        }
        let pool_addr = pool.index_of(external.addr);
        if let Some(a) = pool_addr {
            if !pool.reserve(a, class_of(proto), external.port) {
                return false;
            }
        }
        let Some(m) = self.mappings.alloc() else {
            return false;
        };
        self.mappings.items[m as usize] = Mapping {
            internal,
            key_remote: none,
            external,
            proto,
            is_static: true,
            live: true,
            sessions: 0,
            pool_addr: pool_addr.map_or(NONE, |a| a as u32),
            expires: u64::MAX,
        };
        let (hi, he) = (self.h(ik), self.h(ek));
        self.m_int.insert(hi, m);
        self.m_ext.insert(he, m);
        self.statics += 1;
        self.has_statics = true;
        true
    }

    fn find_mapping(&self, k: u128) -> Option<u32> {
        let ms = &self.mappings.items;
        self.m_int.find(self.h(k), |m| {
            let m = &ms[m as usize];
            m.live && key(m.proto, m.internal, m.key_remote) == k
        })
    }

    fn find_ext(&self, k: u128) -> Option<u32> {
        let ms = &self.mappings.items;
        self.m_ext.find(self.h(k), |m| {
            let m = &ms[m as usize];
            m.live && key(m.proto, m.external, Endpoint::default()) == k
        })
    }

    /// The live session seen from inside as (internal → remote).
    #[inline]
    pub(crate) fn find_out(
        &mut self,
        proto: u8,
        internal: Endpoint,
        remote: Endpoint,
        now: u64,
        pool: &mut Pool,
    ) -> Option<u32> {
        let k = key(proto, internal, remote);
        let ss = &self.sessions;
        let s = self.s_in.find(self.h(k), |s| {
            let s = &ss[s as usize];
            key(s.proto, s.internal, s.remote) == k
        })?;
        self.alive(s, now, pool)
    }

    /// The live session seen from outside as (remote → external).
    #[inline]
    pub(crate) fn find_in(
        &mut self,
        proto: u8,
        remote: Endpoint,
        external: Endpoint,
        now: u64,
        pool: &mut Pool,
    ) -> Option<u32> {
        let k = key(proto, remote, external);
        let ss = &self.sessions;
        let s = self.s_out.find(self.h(k), |s| {
            let s = &ss[s as usize];
            key(s.proto, s.remote, s.external) == k
        })?;
        self.alive(s, now, pool)
    }

    /// `s` if it has not timed out; an expired one is removed on the spot,
    /// so expiry is exact whatever the sweep's pace.
    #[inline]
    fn alive(&mut self, s: u32, now: u64, pool: &mut Pool) -> Option<u32> {
        if self.sessions[s as usize].expires > now {
            Some(s)
        } else {
            self.remove_session(s, pool);
            None
        }
    }

    /// Whether the cached slot `s` is a live session with inside key
    /// (internal → remote) (`outbound`) or outside key (remote → external).
    #[inline]
    pub(crate) fn check_cached(
        &self,
        s: u32,
        proto: u8,
        a: Endpoint,
        b: Endpoint,
        outbound: bool,
        now: u64,
    ) -> bool {
        match self.sessions.get(s as usize) {
            Some(x) if x.live && x.expires > now && x.proto == proto => {
                if outbound {
                    x.internal == a && x.remote == b
                } else {
                    x.remote == a && x.external == b
                }
            }
            _ => false,
        }
    }

    /// Finds or makes the session for an outbound packet internal → remote.
    pub(crate) fn outbound(
        &mut self,
        proto: u8,
        internal: Endpoint,
        remote: Endpoint,
        now: u64,
        pool: &mut Pool,
    ) -> Result<u32, Refused> {
        if let Some(s) = self.find_out(proto, internal, remote, now, pool) {
            return Ok(s);
        }
        if self.s_slab.free.is_empty() {
            return Err(Refused::NoMapping);
        }
        let kr = self.mapping.mask(remote);
        let mut m = self.find_mapping(key(proto, internal, kr));
        if m.is_none() && self.has_statics && kr != Endpoint::default() {
            m = self
                .find_mapping(key(proto, internal, Endpoint::default()))
                .filter(|&m| self.mappings.items[m as usize].is_static);
        }
        let m = match m {
            Some(m) => m,
            None => self.new_mapping(proto, internal, kr, pool)?,
        };
        Ok(self.new_session(m, remote, now))
    }

    /// Finds or makes the session for an inbound packet remote → external,
    /// applying the filtering behaviour (RFC 4787 §5, RFC 5382 §4.3).
    pub(crate) fn inbound(
        &mut self,
        proto: u8,
        remote: Endpoint,
        external: Endpoint,
        now: u64,
        pool: &mut Pool,
    ) -> Result<u32, Refused> {
        if let Some(s) = self.find_in(proto, remote, external, now, pool) {
            return Ok(s);
        }
        let m = self
            .find_ext(key(proto, external, Endpoint::default()))
            .ok_or(Refused::Filtered)?;
        let mp = self.mappings.items[m as usize];
        let admitted = mp.is_static
            || mp.expires > now
                && match self.filtering {
                    Behaviour::EndpointIndependent => true,
                    Behaviour::AddressDependent => self
                        .find_filter(m, remote.addr)
                        .is_some_and(|f| self.filters.items[f as usize].expires > now),
                    // An admitted endpoint has a session, found above.
                    Behaviour::AddressAndPortDependent => false,
                };
        if !admitted {
            return Err(Refused::Filtered);
        }
        if self.s_slab.free.is_empty() {
            return Err(Refused::NoMapping);
        }
        Ok(self.new_session(m, remote, now))
    }

    fn new_mapping(
        &mut self,
        proto: u8,
        internal: Endpoint,
        key_remote: Endpoint,
        pool: &mut Pool,
    ) -> Result<u32, Refused> {
        let (pa, ext_addr) = pool.paired(internal.addr);
        let class = class_of(proto);
        let m = self.mappings.alloc().ok_or(Refused::NoMapping)?;
        let Some(port) = pool.alloc(pa, class, internal.port) else {
            self.mappings.release(m);
            return Err(Refused::NoMapping);
        };
        let external = Endpoint::new(ext_addr, port);
        self.mappings.items[m as usize] = Mapping {
            internal,
            key_remote,
            external,
            proto,
            is_static: false,
            live: true,
            sessions: 0,
            pool_addr: pa as u32,
            expires: 0,
        };
        let hi = self.h(key(proto, internal, key_remote));
        let he = self.h(key(proto, external, Endpoint::default()));
        self.m_int.insert(hi, m);
        self.m_ext.insert(he, m);
        self.stats.mapping_created += 1;
        Ok(m)
    }

    fn find_filter(&self, m: u32, addr: u32) -> Option<u32> {
        let fs = &self.filters.items;
        let k = (u128::from(m) << 32) | u128::from(addr);
        self.f_idx.find(self.h(k), |f| {
            let f = &fs[f as usize];
            f.refs > 0 && f.mapping == m && f.addr == addr
        })
    }

    fn new_session(&mut self, m: u32, remote: Endpoint, now: u64) -> u32 {
        let Some(s) = self.s_slab.alloc() else {
            return NONE; // callers checked for room
        };
        let mp = &mut self.mappings.items[m as usize];
        mp.sessions += 1;
        let (proto, internal, external) = (mp.proto, mp.internal, mp.external);
        let mut filter = NONE;
        if self.filtering == Behaviour::AddressDependent {
            filter = match self.find_filter(m, remote.addr) {
                Some(f) => f,
                None => match self.filters.alloc() {
                    Some(f) => {
                        self.filters.items[f as usize] = AddrRef {
                            mapping: m,
                            addr: remote.addr,
                            refs: 0,
                            expires: 0,
                        };
                        let k = (u128::from(m) << 32) | u128::from(remote.addr);
                        let h = self.h(k);
                        self.f_idx.insert(h, f);
                        f
                    }
                    None => NONE,
                },
            };
            if let Some(f) = self.filters.items.get_mut(filter as usize) {
                f.refs += 1;
            }
        }
        let (delta_out, delta_in) = deltas(internal, external);
        self.sessions[s as usize] = Session {
            internal,
            external,
            remote,
            proto,
            tcp: 0,
            live: true,
            fast: 0,
            mapping: m,
            filter,
            expires: now.saturating_add(self.timeout(proto, 0)),
            marked: 0,
            delta_out,
            delta_in,
        };
        self.bounds.lower(s, self.sessions[s as usize].expires);
        self.propagate(s);
        let hi = self.h(key(proto, internal, remote));
        let ho = self.h(key(proto, remote, external));
        self.s_in.insert(hi, s);
        self.s_out.insert(ho, s);
        s
    }

    #[inline]
    fn timeout(&self, proto: u8, tcp_state: u8) -> u64 {
        match proto {
            6 if tcp::established(tcp_state) => self.timeouts.tcp_established,
            6 => self.timeouts.tcp_transitory,
            17 => self.timeouts.udp,
            _ => self.timeouts.icmp,
        }
    }

    /// Refreshes session `s` for a packet (both directions refresh: RFC
    /// 4787 REQ-6 allows inbound refresh, RFC 5382 tracks both).
    #[inline(always)]
    pub(crate) fn touch(&mut self, s: u32, tcp_flags: u8, outbound: bool, now: u64) {
        let Some(x) = self.sessions.get_mut(s as usize) else {
            return;
        };
        let t = if x.proto == 6 {
            x.tcp = tcp::update(x.tcp, tcp_flags, outbound);
            if tcp::established(x.tcp) {
                self.timeouts.tcp_established
            } else {
                self.timeouts.tcp_transitory
            }
        } else if x.proto == 17 {
            self.timeouts.udp
        } else {
            self.timeouts.icmp
        };
        let e = now.saturating_add(t);
        if e < x.expires {
            // Earlier than before (TCP leaving the established phase):
            // the sweep must not skip it. A later expiry, the common case,
            // keeps the bound valid without touching it.
            self.bounds.lower(s, e);
        }
        x.expires = e;
        if x.expires > x.marked {
            self.propagate(s);
        }
    }

    /// Raises the expiry bound of session `s`'s mapping and filter entry
    /// to cover it (plus [`SLACK`]).
    #[cold]
    fn propagate(&mut self, s: u32) {
        let Some(x) = self.sessions.get_mut(s as usize) else {
            return;
        };
        x.marked = x.expires.saturating_add(SLACK);
        let (bound, m, f) = (x.marked, x.mapping, x.filter);
        if let Some(mp) = self.mappings.items.get_mut(m as usize) {
            if !mp.is_static {
                mp.expires = mp.expires.max(bound);
            }
        }
        if let Some(fe) = self.filters.items.get_mut(f as usize) {
            fe.expires = fe.expires.max(bound);
        }
    }

    /// Removes session `s`, and its mapping when that was the last session.
    pub(crate) fn remove_session(&mut self, s: u32, pool: &mut Pool) {
        let Some(x) = self.sessions.get(s as usize).copied().filter(|x| x.live) else {
            return;
        };
        self.sessions[s as usize].live = false;
        let hi = self.h(key(x.proto, x.internal, x.remote));
        let ho = self.h(key(x.proto, x.remote, x.external));
        self.s_in.remove(hi, s);
        self.s_out.remove(ho, s);
        self.s_slab.release(s);
        if let Some(f) = self.filters.items.get_mut(x.filter as usize) {
            f.refs = f.refs.saturating_sub(1);
            if f.refs == 0 {
                let k = (u128::from(f.mapping) << 32) | u128::from(f.addr);
                let h = self.h(k);
                self.f_idx.remove(h, x.filter);
                self.filters.release(x.filter);
            }
        }
        let m = x.mapping;
        let Some(mp) = self.mappings.items.get_mut(m as usize) else {
            return;
        };
        mp.sessions = mp.sessions.saturating_sub(1);
        if mp.sessions == 0 && !mp.is_static && mp.live {
            mp.live = false;
            let mp = *mp;
            let hi = self.h(key(mp.proto, mp.internal, mp.key_remote));
            let he = self.h(key(mp.proto, mp.external, Endpoint::default()));
            self.m_int.remove(hi, m);
            self.m_ext.remove(he, m);
            self.mappings.release(m);
            if mp.pool_addr != NONE {
                pool.free(mp.pool_addr as usize, class_of(mp.proto), mp.external.port);
            }
            self.stats.mapping_expired += 1;
        }
    }

    /// Expires timed-out sessions among the next `budget` slots (a clock
    /// hand over the table); returns how many were removed. Blocks whose
    /// bound says nothing there can have timed out are passed without
    /// reading them (see `expiry.rs`): the same removals, in the same
    /// order, as reading every slot.
    pub(crate) fn expire(&mut self, now: u64, budget: usize, pool: &mut Pool) -> usize {
        let first = self.hand;
        let (removed, next) =
            expiry_bounds::sweep(&mut Sweep { tables: self, pool }, first, budget, now);
        self.hand = next;
        removed
    }

    /// [`Self::expire`] reading every slot: the reference the bounds must
    /// not change.
    #[cfg(test)]
    pub(crate) fn expire_plain(&mut self, now: u64, budget: usize, pool: &mut Pool) -> usize {
        let n = self.sessions.len();
        if n == 0 {
            return 0;
        }
        let mut removed = 0;
        let mut left = budget.min(n);
        let mut i = self.hand;
        while left > 0 {
            let end = (i + left).min(n);
            let found = self
                .sessions
                .get(i..end)
                .and_then(|run| run.iter().position(|x| x.live && x.expires <= now));
            let next = match found {
                Some(k) => {
                    self.remove_session((i + k) as u32, pool);
                    removed += 1;
                    i + k + 1
                }
                None => end,
            };
            left -= next - i;
            i = if next == n { 0 } else { next };
        }
        self.hand = i;
        removed
    }

    /// The sweep's bound of block `b` (tests).
    #[cfg(test)]
    pub(crate) fn bound(&self, b: usize) -> u64 {
        self.bounds.bound(b)
    }

    /// The external endpoint of the mapping for `internal` (EIM key), if
    /// any: for tests and tools.
    pub(crate) fn mapping_of(
        &self,
        proto: u8,
        internal: Endpoint,
        remote: Endpoint,
    ) -> Option<Endpoint> {
        let kr = self.mapping.mask(remote);
        self.find_mapping(key(proto, internal, kr))
            .or_else(|| self.find_mapping(key(proto, internal, Endpoint::default())))
            .map(|m| self.mappings.items[m as usize].external)
    }

    /// Back to the just-built state, static mappings kept.
    pub(crate) fn reset(&mut self, pool: &mut Pool) {
        for s in 0..self.sessions.len() as u32 {
            self.remove_session(s, pool);
        }
        self.s_slab.reset();
        self.s_in.clear();
        self.s_out.clear();
        self.filters.reset();
        self.f_idx.clear();
        self.bounds.reset();
        self.hand = 0;
        self.stats = TableStats::default();
    }
}

/// The session table with the port pool its removals return ports to, as
/// the expiry sweep sees it.
struct Sweep<'a> {
    tables: &'a mut Tables,
    pool: &'a mut Pool,
}

impl Expiring for Sweep<'_> {
    fn slots(&self) -> usize {
        self.tables.sessions.len()
    }

    fn bounds(&mut self) -> &mut Bounds {
        &mut self.tables.bounds
    }

    #[inline]
    fn first_expired(&self, i: usize, end: usize, now: u64) -> (Option<usize>, u64) {
        let run = self.tables.sessions.get(i..end).unwrap_or_default();
        expiry_bounds::first_expired(run, now, |x| x.live.then_some(x.expires))
    }

    fn remove(&mut self, i: usize) {
        self.tables.remove_session(i as u32, self.pool);
    }
}
