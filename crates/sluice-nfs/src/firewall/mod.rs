//! `firewall`: a stateful, security-group style firewall over the
//! [`conntrack`](crate::conntrack) module.
//!
//! Each IP packet is first classified by connection tracking, in the
//! packet's zone (from `zones`, per ingress port; default 0):
//!
//! - a packet of a tracked connection (either direction) or an ICMP error
//!   about one (RELATED) passes without a rule scan;
//! - an INVALID packet (a TCP packet the connection's state forbids, a bad
//!   flag combination, a non-SYN opening a connection with
//!   `tcp_loose: false`, an unsolicited echo reply, an ICMP error about no
//!   tracked connection) is dropped as `invalid`;
//! - a NEW packet is matched against the rules in order; the first match
//!   decides (`accept`, `drop`, `reject`), else `default`. Accepting tracks
//!   the connection (`table_full` drop when the table is full).
//!   ICMP messages other than echo and errors are not tracked and go
//!   through the rules every time.
//!
//! `reject` answers TCP with a RST and everything else with an ICMP/ICMPv6
//! destination unreachable (`port_unreachable`, or `admin_prohibited`),
//! built in place from the offending packet and sent back out of the port
//! it came in on (`ToPort(port_in)`); packets that must not be answered
//! (ICMP errors, RSTs, broadcasts, bad checksums) are only dropped.
//!
//! IP fragments are reassembled first, as Linux's `nf_defrag` does
//! (`defrag.rs`): the datagram is judged whole and its fragments leave
//! with its verdict, unchanged. TCP segments are checked against the
//! sequence window (`conntrack::tcp_window`) and checksums are verified
//! (`checksum: false` skips that), as Linux conntrack does by default.
//!
//! A TCP ACK/data segment or UDP datagram whose platform flow id points at
//! its connection's entry takes the established fast path: the entry is
//! checked against the header bytes and updated by the same state machine,
//! with no flow key built ([`Conntrack::classify_cached`]), and for the
//! common shape (untagged, IPv4 without options or IPv6 without extension
//! headers) with no header parse either ([`Firewall::decide_frame`],
//! [`Conntrack::classify_frame`]).
//! Full reference: `docs/nfs/firewall.md`.
//!
//! ```yaml
//! - name: fw
//!   type: firewall
//!   config:
//!     default: drop
//!     rules:
//!       - { action: accept, proto: tcp, dst_port: 22, src: 10.0.0.0/8 }
//!       - { action: reject, proto: tcp, dst_port: 23 }
//!       - { action: accept, proto: icmp, icmp_type: 8 }
//! ```

pub mod config;
mod defrag;
pub mod frag;
mod fragments;
pub mod reject;
mod reply_ports;
pub mod rules;
#[cfg(test)]
mod state_tests;

use sluice_nf::{
    Batch, BuildContext, Context, DropReason, NetworkFunction, NfType, PortId, Verdict,
};
use sluice_packet::{parse, Headers, ParseError};
use sluice_spec::SpecError;

use crate::conntrack::{Classified, Clock, Conntrack, CtPacket, V4Tuple};
use config::FirewallConfig;
use reject::Reply;
use rules::{first_match, Action, IcmpReject, MatchInput, RejectWith, Rule};

/// Drop reasons, by index into `TYPE.drop_reasons`.
pub const DENIED: DropReason = DropReason::nf_local(0);
/// An INVALID packet.
pub const INVALID: DropReason = DropReason::nf_local(1);
/// A NEW connection accepted by the rules did not fit in the table.
pub const TABLE_FULL: DropReason = DropReason::nf_local(2);
/// An IP fragment.
pub const FRAGMENT: DropReason = DropReason::nf_local(3);
/// A frame without IP, with `non_ip: drop`.
pub const NON_IP: DropReason = DropReason::nf_local(4);
/// A bad IPv4 header, TCP, UDP, ICMP or ICMPv6 checksum (INVALID to
/// Linux conntrack with `nf_conntrack_checksum = 1`).
pub const CHECKSUM: DropReason = DropReason::nf_local(5);
/// Overlapping fragments: the whole datagram is dropped (RFC 5722; Linux
/// does the same for IPv4).
pub const FRAG_OVERLAP: DropReason = DropReason::nf_local(6);
/// A fragment wholly inside data already held (Linux drops it, keeps the
/// rest).
pub const FRAG_DUPLICATE: DropReason = DropReason::nf_local(7);
/// A datagram not complete within its reassembly timeout.
pub const FRAG_TIMEOUT: DropReason = DropReason::nf_local(8);
/// A fragment over the reassembly memory bound.
pub const FRAG_MEMORY: DropReason = DropReason::nf_local(9);
/// Marks a fragment for `process` to take out of its batch; never left
/// on a packet (not a reason the NF reports).
const HOLD: DropReason = DropReason::nf_local(255);

