//! The two ends of an NF's ring pair.
//!
//! [`NfLink`] is the platform's end: it hands owned buffers to an NF slot
//! (recording the NF as owner), takes them back only after checking, handle
//! by handle, that the NF owns them, caps how many buffers one NF may hold
//! (so a hostile NF cannot drain the pool), and reclaims everything an NF
//! held when it dies. [`NfEndpoint`] is the NF's end; it trusts the platform,
//! which is the only issuer of handles.
//!
//! Receive rings also carry events (flow end, reset) in order with packets:
//! an entry with [`EVENT_BIT`] set is an event, not a buffer index. An
//! event with [`SPARE_BIT`] also set hands the NF a spare buffer for its
//! allocation stash (NFs that originate packets: reject replies, flood
//! copies, ICMP errors); its index is in the low bits.

use crate::arena::Arena;
use crate::batch::{HandleBatch, MAX_BATCH};
use crate::buffer::PktHandle;
use crate::control::NfControl;
use crate::doorbell::BellWord;
use crate::pool::{owner_nf, owner_nf_blob, owner_nf_spare, BufferPool, Claim, PoolCache};
use crate::ring::{Consumer, Producer, RingCorrupt, RingRef};
use crate::sync::Ordering;
use crate::wake::WakeWord;

/// Receive-ring entries with this bit set are events, not buffers.
pub const EVENT_BIT: u32 = 1 << 31;

/// With [`EVENT_BIT`]: the entry hands over a spare buffer (flow ids and
/// buffer indices are below 2³⁰, limits enforced by the spec).
pub const SPARE_BIT: u32 = 1 << 30;

/// With [`EVENT_BIT`]: the entry lends a message buffer (flow ids stay
/// below 2²⁹; see [`crate::link_blob`]).
pub const BLOB_BIT: u32 = 1 << 29;

/// The event payload that tells an NF to reset (`NetworkFunction::reset`:
/// a `per_flow` NF's instance between two flows). No flow id takes it:
/// flow tables hold at most 2²⁴ flows. The NF does not echo it back.
pub const RESET_EVENT: u32 = BLOB_BIT - 1;

/// Most spares sent to one NF per poll (keeps one NF's refill short).
const SPARE_REFILL_MAX: u64 = MAX_BATCH as u64;

/// What [`NfLink::recv`] found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RecvOutcome {
    /// Valid handles moved into the output batch.
    pub received: usize,
    /// Entries rejected: out of range, not owned by this NF, or duplicates.
    pub invalid: usize,
    /// Events echoed back (collect them with [`NfLink::take_events`]).
    pub events: usize,
    /// Of `received`: spares the NF filled and sent, i.e. packets it
    /// originated.
    pub originated: usize,
}

/// What [`NfLink::reclaim`] took back from a stopped or dead NF.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Reclaimed {
    /// Packets it held (lost: count them as drops).
    pub packets: usize,
    /// Unused spares from its stash (not packets).
    pub spares: usize,
    /// Message buffers it held (not packets; see [`crate::link_blob`]).
    pub messages: usize,
}

/// A data answer whose buffers have partly come back (`link_blob`).
#[derive(Debug)]
pub(crate) struct Partial {
    pub(crate) id: u32,
    pub(crate) next: u16,
    pub(crate) count: u16,
    pub(crate) data: Vec<u8>,
}

/// The platform's end of NF slot `slot`.
pub struct NfLink<'a> {
    slot: u32,
    tag: u32,
    spare_tag: u32,
    pub(crate) blob_tag: u32,
    /// Message buffers lent and not yet back.
    pub(crate) blobs_out: u32,
    /// Message buffers the NF has handed back (read by `link_blob`).
    pub(crate) blobs_back: Vec<u32>,
    /// A data answer of several buffers, as far as it has come back
    /// (`link_blob`).
    pub(crate) data_back: Option<Partial>,
    spares_sent: u64,
    /// Spares given and not yet back (in the stash, the ring, or the NF).
    spares_out: u32,
    arena: &'a Arena,
    rx_ring: RingRef<'a>,
    tx_ring: RingRef<'a>,
    rx: Producer<'a>,
    tx: Consumer<'a>,
    control: &'a NfControl,
    in_flight: u32,
    quota: u32,
    /// Indices from here on are large buffers.
    large_base: u32,
    /// Large buffers the NF holds, and how many it may: a quarter of the
    /// large class, so one NF that keeps its super-packets cannot starve
    /// the others' (its overall `quota` counts them too).
    large_in_flight: u32,
    large_quota: u32,
    scratch: [u32; MAX_BATCH],
    events: Vec<u32>,
    /// The NF's trust domain: every buffer it gets (packets, spares,
    /// messages) is one of this domain's (see [`crate::crossing`]).
    domain: usize,
}

