//! The flow table: 5-tuple → flow entry, both directions of a connection
//! sharing one entry.
//!
//! Entries live in a slab whose index is the **flow id** NFs see: stable for
//! the flow's whole life, so NFs can index per-flow state by it. A separate
//! open-addressing index (linear probing, ≤ 50 % load, backward-shift
//! deletion, so no tombstones accumulate) maps the symmetric hash and the
//! canonical key to the slab index. Everything is allocated at start; the
//! packet path never allocates. Measured cost (`benches/flow_table.rs`,
//! docs/benchmarks.md): a hit in a 100 k-flow table ≈ 75 ns (two cache
//! misses: index slot, then entry); the whole ingress step on hot flows
//! (key + hash + lookup) ≈ 50 ns. With many live flows the worker keys a
//! whole batch first and prefetches slots, then entries
//! ([`FlowTable::prefetch_slot`], [`FlowTable::prefetch_entry`]), so a
//! batch's misses overlap.
//!
//! A flow ends on TCP RST, a short time after a FIN (or at once when a
//! SYN opens a new connection on its 5-tuple after a FIN), or after an
//! idle timeout. An ending flow leaves the index at once (new packets with the
//! same 5-tuple start a new flow) but keeps its slab slot in the `Closing`
//! state until its end marker has passed every NF of its chain, so no NF can
//! confuse the old flow's end with a new flow that reused the id.

use sluice_packet::flow::FlowKey;

/// Flow id for packets that have no 5-tuple (ARP and other non-IP frames).
pub const FLOWLESS: u32 = u32::MAX;

/// Lifecycle of a slab slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowState {
    /// Unused.
    Free,
    /// Carrying traffic.
    Active,
    /// Ended; its end marker is travelling the chain.
    Closing,
}

/// One flow.
#[derive(Debug, Clone)]
pub struct FlowEntry {
    /// Canonical key (both directions map to it).
    pub key: FlowKey,
    /// Symmetric hash of the key.
    pub hash: u32,
    /// Chain the flow was classified into.
    pub chain: u16,
    /// Lifecycle state.
    pub state: FlowState,
    /// When the flow expires unless more traffic arrives (ns).
    pub expires_ns: u64,
    /// Bit 0: FIN seen in the canonical direction; bit 1: the other.
    pub fins: u8,
    /// Position of the end marker on its route while `Closing`.
    pub marker_hop: u16,
    /// The NF the end marker waits at (the hop's NF, or the flow's
    /// replica when the hop is a replica set).
    pub marker_nf: u16,
    /// The route the end marker walks (the chain's route when the flow
    /// ended; the chain may have moved on since).
    pub marker_route: u16,
    /// Packets seen.
    pub packets: u64,
}

/// Why a packet could not get a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowError {
    /// The classifier found no chain.
    NoChain,
    /// The table is full.
    Full,
}

/// Flow-table counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowStats {
    /// Flows created.
    pub created: u64,
    /// Flows ended (any reason).
    pub ended: u64,
    /// Flows that ended by idle timeout.
    pub idle_expired: u64,
    /// Packets refused because the table was full.
    pub full: u64,
}

/// The table.
pub struct FlowTable {
    index: Vec<u64>,
    mask: usize,
    entries: Vec<FlowEntry>,
    /// Per flow id, a lower bound of its entry's `expires_ns` (`u64::MAX`
    /// unless active): the ageing sweep reads this compact array (8 B per
    /// flow) and looks at an entry only once its bound has passed. Hits
    /// refresh the entry alone, so a packet touches two lines, not three.
    expiry: Vec<u64>,
    free: Vec<u32>,
    /// Ids of the `Closing` flows, and where each id is in it
    /// (`closing_at[id]`, meaningful only while it is closing), so that
    /// listing them (a crashed NF's end markers) costs the closing flows,
    /// not a walk of the table: at 65,536 entries the walk held up every
    /// restart, and the worker's packets, for ~0.4 ms.
    closing: Vec<u32>,
    closing_at: Vec<u32>,
    hand: usize,
    /// Flows that saw a FIN, with their linger's deadline, oldest first:
    /// the sweep (`hand`) visits a slot about once a second, too late for
    /// a short `close_timeout_ms` (a `per_flow` instance is recycled when
    /// its flow ends). At most [`LINGER_QUEUE`] entries; flows beyond
    /// that wait for the sweep.
    lingering: std::collections::VecDeque<(u32, u64)>,
    idle_ns: u64,
    close_ns: u64,
    stats: FlowStats,
}

