//! Connection tracking, reusable by any NF: a pre-sized table of tracked
//! connections keyed by (zone, canonical 5-tuple), the Linux
//! `nf_conntrack` TCP state machine and per-state timeouts, UDP and ICMP
//! echo pseudo-connections, and ICMP errors matched to the connection of
//! the datagram they quote (RELATED).
//!
//! Use: [`Conntrack::classify`] each packet. A packet of a known
//! connection updates it and comes back [`Classified::Tracked`]; a packet
//! that may open one comes back [`Classified::New`] and is only tracked if
//! the caller decides to accept it and calls [`Conntrack::commit`] (like
//! Linux, which confirms a connection only when its first packet leaves
//! the hooks). Expiry is lazy (an expired entry is gone when next looked
//! up) plus an incremental [`Conntrack::sweep`] from the NF's batch or
//! tick.
//!
//! Lookups go first through a per-`flow_id` cache of entry indices,
//! validated by comparing the key, which skips hashing for packets whose
//! platform flow id already points at their connection.
//!
//! [`Conntrack::classify_cached`] is the established fast path in front
//! of `classify`: for a TCP ACK-class segment or a UDP datagram whose flow
//! id's cached entry is live, unexpired, in the packet's zone and holds
//! the packet's tuple (compared with the header bytes directly), it
//! applies the packet with the same state machine and timeouts, without
//! building a [`FlowKey`] or [`CtPacket`]. Anything else falls back.
//! [`Conntrack::classify_frame`] does the same straight from the frame's
//! bytes, with no header parse, for frames of the common shape (untagged
//! Ethernet, IPv4 without options or IPv6 without extension headers,
//! lengths valid); the caller parses the rest.

mod csum;
mod fast;
mod packet;
mod state;
mod table;
pub mod tcp;
mod tcp_packet;
pub mod tcp_window;
mod timeouts;
mod update;

pub use packet::{CtPacket, L4};
pub use state::Restored;
pub use table::{Entry, Table, ASSURED, LIVE, ORIG_IS_SRC, SEEN_REPLY};
pub use tcp::TcpState;
pub use tcp_window::{Seg, TcpTrack};
pub use timeouts::Timeouts;

use fast::RawTuple;
pub(crate) use fast::V4Tuple;
use sluice_packet::{FlowKey, Headers};
use update::advance;
pub(crate) use update::Clock;

/// Why a packet is INVALID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invalid {
    /// A TCP flag combination Linux rejects (no flags, SYN|FIN, …).
    TcpFlags,
    /// A TCP packet that cannot open a connection (not a SYN, or not a SYN
    /// or ACK with `tcp_loose`).
    TcpNotOpening,
    /// A TCP packet the connection's state does not allow.
    TcpState,
    /// A TCP segment outside the sequence window (`tcp_in_window`).
    TcpWindow,
    /// A bad IPv4 header, TCP, UDP, ICMP or ICMPv6 checksum
    /// (`nf_conntrack_checksum`).
    Checksum,
    /// An echo reply without a request.
    UnsolicitedReply,
    /// An ICMP error quoting no tracked connection (or an unusable quote).
    UnrelatedError,
}

/// A connection a packet would open, to [`Conntrack::commit`] if accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewConn {
    key: FlowKey,
    zone: u16,
    hash: u32,
    proto_state: u8,
    timeout: u64,
    /// The opening TCP segment (default for other protocols): the
    /// connection's window state is built from it at commit.
    seg: Seg,
}

/// What a packet is to connection tracking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Classified {
    /// A packet of tracked connection `entry` (state updated).
    Tracked {
        /// Entry index.
        entry: u32,
        /// True if it travels in the reply direction.
        reply: bool,
    },
    /// An ICMP error about tracked connection `entry`.
    Related {
        /// Entry index.
        entry: u32,
    },
    /// The first packet of a connection.
    New(NewConn),
    /// A packet conntrack does not track (ICMP other than echo and errors).
    Untracked,
    /// An invalid packet.
    Invalid(Invalid),
}

/// The table full: a new connection could not be tracked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableFull;