impl<'a> NfLink<'a> {
    /// Attaches to slot `slot` of `arena`.
    pub fn new(arena: &'a Arena, slot: u32) -> Self {
        let rx_ring = arena.nf_rx_ring(slot);
        let tx_ring = arena.nf_tx_ring(slot);
        let quota = rx_ring.capacity() + tx_ring.capacity() + MAX_BATCH as u32;
        NfLink {
            slot,
            tag: owner_nf(slot),
            spare_tag: owner_nf_spare(slot),
            blob_tag: owner_nf_blob(slot),
            blobs_out: 0,
            blobs_back: Vec::new(),
            data_back: None,
            spares_sent: 0,
            spares_out: 0,
            arena,
            rx_ring,
            tx_ring,
            rx: rx_ring.producer(),
            tx: tx_ring.consumer(),
            control: arena.nf_control(slot),
            in_flight: 0,
            quota,
            large_base: arena.buffers(),
            large_in_flight: 0,
            large_quota: (arena.large_buffers() / 4).max(1),
            scratch: [0; MAX_BATCH],
            events: Vec::with_capacity(MAX_BATCH),
            domain: 0,
        }
    }

    /// The same link for an NF of trust domain `domain` (0, the
    /// platform's, by default).
    pub fn in_domain(mut self, domain: usize) -> Self {
        self.domain = domain;
        self
    }

    /// The NF's trust domain: packets sent to it must be this domain's
    /// buffers ([`crate::cross_into`] makes them so).
    pub fn domain(&self) -> usize {
        self.domain
    }

    /// The slot this link serves.
    pub fn slot(&self) -> u32 {
        self.slot
    }