/// Counter indices, into `TYPE.counters`.
pub mod counters {
    /// Packets passed.
    pub const ACCEPTED: usize = 0;
    /// Packets dropped by a rule or the default (rejects that could not be
    /// answered included).
    pub const DROPPED: usize = 1;
    /// Packets answered with a RST or ICMP unreachable.
    pub const REJECTED: usize = 2;
    /// INVALID packets dropped.
    pub const INVALID: usize = 3;
    /// Connections accepted and tracked.
    pub const NEW: usize = 4;
    /// Packets of tracked connections passed.
    pub const ESTABLISHED: usize = 5;
    /// ICMP errors about tracked connections passed.
    pub const RELATED: usize = 6;
    /// Gauge: connections in the table.
    pub const ENTRIES: usize = 7;
    /// NEW connections dropped because the table was full.
    pub const TABLE_FULL: usize = 8;
    /// Untracked packets (ICMP other than echo/errors) accepted by a rule.
    pub const UNTRACKED: usize = 9;
    /// Packets dropped for a bad checksum (also INVALID to Linux, counted
    /// apart).
    pub const BAD_CHECKSUM: usize = 10;
    /// Datagrams reassembled from fragments and judged.
    pub const FRAG_REASSEMBLED: usize = 11;
    /// Gauge: fragment buffers held (in reassembly or waiting to leave).
    pub const FRAG_HELD: usize = 12;
}

/// Expired entries looked at per batch (amortised sweep; the lazy check
/// on lookup catches the rest).
const SWEEP_PER_BATCH: usize = 64;

/// Tick period: 100 ms.
const TICK_NS: u64 = 100_000_000;

/// Packets `process` reads ahead, prefetches for and then decides at a
/// time: enough to overlap the misses of a batch of 32, few enough for
/// the L1 fill buffers and a small stack array.
const CHUNK: usize = 32;

/// What the first pass of `process` reads from a packet.
#[derive(Clone, Copy)]
struct Pre {
    id: u32,
    zone: u16,
    /// The fast-path tuple of an IPv4 frame of the common shape (or
    /// none).
    v4: V4Tuple,
}

impl Pre {
    /// A chunk's slots before the first pass fills them.
    const EMPTY: Pre = Pre {
        id: u32::MAX,
        zone: 0,
        v4: V4Tuple::NONE,
    };
}

/// What the firewall decided for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Pass: a tracked connection.
    Established,
    /// Pass: an ICMP error about a tracked connection.
    Related,
    /// Pass: a NEW connection accepted by rule `rule` (`None`: the
    /// default), now tracked.
    New {
        /// Accepting rule.
        rule: Option<usize>,
    },
    /// Pass: untracked (ICMP other than echo and errors), accepted by a rule.
    Untracked {
        /// Accepting rule.
        rule: Option<usize>,
    },
    /// Pass: a frame without IP.
    NonIp,
    /// Drop with this reason.
    Drop {
        /// Reason.
        reason: DropReason,
        /// Rule that dropped (for `DENIED`).
        rule: Option<usize>,
    },
    /// An IP fragment: held for reassembly (by `process`; the datagram
    /// is judged when complete).
    Fragment,
    /// Answer with `reply` (rule `rule`) back out of the ingress port.
    Reject {
        /// The answer.
        reply: Reply,
        /// Rejecting rule.
        rule: Option<usize>,
    },
}