/// Connection-tracking settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// Maximum tracked connections.
    pub capacity: usize,
    /// Idle timeouts.
    pub timeouts: Timeouts,
    /// Pick up TCP connections from a mid-stream ACK
    /// (`nf_conntrack_tcp_loose`, default true).
    pub tcp_loose: bool,
    /// Let TCP segments outside the window pass
    /// (`nf_conntrack_tcp_be_liberal`, default false).
    pub liberal: bool,
    /// Verify IPv4 header and TCP/UDP/ICMP/ICMPv6 checksums and make a
    /// packet with a bad one INVALID (`nf_conntrack_checksum`, default
    /// true).
    pub checksum: bool,
}

/// A connection tracker.
pub struct Conntrack {
    table: Table,
    timeouts: Timeouts,
    tcp_loose: bool,
    liberal: bool,
    checksum: bool,
    /// TCP window state per entry, by entry index: a second cache line
    /// a TCP packet touches (the entry has no room for 60 more bytes).
    tcp: sluice_sys::ZeroedTable<TcpTrack>,
    /// Per platform flow id: entry index + 1 (0: none).
    flow_cache: sluice_sys::ZeroedTable<u32>,
}

impl Conntrack {
    /// Takes the policy of `other` (timeouts, `tcp_loose`, `liberal`,
    /// `checksum`) keeping every tracked connection, as changing Linux's
    /// conntrack sysctls does: a new timeout applies from each entry's next
    /// packet on. `None` (nothing changed) when the capacities differ: the
    /// table is sized at build and its entries cannot move.
    pub fn adopt_policy(&mut self, other: &Conntrack) -> Option<()> {
        if other.table.capacity() != self.table.capacity()
            || other.flow_cache.len() != self.flow_cache.len()
        {
            return None;
        }
        self.timeouts = other.timeouts;
        self.tcp_loose = other.tcp_loose;
        self.liberal = other.liberal;
        self.checksum = other.checksum;
        Some(())
    }

    /// A tracker with `settings`, and a flow-id cache for flow ids below
    /// `flow_capacity`.
    pub fn new(settings: Settings, flow_capacity: u32) -> Conntrack {
        Conntrack {
            table: Table::new(settings.capacity, 0x5eed_c0de_f00d_cafe),
            timeouts: settings.timeouts,
            tcp_loose: settings.tcp_loose,
            liberal: settings.liberal,
            checksum: settings.checksum,
            // Zeroed, not written (see `Table::new`).
            tcp: sluice_sys::ZeroedTable::new(settings.capacity.clamp(1, 1 << 30)),
            flow_cache: sluice_sys::ZeroedTable::new(flow_capacity as usize),
        }
    }

    /// The table (entries, length, capacity).
    pub fn table(&self) -> &Table {
        &self.table
    }

    /// The live, unexpired entry of `(zone, key)` (either direction).
    pub fn lookup(&self, zone: u16, key: &FlowKey, now_ns: u64) -> Option<&Entry> {
        let canon = key.canonical();
        let i = self
            .table
            .find(zone, &canon, self.table.hash(zone, &canon))?;
        self.table.get(i).filter(|e| e.expires_ns > now_ns)
    }

    /// Finds the live entry of `(zone, canon)`, through the flow-id cache
    /// when it holds it; removes it instead if it has expired.
    #[inline]
    fn find(&mut self, zone: u16, canon: &FlowKey, flow_id: u32, now_ns: u64) -> Result<u32, u32> {
        let slot = self.flow_cache.get(flow_id as usize).copied().unwrap_or(0);
        let cached = slot.checked_sub(1).filter(|&i| {
            self.table
                .get(i)
                .is_some_and(|e| e.is_live() && e.zone == zone && e.key == *canon)
        });
        let hash;
        let idx = match cached {
            Some(i) => {
                // No hash, no probe: ≈ 95 instructions and a dependent
                // miss fewer than the hashed path (bench: firewall/hit_cached
                // vs hit_hashed).
                hash = 0;
                Some(i)
            }
            None => {
                hash = self.table.hash(zone, canon);
                self.table.find(zone, canon, hash)
            }
        };
        match idx {
            Some(i) if self.table.get(i).is_some_and(|e| e.expires_ns > now_ns) => {
                if let Some(c) = self.flow_cache.get_mut(flow_id as usize) {
                    *c = i + 1;
                }
                Ok(i)
            }
            Some(i) => {
                self.table.remove(i);
                Err(self.table.hash(zone, canon))
            }
            None => Err(hash),
        }
    }