    /// The NF's control block.
    pub fn control(&self) -> &'a NfControl {
        self.control
    }

    /// Packets the NF currently holds (queued to it, in it, queued back);
    /// spares in its allocation stash are not packets and not counted.
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// Entries waiting in the NF's receive ring (packets, spares, events).
    pub fn queued(&self) -> u32 {
        self.rx_ring.occupancy()
    }

    /// Whether the NF sleeps and needs [`wake`](Self::wake) to see what was
    /// just sent (see [`WakeWord::sleeps_after_publish`]).
    pub fn sleeps(&self) -> bool {
        self.control.wake.sleeps_after_publish()
    }

    /// How many more buffers may be sent now (ring space and quota, which
    /// covers packets and spares alike).
    pub fn room(&mut self) -> Result<usize, RingCorrupt> {
        let free = self.rx.free()?;
        let held = self.in_flight + self.spares_out + self.blobs_out;
        Ok(free.min(self.quota.saturating_sub(held)) as usize)
    }

    /// [`NfLink::room`] up to `want`: at least `min(want, room)`, never
    /// more than the room, without reading the NF's ring index when the
    /// last reading already shows that much ([`Producer::free_up_to`]).
    pub fn room_up_to(&mut self, want: usize) -> Result<usize, RingCorrupt> {
        let held = self.in_flight + self.spares_out + self.blobs_out;
        let quota = self.quota.saturating_sub(held);
        let want = want.min(quota as usize) as u32;
        let free = self.rx.free_up_to(want)?;
        Ok(free.min(quota) as usize)
    }

    /// How full the NF's receive side is, in basis points (10,000: no
    /// room at all): of its ring or of its buffer quota, whichever is
    /// fuller.
    pub fn fill_bp(&mut self) -> Result<u32, RingCorrupt> {
        let room = self.room()? as u64;
        let cap = u64::from(self.rx_ring.capacity().min(self.quota)).max(1);
        Ok((cap.saturating_sub(room) * 10_000 / cap) as u32)
    }

    /// Moves as many handles as fit from the front of `batch` to the NF,
    /// wakes it if it sleeps, and returns how many moved.
    pub fn send(
        &mut self,
        pool: &BufferPool,
        batch: &mut HandleBatch,
    ) -> Result<usize, RingCorrupt> {
        let mut n = batch.len().min(self.room()?);
        if self.large_base < pool.capacity() {
            n = self.within_large_quota(&batch.raw()[..n]);
        }
        if n == 0 {
            return Ok(0);
        }
        debug_assert!(
            batch.raw()[..n]
                .iter()
                .all(|&raw| pool.domain_of(raw) == self.domain),
            "a packet of another trust domain sent without crossing"
        );
        for &raw in &batch.raw()[..n] {
            pool.set_owner(raw, self.tag);
        }
        let sent = self.rx.enqueue(&batch.raw()[..n])?;
        debug_assert_eq!(
            sent, n,
            "room() said these fit and we are the only producer"
        );
        batch.consume_front(sent);
        self.in_flight += sent as u32;
        Ok(sent)
    }

    /// Enqueues raw entries (message buffers, see `link_blob`).
    pub(crate) fn enqueue_raw(&mut self, entries: &[u32]) -> Result<usize, RingCorrupt> {
        self.rx.enqueue(entries)
    }

    /// How many of `raw` (from the front) may go without the NF holding
    /// more than its share of large buffers; counts those that go.
    fn within_large_quota(&mut self, raw: &[u32]) -> usize {
        let mut held = self.large_in_flight;
        for (i, &r) in raw.iter().enumerate() {
            if r >= self.large_base {
                if held >= self.large_quota {
                    self.large_in_flight = held;
                    return i;
                }
                held += 1;
            }
        }
        self.large_in_flight = held;
        raw.len()
    }

    /// Queues an event (payload < 2³¹) to the NF; false if the ring is full.
    pub fn send_event(&mut self, event: u32) -> Result<bool, RingCorrupt> {
        Ok(self.rx.enqueue(&[EVENT_BIT | (event & !EVENT_BIT)])? == 1)
    }

    /// Tops the NF's allocation stash up to the size it asked for (see
    /// [`NfControl::spare_target`]), bounded by ring room and the buffer
    /// quota; returns how many spares were sent. One load of the target
    /// when the NF wants none (the common case).
    pub fn refill_spares(&mut self, cache: &mut PoolCache<'_>) -> Result<usize, RingCorrupt> {
        self.refill_spares_for(cache, 0)
    }

    /// [`Self::refill_spares`] ahead of a batch of `packets` about to be
    /// sent: spares travel in ring order, so ones sent now reach the NF
    /// right before the batch, while spares already queued are used up by
    /// the batches queued before it. So besides topping up, this sends
    /// one spare per packet (up to the target) while the stash stays under
    /// four targets, and keeps room in the ring for the batch itself.
    pub fn refill_spares_for(
        &mut self,
        cache: &mut PoolCache<'_>,
        packets: usize,
    ) -> Result<usize, RingCorrupt> {
        use std::sync::atomic::Ordering::Relaxed;
        let target = u64::from(self.control.spare_target.load(Relaxed));
        if target == 0 {
            return Ok(0);
        }
        let consumed = self.control.spares_consumed.load(Relaxed);
        let stash = self.spares_sent.saturating_sub(consumed);
        let top_up = target.saturating_sub(stash);
        let paired = (packets as u64)
            .min(target)
            .min((4 * target).saturating_sub(stash));
        let want = top_up.max(paired).min(SPARE_REFILL_MAX) as usize;
        let n = want.min(self.room()?.saturating_sub(packets));
        let mut sent = 0;
        for _ in 0..n {
            let Some(h) = cache.alloc_in(self.domain) else {
                break;
            };
            let raw = h.into_raw();
            cache.pool().set_owner(raw, self.spare_tag);
            if self.rx.enqueue(&[EVENT_BIT | SPARE_BIT | raw])? != 1 {
                // room() said it fits and we are the only producer.
                cache.pool().set_owner(raw, crate::pool::OWNER_PLATFORM);
                cache.free(PktHandle::from_raw_owned(raw));
                break;
            }
            sent += 1;
        }
        self.spares_sent += sent as u64;
        self.spares_out += sent as u32;
        Ok(sent)
    }

    /// Wakes the NF to see what was just sent, if it sleeps; true if a
    /// syscall was made. An NF that takes turns (`crate::turn`) is woken
    /// when it gets its core's turn here, because nobody held it, or when
    /// its ring is under pressure (it then runs out of turn); otherwise the
    /// holder hands the turn along and it comes to this NF.
    pub fn wake(&self) -> bool {
        if let Some(turn) = self.turn() {
            let rx = self.arena.nf_rx_ring(self.slot);
            if !turn.claim(self.slot) && !crate::turn::under_pressure(rx.occupancy(), rx.capacity())
            {
                return false;
            }
        }
        self.control.wake.wake()
    }

    /// The NF's core turn, if the scheduler has it take turns.
    pub fn turn(&self) -> Option<&'a crate::turn::CoreTurn> {
        let b = &self.control.budget;
        if b.mode.load(Ordering::Acquire) != crate::turn::mode::TURNS {
            return None;
        }
        let core = b.core.load(Ordering::Relaxed);
        ((core as usize) < crate::arena::MAX_CORES).then(|| self.arena.slot_turn(self.slot, core))
    }

    /// Takes up to `max` entries back from the NF into `out`, keeping only
    /// handles the NF really owns.
    pub fn recv(
        &mut self,
        pool: &BufferPool,
        out: &mut HandleBatch,
        max: usize,
    ) -> Result<RecvOutcome, RingCorrupt> {
        let max = max.min(MAX_BATCH - out.len());
        let first = out.len();
        let n = self.tx.dequeue(&mut self.scratch[..max])?;
        let mut outcome = RecvOutcome::default();
        for &raw in &self.scratch[..n] {
            if raw & EVENT_BIT != 0 {
                if raw & BLOB_BIT != 0 {
                    // A message buffer coming back with the NF's answer.
                    let index = raw & !(EVENT_BIT | BLOB_BIT);
                    if pool.claim_blob(index, self.blob_tag) {
                        self.blobs_back.push(index);
                        self.blobs_out = self.blobs_out.saturating_sub(1);
                    } else {
                        outcome.invalid += 1;
                    }
                    continue;
                }
                self.events.push(raw & !EVENT_BIT);
                outcome.events += 1;
            } else {
                match pool.claim_packet_or_spare(raw, self.tag) {
                    Claim::Packet => self.in_flight = self.in_flight.saturating_sub(1),
                    Claim::Originated => {
                        outcome.originated += 1;
                        self.spares_out = self.spares_out.saturating_sub(1);
                    }
                    Claim::Invalid => {
                        outcome.invalid += 1;
                        continue;
                    }
                }
                out.push_raw_owned(raw);
                outcome.received += 1;
            }
        }
        if self.large_in_flight > 0 {
            // Large buffers coming back (spares are never large), counted
            // in a second pass so runs without them pay nothing per packet.
            let back = out.indices()[first..]
                .iter()
                .filter(|&&r| r >= self.large_base)
                .count() as u32;
            self.large_in_flight = self.large_in_flight.saturating_sub(back);
        }
        Ok(outcome)
    }

    /// Moves out the events received by [`Self::recv`] (in ring order).
    pub fn take_events(&mut self, out: &mut Vec<u32>) {
        out.append(&mut self.events);
    }

    /// Entries waiting in the NF's transmit ring.
    pub fn pending(&mut self) -> Result<u32, RingCorrupt> {
        self.tx.available()
    }

    /// Takes back every buffer the NF holds (it must not be running: dead or
    /// stopped), frees them into `cache` and empties both rings.
    pub fn reclaim(&mut self, cache: &mut PoolCache<'_>) -> Reclaimed {
        let pool = cache.pool();
        // Message buffers already back but not yet read are the platform's.
        for raw in self.blobs_back.drain(..) {
            cache.free(PktHandle::from_raw_owned(raw));
        }
        self.data_back = None;
        let mut got = Reclaimed::default();
        for (tag, count) in [
            (self.tag, &mut got.packets),
            (self.spare_tag, &mut got.spares),
            (self.blob_tag, &mut got.messages),
        ] {
            let owned: Vec<u32> = pool.owned_by(tag).collect();
            for &raw in &owned {
                pool.set_owner(raw, crate::pool::OWNER_PLATFORM);
                cache.free(PktHandle::from_raw_owned(raw));
            }
            *count = owned.len();
        }
        self.reset_rings();
        self.in_flight = 0;
        self.blobs_out = 0;
        self.large_in_flight = 0;
        // A new instance starts with an empty stash and a zeroed control block.
        self.spares_sent = 0;
        self.spares_out = 0;
        got
    }

    /// Takes back what a dead NF held, except what still waits in its
    /// receive ring, which it never dequeued: that queue (packets, spares
    /// and flow-end events, in order) stays for the next instance in this
    /// slot, which resumes at the same ring position. So a crash loses only
    /// the packets the NF had taken in, not the ones queued behind them.
    /// The NF could have scribbled on the ring, so the queue is kept only
    /// if every entry in it is a buffer this NF owns (once) or an event;
    /// otherwise everything is reclaimed as by [`Self::reclaim`]. Returns
    /// what was reclaimed and the flow-end events still queued.
    pub fn reclaim_held(&mut self, cache: &mut PoolCache<'_>) -> (Reclaimed, Vec<u32>) {
        let pool = cache.pool();
        for raw in self.blobs_back.drain(..) {
            cache.free(PktHandle::from_raw_owned(raw));
        }
        let mut queued = Vec::new();
        if self.rx.pending(&mut queued).is_err() {
            return (self.reclaim(cache), Vec::new());
        }
        let mut kept = std::collections::HashSet::with_capacity(queued.len());
        let mut events = Vec::new();
        let (mut packets, mut spares) = (0u32, 0u32);
        let mut blobs = 0u32;
        let mut large = 0u32;
        for &raw in &queued {
            let (index, tag) = if raw & (EVENT_BIT | SPARE_BIT) == EVENT_BIT | SPARE_BIT {
                (raw & !(EVENT_BIT | SPARE_BIT), self.spare_tag)
            } else if raw & (EVENT_BIT | BLOB_BIT) == EVENT_BIT | BLOB_BIT {
                (raw & !(EVENT_BIT | BLOB_BIT), self.blob_tag)
            } else if raw & EVENT_BIT != 0 {
                events.push(raw & !EVENT_BIT);
                continue;
            } else {
                (raw, self.tag)
            };
            if pool.owner(index) != Some(tag) || !kept.insert(index) {
                return (self.reclaim(cache), Vec::new());
            }
            if tag == self.tag {
                packets += 1;
                large += u32::from(index >= self.large_base);
            } else if tag == self.spare_tag {
                spares += 1;
            } else {
                blobs += 1;
            }
        }
        let mut got = Reclaimed::default();
        for (tag, count) in [
            (self.tag, &mut got.packets),
            (self.spare_tag, &mut got.spares),
            (self.blob_tag, &mut got.messages),
        ] {
            let owned: Vec<u32> = pool.owned_by(tag).filter(|i| !kept.contains(i)).collect();
            for &raw in &owned {
                pool.set_owner(raw, crate::pool::OWNER_PLATFORM);
                cache.free(PktHandle::from_raw_owned(raw));
            }
            *count = owned.len();
        }
        self.tx_ring.reset();
        self.tx = self.tx_ring.consumer();
        self.in_flight = packets;
        self.large_in_flight = large;
        // The new instance's control block starts with nothing consumed, and
        // the queued spares are what it will find.
        self.spares_sent = u64::from(spares);
        self.spares_out = spares;
        self.blobs_out = blobs;
        (got, events)
    }

    /// Empties both rings and re-attaches; the NF must not be running.
    fn reset_rings(&mut self) {
        self.rx_ring.reset();
        self.tx_ring.reset();
        self.rx = self.rx_ring.producer();
        self.tx = self.tx_ring.consumer();
    }
}

