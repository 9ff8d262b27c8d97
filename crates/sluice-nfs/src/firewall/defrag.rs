//! Reassembly before connection tracking, as Linux's `nf_defrag_ipv4` /
//! `nf_defrag_ipv6`: fragments are held in per-datagram queues until the
//! datagram is complete; conntrack and the rules then judge the
//! reassembled datagram (built in a scratch buffer, so any size up to
//! 65535 bytes works), and the verdict applies to every fragment. A
//! passing datagram leaves as the fragments it came in, in offset order:
//! what Linux's refragmentation does when it forwards a defragmented
//! datagram (`ip_do_fragment` / `ip6_fragment` reuse the kept fragment
//! list when it fits the largest fragment size seen, `frag_max_size`,
//! which the original fragments always do).
//!
//! Bounds, all fixed at build time: `queues` datagrams in reassembly,
//! `MAX_PIECES` fragments each, and `max_held` buffers held in all
//! (Linux's `ipfrag_high_thresh`, 4 MiB, over the 2240-byte buffers).
//! Over a bound a fragment is dropped (`frag_memory`), as Linux refuses
//! fragments over `high_thresh`. A queue that is not complete within its
//! timeout (IPv4 `ipfrag_time` 30 s, IPv6 `nf_conntrack_frag6_timeout`
//! 60 s, from its first fragment) is dropped (`frag_timeout`), with no
//! ICMP time exceeded (Linux sends none for defrag users either).

use std::collections::VecDeque;

use sluice_nf::{Context, DropReason, OwnedPacket, Verdict};

use super::frag::{self, Add, FragInfo, FragKey, Piece, Totals};

/// Fragments one datagram may have queued (Linux has no count limit,
/// only the memory bound; 64 covers a 64 KiB datagram of 1280-byte
/// fragments).
pub const MAX_PIECES: usize = 64;

/// One datagram in reassembly.
struct Queue {
    key: FragKey,
    live: bool,
    created_ns: u64,
    pieces: Vec<Piece>,
    pkts: Vec<OwnedPacket>,
    info: Vec<FragInfo>,
    totals: Totals,
}

/// What adding a fragment led to.
pub enum Added {
    /// Held; the datagram is not complete.
    Held,
    /// Dropped with this reason (nothing else changed, or its queue was
    /// dropped too: its buffers are in the outbox).
    Dropped(OwnedPacket, DropReason),
    /// The datagram is complete: its queue index, to [`Defrag::build`]
    /// and then [`Defrag::release`].
    Complete(usize),
}

/// The reassembly queues, their buffers and the buffers waiting to be
/// emitted.
pub struct Defrag {
    queues: Vec<Queue>,
    held: usize,
    max_held: usize,
    timeout_v4: u64,
    timeout_v6: u64,
    /// Held buffers given up, with their verdicts, to emit as the
    /// platform takes them (at most a batch per call).
    outbox: VecDeque<(OwnedPacket, Verdict)>,
}

/// Drop reasons the defragmenter uses (set by the firewall).
#[derive(Debug, Clone, Copy)]
pub struct Reasons {
    /// An unusable or inconsistent fragment.
    pub bad: DropReason,
    /// Overlapping fragments: the whole datagram.
    pub overlap: DropReason,
    /// A fragment wholly inside data already held.
    pub duplicate: DropReason,
    /// Not complete in time.
    pub timeout: DropReason,
    /// Over the memory bound.
    pub memory: DropReason,
}

impl Defrag {
    /// `queues` datagrams, `max_held` buffers, timeouts in ns.
    pub fn new(queues: usize, max_held: usize, timeout_v4: u64, timeout_v6: u64) -> Defrag {
        let queues = (0..queues.max(1))
            .map(|_| Queue {
                key: FragKey {
                    version: 0,
                    zone: 0,
                    src: [0; 16],
                    dst: [0; 16],
                    id: 0,
                    proto: 0,
                },
                live: false,
                created_ns: 0,
                pieces: Vec::with_capacity(MAX_PIECES),
                pkts: Vec::with_capacity(MAX_PIECES),
                info: Vec::with_capacity(MAX_PIECES),
                totals: Totals::default(),
            })
            .collect();
        Defrag {
            queues,
            held: 0,
            max_held,
            timeout_v4,
            timeout_v6,
            outbox: VecDeque::with_capacity(max_held + 2 * sluice_mem::MAX_BATCH),
        }
    }