const EMPTY: u64 = 0;

/// Longest [`FlowTable::lingering`] queue (1 MiB).
const LINGER_QUEUE: usize = 65_536;

// An entry fills 72 bytes (the prefetch threshold in `worker/ingress.rs`
// assumes it); `marker_nf` took padding, not a new word.
const _: () = assert!(std::mem::size_of::<FlowEntry>() <= 72);

fn pack(hash: u32, id: u32) -> u64 {
    (hash as u64) << 32 | (id as u64 + 1)
}

impl FlowTable {
    /// A table for `capacity` flows (a power of two) with the given idle
    /// timeout and close timeout (time a flow lingers after FIN).
    pub fn new(capacity: u32, idle_ns: u64, close_ns: u64) -> Self {
        let capacity = capacity.max(2).next_power_of_two();
        let slots = capacity as usize * 2;
        let blank = FlowEntry {
            key: FlowKey::default(),
            hash: 0,
            chain: 0,
            state: FlowState::Free,
            expires_ns: 0,
            fins: 0,
            marker_hop: 0,
            marker_nf: u16::MAX,
            marker_route: 0,
            packets: 0,
        };
        // Huge pages: every packet reads an index slot and an entry at
        // random, which at 100 k flows also misses the 4 KiB-page TLB.
        FlowTable {
            index: sluice_sys::vec_on_huge_pages(slots, EMPTY),
            mask: slots - 1,
            entries: sluice_sys::vec_on_huge_pages(capacity as usize, blank),
            expiry: sluice_sys::vec_on_huge_pages(capacity as usize, u64::MAX),
            free: (0..capacity).rev().collect(),
            closing: Vec::with_capacity(capacity as usize),
            closing_at: vec![0; capacity as usize],
            hand: 0,
            lingering: std::collections::VecDeque::with_capacity(
                (capacity as usize * 2).min(LINGER_QUEUE),
            ),
            idle_ns,
            close_ns,
            stats: FlowStats::default(),
        }
    }

    /// Maximum number of flows (flow ids are below this).
    pub fn capacity(&self) -> u32 {
        self.entries.len() as u32
    }

    /// Flows currently active or closing.
    pub fn live(&self) -> u32 {
        self.capacity() - self.free.len() as u32
    }

    /// Counters.
    pub fn stats(&self) -> FlowStats {
        self.stats
    }

    /// The entry for flow `id`.
    pub fn entry(&self, id: u32) -> Option<&FlowEntry> {
        self.entries.get(id as usize)
    }

    /// Mutable entry for flow `id`.
    pub fn entry_mut(&mut self, id: u32) -> Option<&mut FlowEntry> {
        self.entries.get_mut(id as usize)
    }

    /// Finds the active flow with canonical key `key`.
    #[inline]
    pub fn find(&self, key: &FlowKey, hash: u32) -> Option<u32> {
        let mut pos = hash as usize & self.mask;
        loop {
            let v = self.index[pos];
            if v == EMPTY {
                return None;
            }
            if (v >> 32) as u32 == hash {
                let id = (v as u32) - 1;
                if self.entries[id as usize].key == *key {
                    return Some(id);
                }
            }
            pos = (pos + 1) & self.mask;
        }
    }

    /// Starts loading the index slot where the flow with symmetric hash
    /// `hash` is looked up first. With [`FlowTable::prefetch_entry`], lets
    /// a batch's lookups overlap their cache misses instead of taking them
    /// one after another.
    #[inline]
    pub fn prefetch_slot(&self, hash: u32) {
        sluice_sys::prefetch(&self.index[hash as usize & self.mask]);
    }

    /// Starts loading the entry of the flow with hash `hash`, found in the
    /// index slot [`FlowTable::prefetch_slot`] loaded earlier. A hint: a
    /// hash collision or a flow further along its probe run is simply not
    /// prefetched.
    #[inline]
    pub fn prefetch_entry(&self, hash: u32) {
        let v = self.index[hash as usize & self.mask];
        if v != EMPTY && (v >> 32) as u32 == hash {
            if let Some(e) = self.entries.get((v as u32).wrapping_sub(1) as usize) {
                sluice_sys::prefetch(e);
            }
        }
    }