    /// The established fast path: classifies a packet of the connection
    /// the flow-id cache holds for `flow_id` straight from frame `frame`
    /// parsed as `h`, updating it exactly as [`Conntrack::classify`] would
    /// ([`Classified::Tracked`], or [`Classified::Invalid`] for a segment
    /// the TCP state forbids). `None`, with nothing changed, when the
    /// packet must take `classify` instead: no cached entry, not a TCP
    /// ACK-class segment (SYN, FIN and RST always go the full way) or a
    /// UDP datagram, a fragment, a tuple or zone other than the entry's,
    /// or an expired entry (which `classify` removes).
    #[inline]
    pub fn classify_cached(
        &mut self,
        frame: &[u8],
        h: &Headers,
        zone: u16,
        flow_id: u32,
        now_ns: u64,
    ) -> Option<Classified> {
        // Now the way for packets `classify_frame` leaves (VLAN tags, IP
        // options, extension headers). With the firewall's decide around
        // it: ≈ 164 instructions per hit against 412 through CtPacket +
        // classify, parse not included; 34 ns/packet on-CPU at 1 k
        // connections with parse, 142–186 ns at 100 k under load, mostly the
        // entry's miss (callgrind / FIREWALL_CPU_NS; bench:
        // firewall/hit_cached_warm when it still took this way).
        let i = self.flow_cache.get(flow_id as usize)?.checked_sub(1)?;
        let raw = RawTuple::read(frame, h)?;
        let clock = self.clock(now_ns);
        self.apply_cached(i, &raw, zone, clock)
    }

    /// [`Conntrack::classify_cached`] straight from the frame's bytes,
    /// without a header parse: the same answer and the same update for a
    /// frame of the common shape (untagged Ethernet, IPv4 without options
    /// or IPv6 without extension headers, TCP ACK-class or UDP, not a
    /// fragment, lengths valid; see `RawTuple::read_frame`), `None` for
    /// anything else, which the caller parses and decides as before (with
    /// `classify_cached` first, for the VLAN-tagged and option-carrying
    /// packets of tracked connections). `csum_trusted`: the packet's
    /// checksums are not verified (see `sluice_nf::Packet::csum_trusted`).
    #[inline]
    pub fn classify_frame(
        &mut self,
        frame: &[u8],
        zone: u16,
        flow_id: u32,
        now_ns: u64,
        csum_trusted: bool,
    ) -> Option<Classified> {
        // ≈ 163 instructions per hit with the firewall's decide_frame
        // around it, where parse + decide took ≈ 239 (callgrind, 20 k
        // connections; bench: firewall/hit_cached_warm).
        let i = self.flow_cache.get(flow_id as usize)?.checked_sub(1)?;
        let raw = RawTuple::read_frame(frame)?;
        if self.checksum && !csum_trusted && !csum::frame_ok(frame) {
            return Some(Classified::Invalid(Invalid::Checksum));
        }
        let clock = self.clock(now_ns);
        self.apply_cached(i, &raw, zone, clock)
    }

    /// Reads into `t` the IPv4 tuple [`Conntrack::classify_frame`] would
    /// read from `frame`, packed to be applied later with
    /// [`Conntrack::classify_v4`]; none for frames it would not take, for
    /// IPv6 ones and, with checksums verified, for a bad checksum
    /// (`classify_frame` then finds it INVALID).
    #[inline(always)]
    pub(crate) fn peek_v4(&self, frame: &[u8], t: &mut V4Tuple, csum_trusted: bool) {
        t.read_into(frame, self.checksum && !csum_trusted);
    }

    /// Whether checksums are verified (`Settings::checksum`).
    #[inline(always)]
    pub fn verifies_checksums(&self) -> bool {
        self.checksum
    }