    /// New bounds (a live reconfiguration): datagrams in reassembly keep
    /// their fragments; the new memory bound and timeouts apply from the
    /// next fragment and the next expiry on.
    pub fn set_bounds(&mut self, max_held: usize, timeout_v4: u64, timeout_v6: u64) {
        self.max_held = max_held;
        self.timeout_v4 = timeout_v4;
        self.timeout_v6 = timeout_v6;
    }

    /// The bounds: `(max_held, timeout_v4, timeout_v6)`.
    pub fn bounds(&self) -> (usize, u64, u64) {
        (self.max_held, self.timeout_v4, self.timeout_v6)
    }

    /// Buffers held (queued or waiting in the outbox).
    pub fn held(&self) -> usize {
        self.held
    }

    /// Adds fragment `p` described by `fr` at `now`.
    pub fn add(&mut self, p: OwnedPacket, fr: &FragInfo, now: u64, why: &Reasons) -> Added {
        self.expire(now, why);
        if self.held >= self.max_held {
            return Added::Dropped(p, why.memory);
        }
        let qi = match self.queues.iter().position(|q| q.live && q.key == fr.key) {
            Some(i) => i,
            None => match self.queues.iter().position(|q| !q.live) {
                Some(i) => {
                    let q = &mut self.queues[i];
                    q.live = true;
                    q.key = fr.key;
                    q.created_ns = now;
                    q.totals = Totals::default();
                    i
                }
                None => return Added::Dropped(p, why.memory),
            },
        };
        let q = &mut self.queues[qi];
        if q.pieces.len() >= MAX_PIECES {
            return Added::Dropped(p, why.memory);
        }
        match frag::add(&q.pieces, &mut q.totals, fr) {
            Add::At(at, piece) => {
                q.pieces.insert(at, piece);
                q.pkts.insert(at, p);
                q.info.insert(at, *fr);
                self.held += 1;
                if frag::complete(&q.totals, q.pieces.first()) {
                    Added::Complete(qi)
                } else {
                    Added::Held
                }
            }
            Add::Duplicate => Added::Dropped(p, why.duplicate),
            Add::Overlap => {
                self.kill(qi, why.overlap);
                Added::Dropped(p, why.overlap)
            }
            Add::Bad { kill } => {
                if kill {
                    self.kill(qi, why.bad);
                } else if q.pieces.is_empty() {
                    q.live = false;
                }
                Added::Dropped(p, why.bad)
            }
        }
    }

    /// Drops queue `qi`'s fragments (into the outbox) with `reason`.
    fn kill(&mut self, qi: usize, reason: DropReason) {
        self.release(qi, Verdict::Drop(reason));
    }

    /// Ends queue `qi`: its fragments go to the outbox, in offset order,
    /// with verdict `v`.
    pub fn release(&mut self, qi: usize, v: Verdict) {
        let Some(q) = self.queues.get_mut(qi) else {
            return;
        };
        q.live = false;
        q.pieces.clear();
        q.info.clear();
        for p in q.pkts.drain(..) {
            self.outbox.push_back((p, v));
        }
    }

    /// Queue `qi`'s first fragment, to turn into a reply (a reject).
    pub fn take_first(&mut self, qi: usize) -> Option<OwnedPacket> {
        let q = self.queues.get_mut(qi)?;
        if q.pkts.is_empty() {
            return None;
        }
        q.pieces.remove(0);
        q.info.remove(0);
        self.held -= 1;
        Some(q.pkts.remove(0))
    }