/// What an NF receives: a packet or an event, in ring order.
#[derive(Debug, PartialEq, Eq)]
pub enum RxEntry {
    /// A packet buffer, now owned by the NF.
    Packet(PktHandle),
    /// An event payload (see [`NfLink::send_event`]).
    Event(u32),
    /// A spare buffer for the NF's allocation stash, now owned by the NF.
    Spare(PktHandle),
    /// One buffer of a message to the NF (see [`crate::link_blob`]), now
    /// owned by the NF until it hands it back.
    Blob(PktHandle),
}

/// The NF's end of its ring pair.
pub struct NfEndpoint<'a> {
    arena: &'a Arena,
    /// Ordinary buffers of this NF's trust domain: its packets, spares
    /// and messages (another domain's are not even mapped here).
    own: std::ops::Range<u32>,
    /// Large buffers, which may carry its packets too (domain 0 only).
    large: std::ops::Range<u32>,
    rx: Consumer<'a>,
    tx: Producer<'a>,
    control: &'a NfControl,
    platform_wake: &'a WakeWord,
    /// This slot's doorbell: rung after every send (`crate::doorbell`).
    bell: &'a BellWord,
    bell_bit: u64,
}

impl<'a> NfEndpoint<'a> {
    /// Attaches to slot `slot`; `worker` is the platform worker that serves it.
    pub fn new(arena: &'a Arena, slot: u32, worker: u32) -> Self {
        NfEndpoint {
            arena,
            own: arena.domains()[0].indices.clone(),
            large: arena.buffers()..arena.total_buffers(),
            rx: arena.nf_rx_ring(slot).consumer(),
            tx: arena.nf_tx_ring(slot).producer(),
            control: arena.nf_control(slot),
            platform_wake: arena.worker_wake(worker),
            bell: arena.bell_word(BellWord::locate(slot).0),
            bell_bit: BellWord::locate(slot).1,
        }
    }