    /// The time `now_ns` for [`Conntrack::classify_v4`], computed once
    /// for a batch.
    #[inline(always)]
    pub(crate) fn clock(&self, now_ns: u64) -> Clock {
        Clock::new(now_ns, &self.timeouts)
    }

    /// The entry the flow-id cache holds for `flow_id`, as the fast path
    /// looks it up: its index, or `u32::MAX` (beyond any table: the table
    /// holds at most 2^30 entries) for none. Valid until the flow-id cache
    /// changes, which only the full path ([`Conntrack::classify`],
    /// [`Conntrack::commit`]), [`Conntrack::flow_end`] and
    /// [`Conntrack::clear`] do; the fast path never does.
    #[inline(always)]
    pub(crate) fn cached_entry(&self, flow_id: u32) -> u32 {
        let slot = self.flow_cache.get(flow_id as usize).copied();
        slot.unwrap_or(0).wrapping_sub(1)
    }

    /// Prefetches `flow_id`'s flow-id cache slot, which
    /// [`Conntrack::cached_entry`] will read.
    #[inline(always)]
    pub(crate) fn prefetch_slot(&self, flow_id: u32) {
        if let Some(slot) = self.flow_cache.get(flow_id as usize) {
            sluice_sys::prefetch(slot);
        }
    }

    /// Prefetches entry `i` (a [`Conntrack::cached_entry`]; nothing for
    /// none).
    #[inline(always)]
    pub(crate) fn prefetch_entry(&self, i: u32) {
        if let Some(e) = self.table.get(i) {
            sluice_sys::prefetch(e);
        }
        // The TCP window line the same packet will touch (a wasted
        // prefetch for UDP): without it, a second miss per packet that the
        // batch does not overlap (bench: firewall/process_100k).
        if let Some(t) = self.tcp.get(i as usize) {
            sluice_sys::prefetch(t);
        }
    }

    /// [`Conntrack::classify_frame`] for the tuple [`Conntrack::peek_v4`]
    /// read from the frame (unchanged since), with its flow id's cached
    /// entry `entry` ([`Conntrack::cached_entry`], read since the
    /// flow-id cache last changed) and the batch's `clock`: the same
    /// answer and update. `Firewall::process` reads a batch's tuples in
    /// the pass that gathers its flow ids, their cached entries in the
    /// pass that prefetches those, and applies them in a later pass that
    /// does not go through the batch's packets again.
    ///
    /// A TCP segment of an ESTABLISHED connection goes straight to the
    /// ACK step; a UDP datagram to `advance`; anything else (and what
    /// the ACK step leaves) to `apply_cached` out of line, which checks
    /// the entry again and decides as `classify_frame` does. ≈ N
    /// instructions per packet fewer than all through `apply_cached`
    /// inline (bench: firewall/process_100k).
    #[inline(always)]
    pub(crate) fn classify_v4(
        &mut self,
        t: &V4Tuple,
        zone: u16,
        entry: u32,
        clock: Clock,
    ) -> Option<Classified> {
        let Some(seg) = t.tcp_seg() else {
            return self.apply_cached(entry, &t.unpack(), zone, clock);
        };
        let Conntrack {
            table,
            tcp,
            liberal,
            ..
        } = self;
        let e = table.get_mut(entry)?;
        if !e.is_live() || e.zone != zone || e.expires_ns <= clock.now_ns() {
            return None;
        }
        let reply = match t.unpack().direction(&e.key)? {
            true => e.flags & ORIG_IS_SRC == 0,
            false => e.flags & ORIG_IS_SRC != 0,
        };
        if e.proto_state == TcpState::Established as u8 {
            let before = e.expires_ns;
            let tr = tcp.get_mut(entry as usize)?;
            if update::ack_step(e, tr, reply, &seg, *liberal, &clock) {
                table.expiry_changed(entry, before);
                return Some(Classified::Tracked { entry, reply });
            }
        }
        self.classify_v4_cold(t, zone, entry, clock)
    }

    /// [`Conntrack::apply_cached`] for `t`, out of line: the fast path's
    /// rare cases.
    #[inline(never)]
    fn classify_v4_cold(
        &mut self,
        t: &V4Tuple,
        zone: u16,
        entry: u32,
        clock: Clock,
    ) -> Option<Classified> {
        self.apply_cached(entry, &t.unpack(), zone, clock)
    }

