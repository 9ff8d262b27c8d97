//! The buffer pool and its ownership table.
//!
//! The pool and the table live in the platform's private memory, never in
//! the shared arena: an NF process can scribble over packet bytes in its
//! trust domain but cannot forge who owns a buffer. Every buffer has exactly
//! one owner at any time: the pool (free, in the global stack or a worker's
//! cache), the platform (a worker or port holds it), or one NF slot (queued to
//! it, being processed by it, or queued back). That makes buffer accounting
//! (free + held + at NFs = capacity) checkable at any moment ([`BufferPool::audit`])
//! and makes reclaiming a dead NF's buffers a scan for its tag.
//!
//! Allocation goes through a per-worker [`PoolCache`]; the global stack is
//! touched (under a mutex) once per `cache_size/2` operations, so the lock is
//! off the per-packet path.
//!
//! Large buffers (super-packets, see `buffer.rs`) are a second class with
//! indices after the ordinary ones, their own global stack and their own
//! small per-cache stack; they share the ownership table, so every rule
//! above (one owner, exact audits, reclaim by tag, NF quotas) covers them.
//! `free` tells the classes apart by one compare of the index.
//!
//! Trust domains (see `arena::layout`) split the ordinary buffers into
//! ranges of indices, each with its own global stack and per-cache stack:
//! [`PoolCache::alloc`] takes the platform's (domain 0), [`PoolCache::alloc_in`]
//! a named domain's, and `free` finds a buffer's domain from its index
//! (one compare for domain 0's). Indices between two domains' ranges are
//! holes: owned for ever by [`OWNER_RESERVED`], never handed out, not
//! counted in the capacity.

use crate::buffer::PktHandle;
use crate::sync::{AtomicU32, Mutex, Ordering};

/// Owner tag: the buffer is free (in the pool).
pub const OWNER_FREE: u32 = 0;
/// Owner tag: held by platform code (a worker or a port).
pub const OWNER_PLATFORM: u32 = 1;
const OWNER_NF_BASE: u32 = 2;
/// Owner tag of a hole between two trust domains' buffers (never handed
/// out; no NF tag can equal it: spare and message bits never go together).
pub const OWNER_RESERVED: u32 = u32::MAX;

/// Owner tag of NF slot `slot`.
pub fn owner_nf(slot: u32) -> u32 {
    OWNER_NF_BASE + slot
}

/// Marks a buffer given to an NF as a spare for it to allocate from, not a
/// packet: when it comes back it is a packet the NF originated, and if the
/// NF dies holding it, no packet was lost.
const SPARE_TAG_BIT: u32 = 1 << 31;

/// Owner tag of a spare buffer held by NF slot `slot`.
pub fn owner_nf_spare(slot: u32) -> u32 {
    owner_nf(slot) | SPARE_TAG_BIT
}

/// Marks a buffer lent to an NF to carry a message (a new config) rather
/// than a packet: it comes back with the NF's answer, and if the NF dies
/// holding it, no packet was lost.
const BLOB_TAG_BIT: u32 = 1 << 30;

/// Owner tag of a message buffer lent to NF slot `slot`.
pub fn owner_nf_blob(slot: u32) -> u32 {
    owner_nf(slot) | BLOB_TAG_BIT
}

/// What a handle returned by an NF turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// A packet the platform had given the NF.
    Packet,
    /// A spare the NF filled: a packet it originated.
    Originated,
    /// Not a buffer this NF owns.
    Invalid,
}

/// The platform's pool of buffer indices plus the ownership table.
pub struct BufferPool {
    /// Buffers it hands out (both classes, holes excluded).
    capacity: u32,
    /// Ordinary buffers: indices below this; large buffers from here on.
    small: u32,
    /// Domain 0's indices end here (the common case's one compare).
    first_end: u32,
    /// Each trust domain's indices and free stack, the platform's first.
    domains: Box<[Domain]>,
    free_large: Mutex<Vec<u32>>,
    owners: Box<[AtomicU32]>,
}

struct Domain {
    indices: std::ops::Range<u32>,
    free: Mutex<Vec<u32>>,
}

/// Large buffers a cache takes from or gives back to the global stack at
/// once: a super-packet carries up to 64 KiB, so the lock is amortised over
/// far more bytes than for ordinary buffers even at this size.
const LARGE_REFILL: usize = 4;