/// The firewall NF.
pub struct Firewall {
    rules: Vec<Rule>,
    default: Action,
    icmp_reject: IcmpReject,
    non_ip_accept: bool,
    /// Zone per ingress port index, for every possible index, so a
    /// packet's zone is one load with no bounds check: ≈ 3 instructions
    /// fewer per packet through `process` than a table sized to the
    /// largest port configured (162 → 159, callgrind; bench:
    /// firewall/process_100k). 128 KiB, allocated zeroed: the pages of
    /// ports without a zone are never written, so they take no memory.
    zones: Box<[u16; 1 << 16]>,
    ct: Conntrack,
    /// Hits per rule (NEW connections and untracked packets); also
    /// published as extended counters.
    rule_hits: Vec<u64>,
    /// Datagrams in reassembly and their fragments.
    defrag: defrag::Defrag,
    /// A batch's fragments, taken out of it (capacity a batch).
    intake: Vec<sluice_nf::OwnedPacket>,
    /// The reassembled datagram being judged (65 KiB, allocated once).
    reasm: Vec<u8>,
    /// A fragment of the current batch is marked for taking.
    frag_pending: bool,
    /// What `process` keeps between its passes over a chunk, kept here
    /// so a chunk does not first fill ≈ 900 bytes of stack (≈ 2
    /// instructions per packet): each pass reads only what the passes
    /// before it wrote for this chunk.
    scratch: Scratch,
}

/// `process`'s per-chunk state (see `Firewall::process_chunk`).
struct Scratch {
    /// The first pass's reading of each packet.
    pre: [Pre; CHUNK],
    /// The second pass's cached entry of each packet
    /// ([`Conntrack::cached_entry`]).
    entries: [u32; CHUNK],
}

#[derive(Default)]
struct Counts([u64; 16]);

impl Firewall {
    /// Builds from a validated config.
    pub fn new(cfg: FirewallConfig, flow_capacity: u32) -> Firewall {
        let mut zones: Box<[u16; 1 << 16]> = vec![0; 1 << 16]
            .into_boxed_slice()
            .try_into()
            .expect("65536 zones");
        for (p, z) in &cfg.zones {
            zones[usize::from(*p)] = *z;
        }
        Firewall {
            rule_hits: vec![0; cfg.rules.len()],
            rules: cfg.rules,
            default: cfg.default,
            icmp_reject: cfg.icmp_reject,
            non_ip_accept: cfg.non_ip_accept,
            zones,
            ct: Conntrack::new(cfg.conntrack, flow_capacity),
            defrag: defrag::Defrag::new(
                FRAG_QUEUES,
                cfg.frag.max_held,
                cfg.frag.timeout_v4_ns,
                cfg.frag.timeout_v6_ns,
            ),
            intake: Vec::with_capacity(sluice_mem::MAX_BATCH),
            reasm: vec![0; 65_535 + 64],
            frag_pending: false,
            scratch: Scratch {
                pre: [Pre::EMPTY; CHUNK],
                entries: [u32::MAX; CHUNK],
            },
        }
    }

    /// Builds from the NF's spec config.
    pub fn from_build_context(ctx: &BuildContext<'_>) -> Result<Firewall, SpecError> {
        let cfg = config::compile(ctx.config, ctx.resolver, ctx.flow_capacity)?;
        // Rejects must be able to leave through the ports they answer on.
        reply_ports::check(ctx.config, ctx.resolver, &cfg)?;
        Ok(Firewall::new(cfg, ctx.flow_capacity))
    }

    /// The connection tracker.
    pub fn conntrack(&self) -> &Conntrack {
        &self.ct
    }

    /// The connection tracker, mutable (sweeps, flow ends, tests).
    pub fn conntrack_mut(&mut self) -> &mut Conntrack {
        &mut self.ct
    }

    /// Hits per rule so far.
    pub fn rule_hits(&self) -> &[u64] {
        &self.rule_hits
    }

    /// Warms the conntrack entries of a batch's flow ids before deciding
    /// its packets (see [`Conntrack::warm`]).
    pub fn warm(&self, flow_ids: &[u32]) {
        self.ct.warm(flow_ids);
    }

    /// The zone of ingress port `port`.
    #[inline]
    pub fn zone_of(&self, port: u16) -> u16 {
        self.zones[usize::from(port)]
    }

    /// Decides one frame that came in on `port_in` with platform flow id
    /// `flow_id` at `now_ns`, as `process` does: a packet of the common
    /// shape (untagged, IPv4 without options or IPv6 without extension
    /// headers, TCP ACK-class or UDP) of the connection its flow id points
    /// at is decided straight from its bytes
    /// ([`Conntrack::classify_frame`]); anything else is parsed and goes
    /// through [`Firewall::decide`]. `Err` when the parse fails (a
    /// malformed frame, dropped as such), exactly when `parse` fails.
    #[inline]
    pub fn decide_frame(
        &mut self,
        frame: &[u8],
        port_in: u16,
        flow_id: u32,
        now_ns: u64,
    ) -> Result<Decision, ParseError> {
        self.decide_frame_csum(frame, port_in, flow_id, now_ns, false)
    }