    /// The fast path proper: applies a packet read as `raw` to cached
    /// entry `i` if it is live, unexpired, in `zone` and holds the
    /// packet's tuple.
    #[inline(always)]
    fn apply_cached(
        &mut self,
        i: u32,
        raw: &RawTuple<'_>,
        zone: u16,
        clock: Clock,
    ) -> Option<Classified> {
        let Conntrack {
            table,
            timeouts,
            tcp,
            liberal,
            ..
        } = self;
        let e = table.get_mut(i)?;
        if !e.is_live() || e.zone != zone || e.expires_ns <= clock.now_ns() {
            return None;
        }
        // In the key's direction, a reply if the originator is the key's
        // destination; reversed, if it is the key's source.
        let reply = match raw.direction(&e.key)? {
            true => e.flags & ORIG_IS_SRC == 0,
            false => e.flags & ORIG_IS_SRC != 0,
        };
        let before = e.expires_ns;
        let t = tcp.get_mut(i as usize)?;
        let r = advance(e, t, timeouts, *liberal, i, reply, raw.l4, &clock);
        table.expiry_changed(i, before);
        r
    }

    /// Classifies `p` (platform flow id `flow_id`, time `now_ns`) and
    /// updates the connection it belongs to.
    pub fn classify(&mut self, p: &CtPacket, flow_id: u32, now_ns: u64) -> Classified {
        match p.l4 {
            L4::IcmpOther => return Classified::Untracked,
            L4::IcmpError { inner } => {
                return match inner.and_then(|k| {
                    let canon = k.canonical();
                    let h = self.table.hash(p.zone, &canon);
                    let i = self.table.find(p.zone, &canon, h)?;
                    self.table
                        .get(i)
                        .filter(|e| e.expires_ns > now_ns)
                        .map(|_| i)
                }) {
                    Some(entry) => Classified::Related { entry },
                    None => Classified::Invalid(Invalid::UnrelatedError),
                };
            }
            _ => {}
        }
        let canon = p.key.canonical();
        let hash = match self.find(p.zone, &canon, flow_id, now_ns) {
            Ok(i) => match self.update(i, p, now_ns) {
                Some(c) => return c,
                // A SYN reopening a closed connection: forget the old one,
                // the packet is NEW again (Linux kills and re-creates it).
                None => {
                    self.table.remove(i);
                    self.table.hash(p.zone, &canon)
                }
            },
            Err(h) => h,
        };
        let (proto_state, timeout) = match p.l4 {
            L4::Tcp { flags, seg } => {
                if !tcp::flags_valid(flags) {
                    return Classified::Invalid(Invalid::TcpFlags);
                }
                if tcp::opening_state(flags, self.tcp_loose).is_none() {
                    return Classified::Invalid(Invalid::TcpNotOpening);
                }
                // Linux runs the first segment through the tracker too.
                match self.open_tcp(&seg).1 {
                    tcp_packet::Outcome::Accept {
                        state,
                        timeout: Some(t),
                        ..
                    } => (state as u8, t),
                    _ => return Classified::Invalid(Invalid::TcpWindow),
                }
            }
            L4::Udp => (0, self.timeouts.udp),
            L4::IcmpEcho { request: true } => (0, self.timeouts.icmp),
            L4::IcmpEcho { request: false } => {
                return Classified::Invalid(Invalid::UnsolicitedReply)
            }
            _ => (0, self.timeouts.generic),
        };
        Classified::New(NewConn {
            key: p.key,
            zone: p.zone,
            hash,
            proto_state,
            timeout,
            seg: match p.l4 {
                L4::Tcp { seg, .. } => seg,
                _ => Seg::default(),
            },
        })
    }