    /// Looks up the flow of a packet (its canonical key and symmetric hash)
    /// or creates it with the chain `classify` picks. Refreshes the idle
    /// timer. Returns the flow id.
    #[inline]
    pub fn lookup_or_insert(
        &mut self,
        key: &FlowKey,
        hash: u32,
        now_ns: u64,
        classify: impl FnOnce() -> Option<u16>,
    ) -> Result<u32, FlowError> {
        if let Some(id) = self.find(key, hash) {
            let e = &mut self.entries[id as usize];
            e.packets += 1;
            if e.fins == 0 {
                // Only the entry, already in cache: `expiry` is a lower
                // bound the sweep catches up (see `expire`), which saves
                // a third cache miss per packet.
                e.expires_ns = now_ns + self.idle_ns;
            }
            return Ok(id);
        }
        let chain = classify().ok_or(FlowError::NoChain)?;
        let Some(id) = self.free.pop() else {
            self.stats.full += 1;
            return Err(FlowError::Full);
        };
        let e = &mut self.entries[id as usize];
        *e = FlowEntry {
            key: *key,
            hash,
            chain,
            state: FlowState::Active,
            expires_ns: now_ns + self.idle_ns,
            fins: 0,
            marker_hop: 0,
            marker_nf: u16::MAX,
            marker_route: 0,
            packets: 1,
        };
        self.expiry[id as usize] = now_ns + self.idle_ns;
        let mut pos = hash as usize & self.mask;
        while self.index[pos] != EMPTY {
            pos = (pos + 1) & self.mask;
        }
        self.index[pos] = pack(hash, id);
        self.stats.created += 1;
        Ok(id)
    }

    /// Records TCP flags of a packet of flow `id` travelling in the
    /// canonical direction (`forward`) or the reverse. Returns true if the
    /// flow must end now (RST, or a FIN without a linger).
    #[inline]
    pub fn note_tcp_flags(
        &mut self,
        id: u32,
        forward: bool,
        fin: bool,
        rst: bool,
        now_ns: u64,
    ) -> bool {
        let close_ns = self.close_ns;
        let Some(e) = self.entries.get_mut(id as usize) else {
            return false;
        };
        if rst || (fin && close_ns == 0) {
            return true;
        }
        if fin {
            let bit = if forward { 1 } else { 2 };
            let first = e.fins & bit == 0;
            e.fins |= bit;
            // Linger briefly so the closing handshake's last packets still
            // belong to this flow, as conntrack's TIME_WAIT does.
            e.expires_ns = now_ns + close_ns;
            self.expiry[id as usize] = e.expires_ns;
            // Once per direction, so the queue holds at most two per flow
            // and never grows past its reserve.
            if first && self.lingering.len() < self.lingering.capacity() {
                self.lingering.push_back((id, e.expires_ns));
            }
        }
        false
    }

    fn unindex(&mut self, id: u32) {
        let e = &self.entries[id as usize];
        let target = pack(e.hash, id);
        let mut i = e.hash as usize & self.mask;
        while self.index[i] != target {
            if self.index[i] == EMPTY {
                return;
            }
            i = (i + 1) & self.mask;
        }
        // Backward-shift deletion: pull later members of the probe run
        // into the hole unless their home slot lies cyclically in (i, j].
        let mut j = i;
        loop {
            j = (j + 1) & self.mask;
            let v = self.index[j];
            if v == EMPTY {
                break;
            }
            let home = (v >> 32) as usize & self.mask;
            let stays = if i <= j {
                i < home && home <= j
            } else {
                i < home || home <= j
            };
            if !stays {
                self.index[i] = v;
                i = j;
            }
        }
        self.index[i] = EMPTY;
    }

    /// Ends flow `id` now: it leaves the index and enters `Closing`.
    /// Returns false if it was not active.
    pub fn close(&mut self, id: u32) -> bool {
        match self.entries.get(id as usize) {
            Some(e) if e.state == FlowState::Active => {}
            _ => return false,
        }
        self.unindex(id);
        self.expiry[id as usize] = u64::MAX;
        let e = &mut self.entries[id as usize];
        e.state = FlowState::Closing;
        e.marker_hop = 0;
        self.closing_at[id as usize] = self.closing.len() as u32;
        self.closing.push(id);
        self.stats.ended += 1;
        true
    }