    /// [`Firewall::decide_frame`] for a packet whose checksums are verified
    /// only when `csum_trusted` is false (`Packet::csum_trusted`: partial
    /// checksums of the local stack, or checksums its receiver verified).
    #[inline]
    pub fn decide_frame_csum(
        &mut self,
        frame: &[u8],
        port_in: u16,
        flow_id: u32,
        now_ns: u64,
        csum_trusted: bool,
    ) -> Result<Decision, ParseError> {
        // ≈ 163 instructions per hit, against ≈ 239 for parse + decide
        // (callgrind, 20 k connections; bench: firewall/hit_cached_warm,
        // 322 → 224 with the bench's loop). `process` no longer calls this
        // for IPv4 packets of the common shape (see `process_chunk`).
        let zone = self.zone_of(port_in);
        match self
            .ct
            .classify_frame(frame, zone, flow_id, now_ns, csum_trusted)
        {
            Some(Classified::Tracked { .. }) => Ok(Decision::Established),
            Some(Classified::Invalid(why)) => Ok(Decision::Drop {
                reason: invalid_reason(why),
                rule: None,
            }),
            // Not a fast-path packet (it gives nothing else).
            _ => self.decide_parsed(frame, port_in, flow_id, now_ns, csum_trusted),
        }
    }

    /// Parse, then [`Firewall::decide`] (whose full path is out of line).
    #[inline]
    fn decide_parsed(
        &mut self,
        frame: &[u8],
        port_in: u16,
        flow_id: u32,
        now_ns: u64,
        csum_trusted: bool,
    ) -> Result<Decision, ParseError> {
        let h = parse(frame)?;
        Ok(self.decide_csum(frame, &h, port_in, flow_id, now_ns, csum_trusted))
    }

    /// Decides one frame parsed as `h` that came in on `port_in` with
    /// platform flow id `flow_id` at `now_ns`, updating connection state.
    #[inline]
    pub fn decide(
        &mut self,
        frame: &[u8],
        h: &Headers,
        port_in: u16,
        flow_id: u32,
        now_ns: u64,
    ) -> Decision {
        self.decide_csum(frame, h, port_in, flow_id, now_ns, false)
    }

    /// [`Firewall::decide`], verifying checksums only when `csum_trusted`
    /// is false.
    #[inline]
    fn decide_csum(
        &mut self,
        frame: &[u8],
        h: &Headers,
        port_in: u16,
        flow_id: u32,
        now_ns: u64,
        csum_trusted: bool,
    ) -> Decision {
        // Established fast path: a plain ACK/data segment or UDP datagram
        // of the connection the flow id points at, checked against the
        // header bytes; SYN/FIN/RST, mismatches and expiry go the full way.
        // ≈ 164 instructions/packet here (parse not included) against 412
        // through the full path (callgrind, 20 k connections). `process`
        // reaches this only for what `decide_frame`'s raw path leaves: VLAN
        // tags, IP options, extension headers.
        if h.ip_version != 0 && !h.fragment {
            if self.ct.verifies_checksums()
                && !csum_trusted
                && sluice_packet::verify_checksums(frame, h).is_err()
            {
                return Decision::Drop {
                    reason: CHECKSUM,
                    rule: None,
                };
            }
            let zone = self.zone_of(port_in);
            match self.ct.classify_cached(frame, h, zone, flow_id, now_ns) {
                Some(Classified::Tracked { .. }) => return Decision::Established,
                Some(Classified::Invalid(_)) => {
                    return Decision::Drop {
                        reason: INVALID,
                        rule: None,
                    }
                }
                // Not a fast-path packet (it gives nothing else).
                _ => {}
            }
        }
        self.decide_full(frame, h, port_in, flow_id, now_ns)
    }