    /// The window state a TCP connection opened by `seg` starts with, and
    /// what its first segment does (Linux `tcp_new`, then
    /// `nf_conntrack_tcp_packet` on the unconfirmed connection).
    fn open_tcp(&self, seg: &Seg) -> (TcpTrack, tcp_packet::Outcome) {
        let mut t = TcpTrack::new(seg);
        let c = tcp_packet::Conn {
            state: TcpState::None,
            seen_reply: false,
            assured: false,
            remaining_ns: 0,
        };
        let o = tcp_packet::packet(&mut t, c, 0, seg, self.liberal, &self.timeouts);
        (t, o)
    }

    /// Applies packet `p` to live entry `i`; `None` if the packet reopens
    /// a closed TCP connection.
    #[inline]
    fn update(&mut self, i: u32, p: &CtPacket, now_ns: u64) -> Option<Classified> {
        let Conntrack {
            table,
            timeouts,
            tcp,
            liberal,
            ..
        } = self;
        let e = table.get_mut(i)?;
        let reply = e.is_reply(&p.key);
        let before = e.expires_ns;
        let t = tcp.get_mut(i as usize)?;
        let clock = Clock::new(now_ns, timeouts);
        let r = advance(e, t, timeouts, *liberal, i, reply, p.l4, &clock);
        table.expiry_changed(i, before);
        r
    }

    /// Tracks the connection `n` opens (its first packet was accepted);
    /// `user` is stored in the entry. Frees expired entries first if the
    /// table is full.
    pub fn commit(
        &mut self,
        n: &NewConn,
        flow_id: u32,
        now_ns: u64,
        user: u32,
    ) -> Result<u32, TableFull> {
        if self.table.len() == self.table.capacity() {
            // Bounded: at most one pass over 256 slab positions.
            self.table.sweep(now_ns, 256);
        }
        let canon = n.key.canonical();
        let entry = Entry {
            key: canon,
            zone: n.zone,
            proto_state: n.proto_state,
            flags: if n.key.is_canonical() { ORIG_IS_SRC } else { 0 },
            expires_ns: now_ns.saturating_add(n.timeout),
            created_ns: now_ns,
            user,
        };
        let i = self.table.insert(entry, n.hash).ok_or(TableFull)?;
        if n.key.proto == 6 {
            let track = self.open_tcp(&n.seg).0;
            if let Some(t) = self.tcp.get_mut(i as usize) {
                *t = track;
            }
        }
        if let Some(c) = self.flow_cache.get_mut(flow_id as usize) {
            *c = i + 1;
        }
        Ok(i)
    }

    /// Entry `i`.
    pub fn entry(&self, i: u32) -> Option<&Entry> {
        self.table.get(i).filter(|e| e.is_live())
    }

    /// Removes up to `budget` slab positions' worth of expired connections.
    pub fn sweep(&mut self, now_ns: u64, budget: usize) -> usize {
        self.table.sweep(now_ns, budget)
    }

    /// Number of tracked connections (expired ones not yet swept included).
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether nothing is tracked.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Prefetches the cache lines that classifying packets with these flow
    /// ids will read: every flow-cache slot first, then every entry they
    /// point at, so the batch's misses overlap instead of coming one per
    /// packet, and (unlike plain reads) without holding up the
    /// instructions behind them. The second pass reads the slots, which
    /// the first pass has already put on their way. For a batch of packets
    /// of connections spread over a large table this turns two serial
    /// memory misses per packet into about two per batch (bench:
    /// firewall/hit_cached vs hit_cached_warm).
    pub fn warm(&self, flow_ids: &[u32]) {
        self.warm_with(flow_ids.iter().copied());
    }

    /// [`Conntrack::warm`] over flow ids from an iterator (walked twice).
    #[inline]
    fn warm_with(&self, flow_ids: impl Iterator<Item = u32> + Clone) {
        for id in flow_ids.clone() {
            self.prefetch_slot(id);
        }
        for id in flow_ids {
            self.prefetch_entry(self.cached_entry(id));
        }
    }

    /// The platform ended flow `flow_id`: its cache slot may be reused.
    pub fn flow_end(&mut self, flow_id: u32) {
        if let Some(c) = self.flow_cache.get_mut(flow_id as usize) {
            *c = 0;
        }
    }

    /// Forgets every connection.
    pub fn clear(&mut self) {
        self.table.clear();
        self.flow_cache.fill(0);
    }
}