    /// Returns a `Closing` flow's slot to the free list (its end marker has
    /// left the chain).
    pub fn release(&mut self, id: u32) {
        if let Some(e) = self.entries.get_mut(id as usize) {
            if e.state == FlowState::Closing {
                e.state = FlowState::Free;
                self.free.push(id);
                let at = self.closing_at[id as usize] as usize;
                self.closing.swap_remove(at);
                if let Some(&moved) = self.closing.get(at) {
                    self.closing_at[moved as usize] = at as u32;
                }
            }
        }
    }

    /// Examines up to `budget` slots round-robin and closes expired active
    /// flows, pushing their ids into `ended`.
    pub fn expire(&mut self, now_ns: u64, budget: usize, ended: &mut Vec<u32>) {
        // Lingering flows first, on time: the queue is in deadline order
        // (one linger for all), and an entry whose flow's deadline moved
        // (a later FIN) goes to the back with its new one.
        while let Some(&(id, deadline)) = self.lingering.front() {
            if deadline > now_ns {
                break;
            }
            self.lingering.pop_front();
            let e = &self.entries[id as usize];
            if e.state != FlowState::Active || e.fins == 0 {
                continue; // ended already (its id may name a new flow)
            }
            if e.expires_ns > now_ns {
                self.lingering.push_back((id, e.expires_ns));
                continue;
            }
            self.close(id);
            ended.push(id);
        }
        let n = self.entries.len();
        for _ in 0..budget.min(n) {
            let id = self.hand as u32;
            self.hand = if self.hand + 1 == n { 0 } else { self.hand + 1 };
            if self.expiry[id as usize] > now_ns {
                continue;
            }
            let e = &self.entries[id as usize];
            if e.state == FlowState::Active && e.expires_ns > now_ns {
                // Traffic since `expiry` was written moved the deadline.
                self.expiry[id as usize] = e.expires_ns;
                continue;
            }
            if e.state == FlowState::Active {
                if e.fins == 0 {
                    self.stats.idle_expired += 1;
                }
                self.close(id);
                ended.push(id);
            }
        }
    }