/// A snapshot of buffer ownership.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Audit {
    /// Buffers in the pool.
    pub free: u32,
    /// Buffers held by platform code.
    pub platform: u32,
    /// Buffers held by NF slots (queued to, processed by, or queued from).
    pub at_nfs: u32,
    /// Total buffers.
    pub capacity: u32,
}

impl BufferPool {
    /// A pool owning ordinary buffer indices `0..capacity`, all free.
    pub fn new(capacity: u32) -> Self {
        Self::with_large(capacity, 0)
    }

    /// A pool owning ordinary buffers `0..small` and large buffers
    /// `small..small + large`, all free.
    pub fn with_large(small: u32, large: u32) -> Self {
        Self::with_domains(std::slice::from_ref(&(0..small)), large)
    }

    /// A pool owning one range of ordinary indices per trust domain (in
    /// increasing order; gaps between them are holes) and `large` large
    /// buffers after the last, all free.
    pub fn with_domains(domains: &[std::ops::Range<u32>], large: u32) -> Self {
        let small = domains.last().map_or(0, |d| d.end);
        let end = small + large;
        let owners: Box<[AtomicU32]> = (0..end).map(|_| AtomicU32::new(OWNER_RESERVED)).collect();
        for i in domains.iter().cloned().flatten().chain(small..end) {
            owners[i as usize].store(OWNER_FREE, Ordering::Relaxed);
        }
        let counted: u32 = domains.iter().map(|d| d.len() as u32).sum();
        BufferPool {
            capacity: counted + large,
            small,
            first_end: domains.first().map_or(0, |d| d.end),
            domains: domains
                .iter()
                .map(|d| Domain {
                    indices: d.clone(),
                    free: Mutex::new(d.clone().rev().collect()),
                })
                .collect(),
            free_large: Mutex::new((small..end).rev().collect()),
            owners,
        }
    }

    /// The pool for every buffer of `arena`, ordinary and large, by trust
    /// domain.
    #[cfg(not(loom))]
    pub fn for_arena(arena: &crate::arena::Arena) -> Self {
        let domains: Vec<_> = arena.domains().iter().map(|d| d.indices.clone()).collect();
        Self::with_domains(&domains, arena.large_buffers())
    }

    /// Trust domains (at least the platform's).
    pub fn domains(&self) -> usize {
        self.domains.len()
    }

    /// The trust domain of a buffer the pool handed out (large buffers
    /// are domain 0's).
    #[inline]
    pub fn domain_of(&self, index: u32) -> usize {
        if index < self.first_end || index >= self.small {
            return 0;
        }
        self.domains
            .iter()
            .position(|d| index < d.indices.end)
            .unwrap_or(0)
    }

    /// Number of buffers (both classes).
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Number of large buffers.
    pub fn large_capacity(&self) -> u32 {
        self.capacity - self.small
    }

    /// Whether buffer `index` is a large one.
    #[inline]
    pub fn is_large(&self, index: u32) -> bool {
        index >= self.small
    }

    /// Current owner tag of buffer `index` (`None` if out of range).
    pub fn owner(&self, index: u32) -> Option<u32> {
        self.owners
            .get(index as usize)
            .map(|o| o.load(Ordering::Relaxed))
    }

    #[inline]
    pub(crate) fn set_owner(&self, index: u32, tag: u32) {
        self.owners[index as usize].store(tag, Ordering::Relaxed);
    }

    /// Takes `raw` back from NF slot tag `tag` (packet or spare); the
    /// validation of every handle an NF returns.
    #[inline]
    pub(crate) fn claim_packet_or_spare(&self, raw: u32, tag: u32) -> Claim {
        match self.owners.get(raw as usize) {
            Some(o) => {
                let t = o.load(Ordering::Relaxed);
                if t == tag {
                    o.store(OWNER_PLATFORM, Ordering::Relaxed);
                    Claim::Packet
                } else if t == tag | SPARE_TAG_BIT {
                    o.store(OWNER_PLATFORM, Ordering::Relaxed);
                    Claim::Originated
                } else {
                    Claim::Invalid
                }
            }
            None => Claim::Invalid,
        }
    }