    /// [`Firewall::decide`] without the fast path: parse to a
    /// [`CtPacket`], classify, rules. Out of line so the fast path's
    /// caller does not pay for its stack frame.
    #[inline(never)]
    fn decide_full(
        &mut self,
        frame: &[u8],
        h: &Headers,
        port_in: u16,
        flow_id: u32,
        now_ns: u64,
    ) -> Decision {
        if h.ip_version == 0 {
            return if self.non_ip_accept {
                Decision::NonIp
            } else {
                Decision::Drop {
                    reason: NON_IP,
                    rule: None,
                }
            };
        }
        if h.fragment {
            return Decision::Fragment;
        }
        let zone = self.zone_of(port_in);
        let cp = match CtPacket::parse(frame, h, zone) {
            Ok(cp) => cp,
            Err(e) => {
                return Decision::Drop {
                    reason: DropReason::malformed(e),
                    rule: None,
                }
            }
        };
        // Hit with parse, when the fast path does not apply: ≈ 572
        // instructions/packet through the flow-id cache, 667 hashed
        // (callgrind, before the fast path; bench: firewall/hit_hashed).
        let new = match self.ct.classify(&cp, flow_id, now_ns) {
            Classified::Tracked { .. } => return Decision::Established,
            Classified::Related { .. } => return Decision::Related,
            Classified::Invalid(_) => {
                return Decision::Drop {
                    reason: INVALID,
                    rule: None,
                }
            }
            Classified::New(n) => Some(n),
            Classified::Untracked => None,
        };
        let m = MatchInput {
            key: &cp.key,
            icmp_type: cp.icmp_type,
            port_in,
            zone,
        };
        let (rule, action) = match first_match(&self.rules, &m) {
            Some((i, a)) => {
                if let Some(n) = self.rule_hits.get_mut(i) {
                    *n += 1;
                }
                (Some(i), a)
            }
            None => (None, self.default),
        };
        match action {
            Action::Accept => match new {
                None => Decision::Untracked { rule },
                Some(n) => {
                    let user = rule.map_or(u32::MAX, |r| r as u32);
                    match self.ct.commit(&n, flow_id, now_ns, user) {
                        Ok(_) => Decision::New { rule },
                        Err(_) => Decision::Drop {
                            reason: TABLE_FULL,
                            rule,
                        },
                    }
                }
            },
            Action::Drop => Decision::Drop {
                reason: DENIED,
                rule,
            },
            Action::Reject(w) => {
                let reply = match w {
                    RejectWith::TcpReset => Reply::TcpReset,
                    RejectWith::Icmp(c) => Reply::Unreachable(c),
                    RejectWith::Auto if cp.key.proto == 6 => Reply::TcpReset,
                    RejectWith::Auto => Reply::Unreachable(self.icmp_reject),
                };
                Decision::Reject { reply, rule }
            }
        }
    }