    /// Ids of flows whose end marker is on its way.
    pub fn closing_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.closing.iter().copied()
    }

    /// Moves flow `id` to chain `chain` (its own chain was removed).
    pub fn set_chain(&mut self, id: u32, chain: u16) {
        if let Some(e) = self.entries.get_mut(id as usize) {
            e.chain = chain;
        }
    }

    /// Every active flow: its id and chain.
    pub fn active(&self) -> impl Iterator<Item = (u32, u16)> + '_ {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.state == FlowState::Active)
            .map(|(i, e)| (i as u32, e.chain))
    }

    /// Ids of all active flows (for shutdown).
    pub fn active_ids(&self) -> Vec<u32> {
        (0..self.entries.len() as u32)
            .filter(|&i| self.entries[i as usize].state == FlowState::Active)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use sluice_packet::IpProtocol;
    use std::collections::HashMap;

    fn key(i: u32) -> FlowKey {
        FlowKey::new(
            std::net::Ipv4Addr::from(0x0a00_0000 + i).into(),
            std::net::Ipv4Addr::new(10, 1, 0, 1).into(),
            (i % 60000) as u16 + 1,
            80,
            IpProtocol::UDP,
        )
        .canonical()
    }

    #[test]
    fn both_directions_share_one_flow() {
        let mut t = FlowTable::new(16, 1000, 10);
        let k = FlowKey::new(
            "10.0.0.1".parse().unwrap(),
            "10.0.0.2".parse().unwrap(),
            1234,
            80,
            IpProtocol::TCP,
        );
        let a = t
            .lookup_or_insert(&k.canonical(), k.symmetric_hash(), 0, || Some(3))
            .unwrap();
        let r = k.reversed();
        let b = t
            .lookup_or_insert(&r.canonical(), r.symmetric_hash(), 1, || panic!("must hit"))
            .unwrap();
        assert_eq!(a, b);
        assert_eq!(t.entry(a).unwrap().chain, 3);
        assert_eq!(t.entry(a).unwrap().packets, 2);
    }

    #[test]
    fn full_table_refuses_and_counts() {
        let mut t = FlowTable::new(4, 1000, 10);
        for i in 0..4 {
            let k = key(i);
            t.lookup_or_insert(&k, k.symmetric_hash(), 0, || Some(0))
                .unwrap();
        }
        let k = key(99);
        assert_eq!(
            t.lookup_or_insert(&k, k.symmetric_hash(), 0, || Some(0)),
            Err(FlowError::Full)
        );
        assert_eq!(t.stats().full, 1);
    }

    #[test]
    fn idle_flows_expire_and_ids_are_reused_only_after_release() {
        let mut t = FlowTable::new(4, 100, 10);
        let k = key(1);
        let id = t
            .lookup_or_insert(&k, k.symmetric_hash(), 0, || Some(0))
            .unwrap();
        let mut ended = Vec::new();
        t.expire(50, 4, &mut ended);
        assert!(ended.is_empty());
        t.expire(100, 4, &mut ended);
        assert_eq!(ended, vec![id]);
        assert_eq!(
            t.find(&k, k.symmetric_hash()),
            None,
            "closed flows leave the index"
        );
        assert_eq!(t.live(), 1, "closing flows keep their slot");
        t.release(id);
        assert_eq!(t.live(), 0);
    }

    #[test]
    fn without_a_linger_a_fin_ends_the_flow_at_once() {
        let mut t = FlowTable::new(4, 1_000_000, 0);
        let k = key(1);
        let id = t
            .lookup_or_insert(&k, k.symmetric_hash(), 0, || Some(0))
            .unwrap();
        assert!(t.note_tcp_flags(id, true, true, false, 5));
        assert!(
            !t.note_tcp_flags(id, true, false, false, 6),
            "no FIN, no end"
        );
    }

    #[test]
    fn fin_shortens_the_timeout() {
        let mut t = FlowTable::new(4, 1_000_000, 10);
        let k = key(1);
        let id = t
            .lookup_or_insert(&k, k.symmetric_hash(), 0, || Some(0))
            .unwrap();
        assert!(!t.note_tcp_flags(id, true, true, false, 5));
        let mut ended = Vec::new();
        t.expire(15, 4, &mut ended);
        assert_eq!(ended, vec![id]);
        assert!(
            t.note_tcp_flags(id, true, false, true, 5),
            "RST ends at once"
        );
    }

    /// A lingering flow ends at its deadline even when the sweep looks
    /// elsewhere (budget 0), once; a later FIN moves its deadline.
    #[test]
    fn a_fin_ends_the_flow_at_its_linger_deadline_without_the_sweep() {
        let mut t = FlowTable::new(1024, 1_000_000, 10);
        let (a, b) = (key(1), key(2));
        let ia = t
            .lookup_or_insert(&a, a.symmetric_hash(), 0, || Some(0))
            .unwrap();
        let ib = t
            .lookup_or_insert(&b, b.symmetric_hash(), 0, || Some(0))
            .unwrap();
        t.note_tcp_flags(ia, true, true, false, 5);
        t.note_tcp_flags(ib, true, true, false, 6);
        t.note_tcp_flags(ib, false, true, false, 12);
        let mut ended = Vec::new();
        t.expire(14, 0, &mut ended);
        assert!(ended.is_empty(), "before the deadline");
        t.expire(15, 0, &mut ended);
        assert_eq!(ended, vec![ia]);
        t.expire(16, 0, &mut ended);
        assert_eq!(ended, vec![ia], "b's second FIN moved its deadline to 22");
        t.expire(22, 0, &mut ended);
        assert_eq!(ended, vec![ia, ib]);
        t.expire(1_000, 0, &mut ended);
        assert_eq!(ended, vec![ia, ib], "once each");
    }

    #[test]
    fn traffic_after_the_first_sweep_look_defers_expiry() {
        let mut t = FlowTable::new(4, 100, 10);
        let k = key(1);
        let hit = |t: &mut FlowTable, now| {
            t.lookup_or_insert(&k, k.symmetric_hash(), now, || Some(0))
                .unwrap()
        };
        let id = hit(&mut t, 0);
        hit(&mut t, 90);
        let mut ended = Vec::new();
        t.expire(150, 4, &mut ended);
        assert!(ended.is_empty(), "the hit at 90 keeps it until 190");
        t.expire(189, 4, &mut ended);
        assert!(ended.is_empty());
        t.expire(190, 4, &mut ended);
        assert_eq!(ended, vec![id]);
    }

    proptest! {
        /// Ageing with hits, FINs and sweeps in any order ends exactly the
        /// flows whose last deadline has passed (hits move only the entry's
        /// deadline; the sweep's compact bound catches up).
        #[test]
        fn expiry_matches_a_model(
            ops in proptest::collection::vec((0u32..8, 0u8..4, 0u64..40), 1..300)
        ) {
            const IDLE: u64 = 100;
            const CLOSE: u64 = 10;
            let mut t = FlowTable::new(8, IDLE, CLOSE);
            // Model: key → (id, deadline, FIN seen).
            let mut model: HashMap<u32, (u32, u64, bool)> = HashMap::new();
            let mut now = 0u64;
            let mut ended = Vec::new();
            for (k, op, dt) in ops {
                now += dt;
                let fk = key(k);
                match op {
                    0 | 1 => {
                        let id = t.lookup_or_insert(&fk, fk.symmetric_hash(), now, || Some(0)).unwrap();
                        let entry = match model.get(&k) {
                            Some(&(old, d, true)) => (old, d, true),
                            _ => (id, now + IDLE, false),
                        };
                        prop_assert_eq!(entry.0, id);
                        model.insert(k, entry);
                    }
                    2 => {
                        if let Some(&(id, _, _)) = model.get(&k) {
                            prop_assert!(!t.note_tcp_flags(id, true, true, false, now));
                            model.insert(k, (id, now + CLOSE, true));
                        }
                    }
                    _ => {
                        ended.clear();
                        t.expire(now, t.capacity() as usize, &mut ended);
                        let mut want: Vec<u32> = model
                            .iter()
                            .filter(|(_, &(_, d, _))| d <= now)
                            .map(|(_, &(id, _, _))| id)
                            .collect();
                        want.sort_unstable();
                        ended.sort_unstable();
                        prop_assert_eq!(&ended, &want);
                        for &id in &ended {
                            t.release(id);
                        }
                        model.retain(|_, &mut (_, d, _)| d > now);
                    }
                }
            }
        }

        /// The list of closing flows is always exactly the entries in
        /// `Closing`, under inserts, closes and releases in any order.
        #[test]
        fn closing_ids_are_the_closing_entries(
            ops in proptest::collection::vec((0u32..16, 0u8..3), 1..300)
        ) {
            let mut t = FlowTable::new(16, u64::MAX / 2, 1);
            let mut ids: HashMap<u32, u32> = HashMap::new();
            for (k, op) in ops {
                let fk = key(k);
                match op {
                    0 => {
                        if let Ok(id) = t.lookup_or_insert(&fk, fk.symmetric_hash(), 0, || Some(0)) {
                            ids.insert(k, id);
                        }
                    }
                    1 => {
                        if let Some(&id) = ids.get(&k) {
                            t.close(id);
                        }
                    }
                    _ => {
                        if let Some(id) = ids.remove(&k) {
                            t.release(id);
                        }
                    }
                }
                let mut listed: Vec<u32> = t.closing_ids().collect();
                let mut scanned: Vec<u32> = (t.entries.iter().enumerate())
                    .filter(|(_, e)| e.state == FlowState::Closing)
                    .map(|(i, _)| i as u32)
                    .collect();
                listed.sort_unstable();
                scanned.sort_unstable();
                prop_assert_eq!(listed, scanned);
            }
        }

        /// The table agrees with a HashMap model under random inserts and
        /// closes (this exercises backward-shift deletion in long runs).
        #[test]
        fn matches_a_model(ops in proptest::collection::vec((0u32..64, any::<bool>()), 1..400)) {
            let mut t = FlowTable::new(64, u64::MAX / 2, 1);
            let mut model: HashMap<u32, u32> = HashMap::new();
            for (k, close) in ops {
                let fk = key(k);
                // Force collisions: hash only 3 bits of entropy.
                let h = fk.symmetric_hash() & 7;
                if close {
                    if let Some(id) = model.remove(&k) {
                        prop_assert!(t.close(id));
                        t.release(id);
                    }
                } else {
                    let id = t.lookup_or_insert(&fk, h, 0, || Some(0)).unwrap();
                    if let Some(&old) = model.get(&k) { prop_assert_eq!(old, id); }
                    model.insert(k, id);
                }
                for (&mk, &id) in &model {
                    let fk = key(mk);
                    prop_assert_eq!(t.find(&fk, fk.symmetric_hash() & 7), Some(id));
                }
                prop_assert_eq!(t.live() as usize, model.len());
            }
        }
    }
}