    /// The same endpoint for an NF of trust domain `domain`: entries
    /// naming another domain's buffers are refused like garbage (they
    /// can only be forged: the platform copies packets across domains).
    pub fn in_domain(mut self, domain: usize) -> Self {
        if let Some(d) = self.arena.domains().get(domain).filter(|_| domain > 0) {
            self.own = d.indices.clone();
            self.large = 0..0;
        }
        self
    }

    /// The arena.
    pub fn arena(&self) -> &'a Arena {
        self.arena
    }

    /// This NF's control block.
    pub fn control(&self) -> &'a NfControl {
        self.control
    }

    /// Free space in the transmit ring.
    pub fn tx_room(&mut self) -> Result<usize, RingCorrupt> {
        Ok(self.tx.free()? as usize)
    }

    /// Entries waiting in the receive ring.
    pub fn rx_pending(&mut self) -> Result<u32, RingCorrupt> {
        self.rx.available()
    }

    /// Receives up to `raw.len()` entries; decode them with [`Self::decode`].
    pub fn recv_raw(&mut self, raw: &mut [u32]) -> Result<usize, RingCorrupt> {
        self.rx.dequeue(raw)
    }

    /// Turns a received raw entry into a packet or an event. Entries that
    /// are neither (a platform bug) are reported as `None`.
    pub fn decode(&self, raw: u32) -> Option<RxEntry> {
        if raw & (EVENT_BIT | SPARE_BIT) == EVENT_BIT | SPARE_BIT {
            let index = raw & !(EVENT_BIT | SPARE_BIT);
            // Same reasoning as for packets below: the platform handed this
            // spare to us alone.
            self.own
                .contains(&index)
                .then(|| RxEntry::Spare(PktHandle::from_raw_owned(index)))
        } else if raw & (EVENT_BIT | BLOB_BIT) == EVENT_BIT | BLOB_BIT {
            let index = raw & !(EVENT_BIT | BLOB_BIT);
            self.own
                .contains(&index)
                .then(|| RxEntry::Blob(PktHandle::from_raw_owned(index)))
        } else if raw & EVENT_BIT != 0 {
            Some(RxEntry::Event(raw & !EVENT_BIT))
        } else if self.own.contains(&raw) || self.large.contains(&raw) {
            // The platform is the only producer on this ring and hands each
            // buffer to exactly one consumer, so this handle is ours alone.
            Some(RxEntry::Packet(PktHandle::from_raw_owned(raw)))
        } else {
            None
        }
    }

    /// Sends the whole batch back to the platform (the caller checked
    /// [`Self::tx_room`]); returns how many were sent.
    pub fn send(&mut self, batch: &mut HandleBatch) -> Result<usize, RingCorrupt> {
        let n = self.publish(batch.raw())?;
        batch.consume_front(n);
        Ok(n)
    }

    /// Echoes an event back to the platform after handling it.
    pub fn send_event(&mut self, event: u32) -> Result<bool, RingCorrupt> {
        Ok(self.publish(&[EVENT_BIT | (event & !EVENT_BIT)])? == 1)
    }

    /// Writes raw entries into the transmit ring (message buffers going
    /// back, see `link_blob`).
    pub(crate) fn send_entries(&mut self, raw: &[u32]) -> Result<usize, RingCorrupt> {
        self.publish(raw)
    }

    /// Writes arbitrary raw entries into the transmit ring. Exists so fault
    /// tests can act like a hostile NF; the platform must survive it.
    pub fn send_raw_for_fault_injection(&mut self, raw: &[u32]) -> Result<usize, RingCorrupt> {
        self.publish(raw)
    }

    /// Every write to the transmit ring: the entries, then the doorbell
    /// (after them, so the worker that takes the bell sees them).
    fn publish(&mut self, raw: &[u32]) -> Result<usize, RingCorrupt> {
        let n = self.tx.enqueue(raw)?;
        if n > 0 {
            self.bell.ring(self.bell_bit);
        }
        Ok(n)
    }

    /// Wakes the platform worker if it sleeps.
    pub fn wake_platform(&self) -> bool {
        self.platform_wake.wake()
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