    /// Decides packets `base..base + CHUNK` of `batch` (those it has), in
    /// order, exactly as [`Firewall::decide_frame`] one by one; returns
    /// how many it decided.
    ///
    /// Three passes. The first, the only one through the SDK's batch for
    /// the common case, reads each packet's flow id, zone and, for an IPv4
    /// frame of the common shape, the fast path's tuple
    /// ([`Conntrack::peek_v4`]; the headers are in cache: the platform
    /// has just classified them for the flow id), and prefetches the flow
    /// id's cache slot. The second reads those slots (the chunk's cached
    /// entries, [`Conntrack::cached_entry`]) and prefetches the entries,
    /// so the chunk's misses overlap. The third decides in order: a kept
    /// tuple goes to [`Conntrack::classify_v4`] with its kept entry (what
    /// `decide_frame`'s fast path does with them: no packet changes
    /// another's bytes, and only the full path changes the flow-id cache),
    /// and an established packet keeps its `Next` verdict without its
    /// buffer being touched again. From the first packet off the fast
    /// path (IPv6, not of the common shape, no cached entry, another
    /// tuple, expired, INVALID) on, the chunk goes to `finish_chunk`.
    ///
    /// ≈ 159 instructions per packet of an established TCP connection,
    /// batch loop, warm-up and sweep included: ≈ 78 in the first pass (≈
    /// 14 of them the SDK's), 17 in the second, 55 in the third, the rest
    /// per batch. It was ≈ 203 with the slot prefetches in a pass of their
    /// own, the flow-id cache read again in the third pass, the ACK
    /// step's expiry computed per packet, the chunk's arrays filled on the
    /// stack, a bounds-checked zone table and the SDK's per-packet
    /// `Batch::get` (93 → 78, 23 → 17, 75 → 55), and ≈ 259 with one
    /// `decide_frame` per packet after a prefetch pass (callgrind; bench:
    /// firewall/process_100k minus copy_only_100k, 100 k connections).
    #[inline(always)]
    fn process_chunk(
        &mut self,
        batch: &mut Batch<'_>,
        base: usize,
        clock: Clock,
        c: &mut Counts,
        ctx: &mut Context<'_>,
    ) -> usize {
        let len = batch.len().saturating_sub(base).min(CHUNK);
        let Firewall {
            ct, zones, scratch, ..
        } = self;
        let (pre, entries) = (&mut scratch.pre[..len], &mut scratch.entries[..len]);
        for (slot, p) in pre.iter_mut().zip(batch.iter_mut().skip(base)) {
            let id = p.flow_id();
            ct.prefetch_slot(id);
            slot.id = id;
            slot.zone = zones[usize::from(p.port_in())];
            ct.peek_v4(p.data(), &mut slot.v4, p.csum_trusted());
        }
        for (e, p) in entries.iter_mut().zip(pre.iter()) {
            *e = ct.cached_entry(p.id);
            ct.prefetch_entry(*e);
        }
        // The fast path, in a loop of its own (its values stay in
        // registers) up to the first packet off it: ≈ 55 instructions per
        // established packet (the entry's checks, the tuple compare, the
        // ACK step), where reading the flow-id cache again, the per-packet
        // expiry and a loop shared with the slow path took ≈ 75.
        let mut hits = 0;
        let mut off = None;
        for (k, (p, &entry)) in pre.iter().zip(entries.iter()).enumerate() {
            let r = match p.v4.get() {
                Some(t) => ct.classify_v4(t, p.zone, entry, clock),
                None => None,
            };
            if let Some(Classified::Tracked { .. }) = r {
                hits += 1;
            } else {
                off = Some((k, matches!(r, Some(Classified::Invalid(_)))));
                break;
            }
        }
        c.0[counters::ESTABLISHED] += hits;
        c.0[counters::ACCEPTED] += hits;
        if let Some((k, invalid)) = off {
            self.finish_chunk(batch, base, k..len, invalid, clock, c, ctx);
        }
        len
    }