    /// Takes back a message buffer lent with `blob_tag`; false if the NF
    /// does not hold that buffer as a message.
    pub(crate) fn claim_blob(&self, raw: u32, blob_tag: u32) -> bool {
        match self.owners.get(raw as usize) {
            Some(o) if o.load(Ordering::Relaxed) == blob_tag => {
                o.store(OWNER_PLATFORM, Ordering::Relaxed);
                true
            }
            _ => false,
        }
    }

    /// Indices currently owned by `tag` (a scan: for reclaim and audits only).
    pub(crate) fn owned_by(&self, tag: u32) -> impl Iterator<Item = u32> + '_ {
        self.owners
            .iter()
            .enumerate()
            .filter(move |(_, o)| o.load(Ordering::Relaxed) == tag)
            .map(|(i, _)| i as u32)
    }

    /// Counts buffers by owner. Exact when no worker is running.
    pub fn audit(&self) -> Audit {
        let mut a = Audit::default();
        self.tally(0..self.owners.len() as u32, &mut a);
        a
    }

    /// [`Self::audit`] per trust domain, the platform's first (which
    /// also counts the large buffers). Exact when no worker is running.
    pub fn audit_domains(&self) -> Vec<Audit> {
        let mut out: Vec<Audit> = (self.domains.iter())
            .map(|d| {
                let mut a = Audit::default();
                self.tally(d.indices.clone(), &mut a);
                a
            })
            .collect();
        if let Some(first) = out.first_mut() {
            self.tally(self.small..self.owners.len() as u32, first);
        }
        out
    }

    /// Adds the buffers of `indices` to `a` by owner; holes between
    /// domains are no one's and not counted.
    fn tally(&self, indices: std::ops::Range<u32>, a: &mut Audit) {
        for i in indices {
            match self.owners[i as usize].load(Ordering::Relaxed) {
                OWNER_RESERVED => continue,
                OWNER_FREE => a.free += 1,
                OWNER_PLATFORM => a.platform += 1,
                _ => a.at_nfs += 1,
            }
            a.capacity += 1;
        }
    }

    /// Ordinary buffers in the global stacks of every domain (excludes
    /// worker caches).
    pub fn global_free(&self) -> usize {
        self.domains
            .iter()
            .map(|d| d.free.lock().map(|f| f.len()).unwrap_or(0))
            .sum()
    }

    /// Large buffers in the global stack (excludes worker caches).
    pub fn global_free_large(&self) -> usize {
        self.free_large.lock().map(|f| f.len()).unwrap_or(0)
    }

    fn take(stack: &Mutex<Vec<u32>>, out: &mut Vec<u32>, n: usize) {
        let Ok(mut free) = stack.lock() else {
            return;
        };
        let k = n.min(free.len());
        let at = free.len() - k;
        out.extend(free.drain(at..));
    }

    fn give(stack: &Mutex<Vec<u32>>, from: &mut Vec<u32>, n: usize) {
        let n = n.min(from.len());
        let at = from.len() - n;
        if let Ok(mut free) = stack.lock() {
            free.extend(from.drain(at..));
        }
    }
}

/// A worker's private cache in front of the global pool.
pub struct PoolCache<'p> {
    pool: &'p BufferPool,
    /// Domain 0's buffers.
    local: Vec<u32>,
    refill: usize,
    local_large: Vec<u32>,
    /// Named domains' buffers (entry `k`: domain `k + 1`).
    local_named: Vec<Vec<u32>>,
}

impl<'p> PoolCache<'p> {
    /// A cache that refills and flushes `refill` buffers at a time.
    pub fn new(pool: &'p BufferPool, refill: usize) -> Self {
        let refill = refill.max(1);
        PoolCache {
            pool,
            local: Vec::with_capacity(refill * 3),
            refill,
            local_large: Vec::with_capacity(LARGE_REFILL * 3),
            local_named: (1..pool.domains.len())
                .map(|_| Vec::with_capacity(refill * 3))
                .collect(),
        }
    }