    /// Builds complete queue `qi`'s datagram in the scratch buffer with
    /// `frame_of` giving each fragment's bytes: the first fragment's link
    /// and IP headers (IPv6: the unfragmentable part, the fragment header
    /// left out), then every fragment's data in order; lengths, offset and
    /// checksum fixed (Linux `ip_frag_reasm` / `nf_ct_frag6_reasm`).
    /// `None` if it would exceed 65535 bytes of IP (dropped by Linux too);
    /// else the frame's length in `scratch` (65599 bytes suffice).
    pub fn build(&mut self, qi: usize, ctx: &Context<'_>, scratch: &mut [u8]) -> Option<usize> {
        let q = self.queues.get_mut(qi)?;
        let first = *q.info.first()?;
        let (hl, l3) = (first.head_len, first.l3);
        let data_len = q.totals.len as usize;
        let ip_len = hl - l3 + data_len;
        let limit = if first.key.version == 4 {
            65_535
        } else {
            65_535 + 40
        };
        if ip_len > limit || hl + data_len > scratch.len() {
            return None;
        }
        for (k, (p, fr)) in q.pkts.iter_mut().zip(q.info.iter()).enumerate() {
            let piece = q.pieces.get(k)?;
            let view = ctx.view(p);
            let f = view.data();
            if k == 0 {
                scratch.get_mut(..hl)?.copy_from_slice(f.get(..hl)?);
            }
            let n = (piece.end - piece.offset) as usize;
            let at = hl + piece.offset as usize;
            scratch
                .get_mut(at..at + n)?
                .copy_from_slice(f.get(fr.data_at..fr.data_at + n)?);
        }
        let out = scratch.get_mut(..hl + data_len)?;
        if first.key.version == 4 {
            out.get_mut(l3 + 2..l3 + 4)?
                .copy_from_slice(&(ip_len as u16).to_be_bytes());
            // Offset 0, MF clear; DF kept.
            let df = out.get(l3 + 6)? & 0x40;
            out.get_mut(l3 + 6..l3 + 8)?.copy_from_slice(&[df, 0]);
            out.get_mut(l3 + 10..l3 + 12)?.copy_from_slice(&[0, 0]);
            let c = sluice_packet::checksum::checksum(out.get(l3..first.data_at)?);
            out.get_mut(l3 + 10..l3 + 12)?
                .copy_from_slice(&c.to_be_bytes());
        } else {
            *out.get_mut(first.nh_at)? = first.next;
            out.get_mut(l3 + 4..l3 + 6)?
                .copy_from_slice(&((ip_len - 40) as u16).to_be_bytes());
        }
        Some(hl + data_len)
    }

    /// Gives up buffer `p` (not queued) with verdict `v`: it waits in the
    /// outbox.
    pub fn give_up(&mut self, p: OwnedPacket, v: Verdict) {
        self.outbox.push_back((p, v));
        self.held += 1;
    }

    /// Expires queues older than their timeout: their fragments go to the
    /// outbox as `frag_timeout` drops.
    pub fn expire(&mut self, now: u64, why: &Reasons) {
        for qi in 0..self.queues.len() {
            let q = &self.queues[qi];
            if !q.live {
                continue;
            }
            let t = if q.key.version == 4 {
                self.timeout_v4
            } else {
                self.timeout_v6
            };
            if now.saturating_sub(q.created_ns) >= t {
                self.kill(qi, why.timeout);
            }
        }
    }

    /// Drops every queue (shutdown).
    pub fn flush(&mut self, reason: DropReason) {
        for qi in 0..self.queues.len() {
            if self.queues[qi].live {
                self.kill(qi, reason);
            }
        }
    }

    /// The next buffer waiting to be emitted.
    pub fn next_out(&mut self) -> Option<(OwnedPacket, Verdict)> {
        let r = self.outbox.pop_front();
        if r.is_some() {
            self.held -= 1;
        }
        r
    }

    /// Puts back a buffer the platform could not take now.
    pub fn put_back(&mut self, p: OwnedPacket, v: Verdict) {
        self.outbox.push_front((p, v));
        self.held += 1;
    }
}