    /// Packets `rest` of the chunk at `base` of `batch` (`scratch.pre`),
    /// in order, from the first packet off the fast path (`invalid`: the
    /// fast path found it INVALID). Deciding that packet may change the
    /// flow-id cache, so from here on every kept tuple goes to
    /// [`Conntrack::classify_v4`] with its cached entry read afresh. Out
    /// of line, so the fast path's loop keeps its values in registers.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn finish_chunk(
        &mut self,
        batch: &mut Batch<'_>,
        base: usize,
        rest: std::ops::Range<usize>,
        invalid: bool,
        clock: Clock,
        c: &mut Counts,
        ctx: &mut Context<'_>,
    ) {
        self.decide_one(batch, base + rest.start, invalid, clock, c, ctx);
        for k in rest.start + 1..rest.end {
            let Some(&p) = self.scratch.pre.get(k) else {
                break;
            };
            if let Some(t) = p.v4.get() {
                let entry = self.ct.cached_entry(p.id);
                match self.ct.classify_v4(t, p.zone, entry, clock) {
                    Some(Classified::Tracked { .. }) => {
                        c.0[counters::ESTABLISHED] += 1;
                        c.0[counters::ACCEPTED] += 1;
                        continue;
                    }
                    Some(Classified::Invalid(_)) => {
                        self.decide_one(batch, base + k, true, clock, c, ctx);
                        continue;
                    }
                    // Not a fast-path packet (it gives nothing else).
                    _ => {}
                }
            }
            self.decide_one(batch, base + k, false, clock, c, ctx);
        }
    }

    /// Packet `i` of `batch` off the fast path of `process_chunk`: dropped
    /// as INVALID (`invalid`: the fast path found it so), or decided by
    /// `decide_frame`.
    #[inline]
    fn decide_one(
        &mut self,
        batch: &mut Batch<'_>,
        i: usize,
        invalid: bool,
        clock: Clock,
        c: &mut Counts,
        ctx: &mut Context<'_>,
    ) {
        let Some(mut p) = batch.get(i) else { return };
        let d = if invalid {
            Ok(Decision::Drop {
                reason: INVALID,
                rule: None,
            })
        } else {
            self.decide_frame_csum(
                p.data(),
                p.port_in(),
                p.flow_id(),
                clock.now_ns(),
                p.csum_trusted(),
            )
        };
        self.settle(&mut p, d, c, ctx);
    }

    /// Gives packet `p` the verdict of decision `d` (`Err`: malformed) and
    /// counts it.
    fn settle(
        &mut self,
        p: &mut sluice_nf::Packet<'_>,
        d: Result<Decision, ParseError>,
        c: &mut Counts,
        ctx: &mut Context<'_>,
    ) {
        use counters as k;
        let d = match d {
            Ok(d) => d,
            Err(e) => return p.drop_malformed(e),
        };
        if let Decision::New { rule: Some(r) }
        | Decision::Untracked { rule: Some(r) }
        | Decision::Drop { rule: Some(r), .. }
        | Decision::Reject { rule: Some(r), .. } = d
        {
            // Per-rule hits: extended counter i = rule i (NEW and untracked
            // packets only, so off the established fast path).
            ctx.count_ext(r, 1);
        }
        let slot = match d {
            Decision::Established => k::ESTABLISHED,
            Decision::Related => k::RELATED,
            Decision::New { .. } => k::NEW,
            Decision::Untracked { .. } => k::UNTRACKED,
            Decision::NonIp => k::ACCEPTED,
            Decision::Fragment => {
                // Taken out of the batch after the chunk loop.
                p.set_verdict(Verdict::Drop(HOLD));
                self.frag_pending = true;
                return;
            }
            Decision::Drop { reason, .. } => {
                p.drop_with(reason);
                c.0[match reason {
                    INVALID => k::INVALID,
                    CHECKSUM => k::BAD_CHECKSUM,
                    TABLE_FULL => k::TABLE_FULL,
                    DENIED => k::DROPPED,
                    _ => return,
                }] += 1;
                return;
            }
            Decision::Reject { reply, .. } => {
                // Parsed again (the decision parsed it already, and the
                // frame has not changed, so this succeeds): rejects are
                // rare and keeping the headers would cost the fast path.
                let answered = match p.headers() {
                    Ok(h) => reject::rewrite(p, &h, reply),
                    Err(_) => false,
                };
                if answered {
                    let port = p.port_in();
                    p.set_verdict(Verdict::ToPort(PortId(port)));
                    c.0[k::REJECTED] += 1;
                } else {
                    p.drop_with(DENIED);
                    c.0[k::DROPPED] += 1;
                }
                return;
            }
        };
        if slot != k::ACCEPTED {
            c.0[slot] += 1;
        }
        c.0[k::ACCEPTED] += 1;
    }
}

/// Datagrams in reassembly at once (queues are pre-sized: ≈ 5 KiB each).
const FRAG_QUEUES: usize = 256;

impl Firewall {
    /// Counts a drop with `reason` of a packet `settle` did not see (a
    /// reassembled datagram).
    fn count_drop(&self, reason: DropReason, c: &mut Counts) {
        let slot = match reason {
            INVALID => counters::INVALID,
            CHECKSUM => counters::BAD_CHECKSUM,
            TABLE_FULL => counters::TABLE_FULL,
            DENIED => counters::DROPPED,
            _ => return,
        };
        c.0[slot] += 1;
    }
}

/// The drop reason of an INVALID packet.
#[inline]
fn invalid_reason(why: crate::conntrack::Invalid) -> DropReason {
    match why {
        crate::conntrack::Invalid::Checksum => CHECKSUM,
        _ => INVALID,
    }
}

impl NetworkFunction for Firewall {
    fn live_reconfigure(&self) -> bool {
        true
    }

    /// New rules, default, zones and conntrack policy take effect at once
    /// for new connections; tracked connections stay, as established
    /// connections survive an `nft -f` in Linux (their packets never reach
    /// the rules), and so do datagrams in reassembly. A new `capacity`
    /// cannot keep the table (it is sized at build): the connections start
    /// afresh then. Per-rule hits start again at zero (the rules are new).
    fn reconfigure(
        &mut self,
        fresh: Box<dyn NetworkFunction>,
    ) -> Result<(), Box<dyn NetworkFunction>> {
        let mut fresh = sluice_nf::downcast::<Firewall>(fresh)?;
        if self.ct.adopt_policy(&fresh.ct).is_none() {
            std::mem::swap(&mut self.ct, &mut fresh.ct);
        }
        let (max_held, v4, v6) = fresh.defrag.bounds();
        self.defrag.set_bounds(max_held, v4, v6);
        self.rules = std::mem::take(&mut fresh.rules);
        self.rule_hits = vec![0; self.rules.len()];
        self.default = fresh.default;
        self.icmp_reject = fresh.icmp_reject;
        self.non_ip_accept = fresh.non_ip_accept;
        std::mem::swap(&mut self.zones, &mut fresh.zones);
        Ok(())
    }

    fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
        let now = ctx.now_ns();
        let clock = self.ct.clock(now);
        let mut c = Counts::default();
        let n = batch.len();
        let mut base = 0;
        while base < n {
            base += self.process_chunk(batch, base, clock, &mut c, ctx);
        }
        if self.frag_pending {
            self.frag_pending = false;
            self.take_fragments(batch, &mut c, ctx);
        } else if self.defrag.held() != 0 {
            self.drain(ctx);
        }
        self.ct.sweep(now, SWEEP_PER_BATCH);
        for (i, v) in c.0.iter().enumerate() {
            if *v != 0 && i != counters::ENTRIES {
                ctx.count(i, *v);
            }
        }
        ctx.set_gauge(counters::ENTRIES, self.ct.len() as u64);
    }

    fn flow_end(&mut self, flow_id: u32, _ctx: &mut Context<'_>) {
        self.ct.flow_end(flow_id);
    }

    fn tick_interval_ns(&self) -> Option<u64> {
        Some(TICK_NS)
    }

    /// Expiry without traffic: sweeps a slice of the table so a full pass
    /// takes about 10 s, and refreshes the `entries` gauge.
    fn tick(&mut self, ctx: &mut Context<'_>) {
        let budget = (self.ct.table().capacity() / 100).max(1024);
        self.ct.sweep(ctx.now_ns(), budget);
        ctx.set_gauge(counters::ENTRIES, self.ct.len() as u64);
        self.expire_fragments(ctx);
    }

    /// Shutdown: incomplete datagrams' fragments are dropped (`fragment`).
    fn stop(&mut self, ctx: &mut Context<'_>) {
        self.flush_fragments(ctx);
    }

    fn reset(&mut self) {
        self.ct.clear();
        self.rule_hits.fill(0);
    }

    /// Version 1: the connection-tracking table, every connection with
    /// its key, TCP state and window tracking, flags, times and accepting
    /// rule (layout in `conntrack/state.rs`). Not kept: datagrams in
    /// reassembly (their fragments are dropped with the old instance, as
    /// on a restart), the per-rule hits and counters (the instance keeps
    /// its own) and the flow-id cache (flow ids are the daemon's).
    fn state_version(&self) -> Option<u16> {
        Some(1)
    }

    fn checkpoint(&self, out: &mut sluice_nf::StateWriter) {
        self.ct.write_state(out);
    }

    /// All or nothing: the table is decoded and validated whole (an
    /// accepting rule this config lacks is invalid) before it replaces the
    /// live one.
    fn restore(&mut self, state: &[u8]) -> Result<(), sluice_nf::StateError> {
        let mut r = sluice_nf::StateReader::new(state);
        let rules = self.rules.len();
        let restored = self
            .ct
            .read_state(&mut r, |user| user == u32::MAX || (user as usize) < rules)?;
        r.finish()?;
        self.ct.install(restored);
        Ok(())
    }
}

fn build(ctx: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
    Ok(Box::new(Firewall::from_build_context(ctx)?))
}

/// Type descriptor.
pub const TYPE: NfType = NfType {
    name: "firewall",
    summary: "stateful firewall: ordered rules for new connections, conntrack (zones, TCP states) for the rest",
    drop_reasons: &[
        "denied",
        "invalid",
        "table_full",
        "fragment",
        "non_ip",
        "checksum",
        "frag_overlap",
        "frag_duplicate",
        "frag_timeout",
        "frag_memory",
    ],
    counters: &[
        "accepted",
        "dropped",
        "rejected",
        "invalid",
        "new",
        "established",
        "related",
        "entries",
        "table_full",
        "untracked",
        "bad_checksum",
        "frag_reassembled",
        "frag_held",
    ],
    build,
    // Judges headers only: one verdict per super-packet, as netfilter.
    frames: sluice_nf::FrameNeeds::SuperPackets,
};