    /// The pool behind this cache.
    pub fn pool(&self) -> &'p BufferPool {
        self.pool
    }

    /// Takes a free buffer of the platform's domain, or `None` if it has
    /// none left.
    #[inline]
    pub fn alloc(&mut self) -> Option<PktHandle> {
        if self.local.is_empty() {
            BufferPool::take(&self.pool.domains[0].free, &mut self.local, self.refill);
        }
        let raw = self.local.pop()?;
        debug_assert_eq!(self.pool.owner(raw), Some(OWNER_FREE));
        self.pool.set_owner(raw, OWNER_PLATFORM);
        Some(PktHandle::from_raw_owned(raw))
    }

    /// Buffers of trust domain `domain` this cache can hand out now (0
    /// for no such domain), refilling from the domain's global stack first
    /// when it holds fewer than `want`: the one lock [`Self::alloc_in`]
    /// would take anyway. The worker feeds an NF of another domain no more
    /// packets than this, so packets wait upstream for the domain's
    /// buffers, as for ring space, instead of being dropped at the
    /// boundary.
    pub fn available_in(&mut self, domain: usize, want: usize) -> usize {
        let (refill, pool) = (self.refill.max(want), self.pool);
        let Some(local) = self.stack(domain) else {
            return 0;
        };
        if local.len() < want {
            BufferPool::take(&pool.domains[domain].free, local, refill);
        }
        local.len()
    }

    /// This cache's stack of trust domain `domain`'s buffers, if the pool
    /// has that domain.
    fn stack(&mut self, domain: usize) -> Option<&mut Vec<u32>> {
        match domain {
            0 => Some(&mut self.local),
            d => self.local_named.get_mut(d - 1),
        }
    }

    /// Takes a free buffer of trust domain `domain`, or `None` if it has
    /// none left (or there is no such domain).
    #[inline]
    pub fn alloc_in(&mut self, domain: usize) -> Option<PktHandle> {
        if domain == 0 {
            return self.alloc();
        }
        let (refill, pool) = (self.refill, self.pool);
        let local = self.stack(domain)?;
        if local.is_empty() {
            BufferPool::take(&pool.domains[domain].free, local, refill);
        }
        let raw = local.pop()?;
        debug_assert_eq!(self.pool.owner(raw), Some(OWNER_FREE));
        self.pool.set_owner(raw, OWNER_PLATFORM);
        Some(PktHandle::from_raw_owned(raw))
    }

    /// Takes a free large buffer (for a super-packet), or `None` if there
    /// is none (the pool has no large class, or all are in use).
    #[inline]
    pub fn alloc_large(&mut self) -> Option<PktHandle> {
        if self.local_large.is_empty() {
            BufferPool::take(&self.pool.free_large, &mut self.local_large, LARGE_REFILL);
        }
        let raw = self.local_large.pop()?;
        debug_assert_eq!(self.pool.owner(raw), Some(OWNER_FREE));
        self.pool.set_owner(raw, OWNER_PLATFORM);
        Some(PktHandle::from_raw_owned(raw))
    }

    /// Returns a buffer (of either class) to the pool.
    #[inline]
    pub fn free(&mut self, h: PktHandle) {
        let raw = h.into_raw();
        self.pool.set_owner(raw, OWNER_FREE);
        if raw >= self.pool.first_end {
            return self.free_other(raw);
        }
        self.local.push(raw);
        if self.local.len() >= self.refill * 2 {
            BufferPool::give(&self.pool.domains[0].free, &mut self.local, self.refill);
        }
    }

    /// Frees a large buffer or a named domain's.
    #[inline(never)]
    fn free_other(&mut self, raw: u32) {
        if raw >= self.pool.small {
            self.local_large.push(raw);
            if self.local_large.len() >= LARGE_REFILL * 2 {
                BufferPool::give(&self.pool.free_large, &mut self.local_large, LARGE_REFILL);
            }
            return;
        }
        let (d, refill, pool) = (self.pool.domain_of(raw), self.refill, self.pool);
        let Some(local) = self.stack(d) else {
            return;
        };
        local.push(raw);
        if local.len() >= refill * 2 {
            BufferPool::give(&pool.domains[d].free, local, refill);
        }
    }

    /// Buffers sitting in this cache (both classes).
    pub fn cached(&self) -> usize {
        let named: usize = self.local_named.iter().map(Vec::len).sum();
        self.local.len() + self.local_large.len() + named
    }
}

impl Drop for PoolCache<'_> {
    fn drop(&mut self) {
        let n = self.local.len();
        BufferPool::give(&self.pool.domains[0].free, &mut self.local, n);
        for (k, local) in self.local_named.iter_mut().enumerate() {
            let n = local.len();
            BufferPool::give(&self.pool.domains[k + 1].free, local, n);
        }
        let n = self.local_large.len();
        BufferPool::give(&self.pool.free_large, &mut self.local_large, n);
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
