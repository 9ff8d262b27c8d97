//! The shared packet arena: packet buffers, descriptor rings, NF control
//! blocks, turn and doorbell words and worker wake words, in one range of
//! addresses.
//!
//! The platform creates the arena before it starts its NF templates; a
//! template maps the same memory (its descriptors come over a socket) and
//! every NF process inherits the template's mapping, so shared structures
//! are reached from the base by offset. Only indices and offsets are ever
//! stored in shared memory, never pointers.
//!
//! The arena is made of regions, each backed by its own memfd (see
//! [`layout`] for where each lives and why): the platform's words, one
//! region of NF slots (control blocks, rings, turn and doorbell words) and
//! one of packet buffers per trust domain, and the large buffers. An NF of
//! a trust domain withdraws the other domains' slots and buffers from its
//! address space ([`Arena::keep_domain`]) before its first packet.
//!
//! With `hugepages: true` the memfds are created with `MFD_HUGETLB |
//! MFD_HUGE_2MB`; when the kernel has no free 2 MiB pages the arena falls
//! back to normal pages and says so in [`Arena::backing`].

mod dma;
mod layout;
mod map;
mod slots;

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;

pub use dma::DmaRegion;
pub use layout::{DomainRegion, MAX_CORES, MAX_DOMAINS};
use layout::{Layout, SlotRegion, LINE};

use crate::buffer::{Pkt, PktHandle, BUF_STRIDE, LARGE_STRIDE};
use crate::wake::WakeWord;

/// Sizes of everything the arena holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ArenaConfig {
    /// Packet buffers of the platform's own trust domain (domain 0, where
    /// ports receive; ordinary, 2 KiB of data room each).
    pub buffers: u32,
    /// Packet buffers of named trust domains 1, 2, …: entry `k` is
    /// domain `k + 1`'s; the first 0 ends the list.
    pub domain_buffers: [u32; MAX_DOMAINS - 1],
    /// Large packet buffers for GSO/GRO super-packets (64 KiB of data room
    /// each, domain 0's), indexed after the ordinary ones; 0 when no port
    /// takes offloads.
    pub large_buffers: u32,
    /// Slots per descriptor ring (power of two).
    pub ring_size: u32,
    /// NF slots of each trust domain (each slot gets a control block, a
    /// receive and a transmit ring; every domain has this many).
    pub nf_slots: u32,
    /// Platform workers (each gets a wake word).
    pub workers: u32,
    /// Ask for 2 MiB huge pages.
    pub hugepages: bool,
}

impl ArenaConfig {
    /// Buffers asked for per trust domain, the platform's first.
    pub fn domain_sizes(&self) -> Vec<u32> {
        let named = self.domain_buffers.iter().take_while(|&&n| n > 0);
        std::iter::once(self.buffers)
            .chain(named.copied())
            .collect()
    }
}

/// What backs the arena's memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backing {
    /// 2 MiB huge pages.
    HugePages,
    /// Normal pages because huge pages were not asked for.
    NormalPages,
    /// Normal pages because huge pages were asked for but unavailable (why).
    NormalPagesFallback(String),
}

/// Failure to create the arena.
#[derive(Debug)]
pub enum ArenaError {
    /// A size in the config is invalid.
    Config(String),
    /// The kernel refused the memory.
    Os(std::io::Error),
}

impl std::fmt::Display for ArenaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArenaError::Config(m) => write!(f, "invalid arena configuration: {m}"),
            ArenaError::Os(e) => write!(f, "cannot create the packet arena: {e}"),
        }
    }
}

impl std::error::Error for ArenaError {}

/// The mapped arena.
pub struct Arena {
    base: NonNull<u8>,
    /// The first packet buffer (`base` + `layout.buffers`), so a handle's
    /// buffer is one multiply and add away.
    bufs: NonNull<[u8; BUF_STRIDE]>,
    len: usize,
    /// One memfd per region (see [`layout`]), in address order.
    fds: Vec<OwnedFd>,
    config: ArenaConfig,
    offsets: Layout,
    backing: Backing,
    /// Ordinary buffers mapped in this process: all of them, or one trust
    /// domain's after [`Arena::keep_domain`].
    kept: std::ops::Range<u32>,
    /// Whether the large buffers are mapped in this process.
    large_kept: bool,
    /// The one trust domain this process keeps (`None`: all of them).
    kept_domain: Option<usize>,
    /// The slot region looked at first: the kept domain's, or the
    /// platform's in a process that keeps all (held here, not behind the
    /// layout's vector, as it is on the doorbell and ring paths).
    fast: SlotRegion,
}

// SAFETY: the arena is a fixed mapping; all shared structures in it are
// atomics, and buffer bytes are reached only through `&mut PktHandle`
// (exclusive ownership), so sharing `&Arena` across threads is sound.
unsafe impl Send for Arena {}
// SAFETY: see `Send` above.
unsafe impl Sync for Arena {}

impl Arena {
    /// Creates and maps a zeroed arena.
    pub fn create(config: ArenaConfig) -> Result<Arena, ArenaError> {
        Self::check(&config)?;
        if !config.hugepages {
            return Self::build(config, false, Backing::NormalPages);
        }
        Self::build(config, true, Backing::HugePages).or_else(|e| {
            let layout = Layout::compute(&config, map::page(false));
            let why = format!(
                "no 2 MiB huge pages available ({e}); using normal pages. Reserve some with \
                 `echo {} > /proc/sys/vm/nr_hugepages` as root",
                layout.total.div_ceil(layout::HUGE_PAGE) + 8
            );
            Self::build(config, false, Backing::NormalPagesFallback(why))
        })
    }

    fn check(config: &ArenaConfig) -> Result<(), ArenaError> {
        if !config.ring_size.is_power_of_two() || config.ring_size < 2 {
            return Err(ArenaError::Config(format!(
                "ring_size {} is not a power of two ≥ 2",
                config.ring_size
            )));
        }
        let total: u64 = config.domain_sizes().iter().map(|&n| u64::from(n)).sum();
        // Each domain but the last fills its last page, and a hole may
        // follow it: less than a huge page of buffers more per domain.
        let rounding = (MAX_DOMAINS * (layout::HUGE_PAGE / BUF_STRIDE + 1)) as u64;
        if config.buffers == 0 || total + rounding > (1 << 30) {
            return Err(ArenaError::Config(format!(
                "buffers {total} out of range (1 to about 2^30 in all trust domains)"
            )));
        }
        if config.large_buffers > (1 << 16) {
            return Err(ArenaError::Config(format!(
                "large_buffers {} out of range (at most 65536)",
                config.large_buffers
            )));
        }
        Ok(())
    }

    fn build(config: ArenaConfig, huge: bool, backing: Backing) -> Result<Arena, ArenaError> {
        let offsets = Layout::compute(&config, map::page(huge));
        let regions = map::regions(&offsets);
        let fds = map::create_fds(&regions, huge).map_err(ArenaError::Os)?;
        // MAP_POPULATE: hugetlbfs reserves at mmap time, so a shortage
        // shows here (and falls back) rather than as a SIGBUS later.
        let base = map::map(&regions, &fds, offsets.total, map::page(huge), true)
            .map_err(ArenaError::Os)?;
        Ok(Self::assemble(base, fds, config, offsets, backing))
    }

    fn assemble(
        base: NonNull<u8>,
        fds: Vec<OwnedFd>,
        config: ArenaConfig,
        offsets: Layout,
        backing: Backing,
    ) -> Arena {
        // SAFETY: `offsets.buffers` < `offsets.total`, the mapping's
        // length: inside the mapping (byte arrays need no alignment).
        let bufs = unsafe { base.add(offsets.buffers) }.cast::<[u8; BUF_STRIDE]>();
        Arena {
            base,
            bufs,
            len: offsets.total,
            fds,
            config,
            kept: 0..offsets.ordinary,
            large_kept: true,
            kept_domain: None,
            fast: offsets.slot_regions[0].clone(),
            offsets,
            backing,
        }
    }

    /// Maps an arena another process created (its memfds, received over a
    /// socket by an exec'd NF template), with the same `config` and so
    /// the same layout; `len` is the creator's [`Arena::size`]. Only
    /// offsets are stored in shared memory, so the mapping address may
    /// differ from the creator's. Pages are not pre-faulted: the
    /// attaching process touches only the slots of the NFs it starts.
    pub fn attach(
        fds: Vec<OwnedFd>,
        config: ArenaConfig,
        len: usize,
        huge: bool,
    ) -> Result<Arena, ArenaError> {
        Self::check(&config)?;
        let offsets = Layout::compute(&config, map::page(huge));
        if len != offsets.total {
            return Err(ArenaError::Config(format!(
                "the creator's arena is {len} bytes, this layout {}",
                offsets.total
            )));
        }
        let regions = map::regions(&offsets);
        map::check_fds(&regions, &fds).map_err(ArenaError::Config)?;
        let base = map::map(&regions, &fds, offsets.total, map::page(huge), false)
            .map_err(ArenaError::Os)?;
        let backing = if huge {
            Backing::HugePages
        } else {
            Backing::NormalPages
        };
        Ok(Self::assemble(base, fds, config, offsets, backing))
    }

    /// The memfds behind the arena, in order, to hand to a process that
    /// attaches with [`Arena::attach`].
    pub fn fds(&self) -> Vec<BorrowedFd<'_>> {
        self.fds.iter().map(AsFd::as_fd).collect()
    }

    /// Keeps only trust domain `domain`'s NF slots and packet buffers
    /// mapped in this process: every other domain's regions (and, outside
    /// domain 0, the large buffers) are withdrawn, so those packets, rings
    /// and control blocks are not in this process's memory at all, and
    /// [`Arena::pkt`] and the slot accessors refuse (panic on) them from
    /// now on. For an NF process before its first packet; the platform
    /// itself keeps everything.
    pub fn keep_domain(&mut self, domain: usize) -> std::io::Result<()> {
        let (Some(own), Some(slots)) = (
            self.offsets.domains.get(domain).cloned(),
            self.offsets.slot_regions.get(domain).cloned(),
        ) else {
            return Err(std::io::Error::other(format!("no trust domain {domain}")));
        };
        // First narrow what `pkt` and the slot accessors hand out, then
        // withdraw: `&mut self` means no view of a buffer or slot is
        // alive now.
        self.kept = own.indices.start..own.indices.end;
        self.kept_domain = Some(domain);
        self.fast = slots.clone();
        self.large_kept &= domain == 0;
        let others = (self.offsets.domains.iter().map(|r| &r.bytes))
            .zip(self.offsets.slot_regions.iter().map(|r| &r.bytes))
            .enumerate()
            .filter(|&(d, _)| d != domain);
        for (_, (buffers, slots)) in others {
            for r in [buffers, slots] {
                // SAFETY: no view of these bytes is alive (`&mut self`)
                // and nothing hands them out any more (`kept`, `fast`,
                // `kept_domain`).
                unsafe { map::withdraw(self.base, r.clone()) }?;
            }
        }
        if !self.large_kept && self.offsets.total > self.offsets.large {
            // SAFETY: as above (`large_kept` is false).
            unsafe { map::withdraw(self.base, self.offsets.large..self.offsets.total) }?;
        }
        Ok(())
    }

    /// Trust domains (the platform's own first).
    pub fn domains(&self) -> &[DomainRegion] {
        &self.offsets.domains
    }

    /// The configuration the arena was built for.
    pub fn config(&self) -> &ArenaConfig {
        &self.config
    }

    /// What backs the memory (and why, after a fallback).
    pub fn backing(&self) -> &Backing {
        &self.backing
    }

    /// Mapped size in bytes.
    pub fn size(&self) -> usize {
        self.len
    }

    /// Ordinary packet buffer indices (`0..buffers()`, every trust
    /// domain's, with the holes between domains, which no pool hands out).
    pub fn buffers(&self) -> u32 {
        self.offsets.ordinary
    }

    /// Number of large packet buffers (indices `buffers()..total_buffers()`).
    pub fn large_buffers(&self) -> u32 {
        self.config.large_buffers
    }

    /// Buffers a pool hands out: every trust domain's and the large ones
    /// (the holes between domains excluded).
    pub fn capacity(&self) -> u32 {
        let ordinary: usize = self.offsets.domains.iter().map(|d| d.indices.len()).sum();
        ordinary as u32 + self.config.large_buffers
    }

    /// Buffer indices, ordinary and large (holes included).
    pub fn total_buffers(&self) -> u32 {
        self.offsets.ordinary + self.config.large_buffers
    }

    /// A typed reference to a `T` at byte `offset`.
    #[inline]
    fn at<T>(&self, offset: usize) -> &T {
        assert!(
            offset + std::mem::size_of::<T>() <= self.len
                && offset % std::mem::align_of::<T>() == 0
        );
        // SAFETY: in bounds and aligned (checked above); the mapping lives as
        // long as `self`; every T used here (WakeWord, BellWord, NfControl,
        // RingShared, AtomicU32) is made of atomics for which all-zero bytes are valid, so
        // shared references are sound even with other processes writing.
        unsafe { &*self.base.as_ptr().add(offset).cast::<T>() }
    }

    /// Wake word of platform worker `w`.
    pub fn worker_wake(&self, w: u32) -> &WakeWord {
        assert!(w < self.config.workers, "worker {w} out of range");
        self.at(self.offsets.wakes + w as usize * LINE)
    }

    /// The buffer a handle owns, as a packet view.
    #[inline]
    pub fn pkt<'h>(&'h self, h: &'h mut PktHandle) -> Pkt<'h> {
        let i = h.index();
        // One compare, as before domains: `kept` is every ordinary buffer
        // in the platform, one domain's in an NF process.
        if i.wrapping_sub(self.kept.start) < self.kept.end - self.kept.start {
            let i = i as usize;
            // SAFETY: in bounds and mapped (buffer `i` of the ordinary ones
            // this process keeps, which lie between `bufs` and the end of
            // the mapping; `keep_domain` withdraws only others); `PktHandle` is unique
            // per buffer (issued by the pool, re-issued only after ownership
            // validation), so holding `&mut PktHandle` gives exclusive access
            // to these bytes in this process for the borrow's lifetime.
            let bytes = unsafe { &mut *self.bufs.as_ptr().add(i) };
            return Pkt::new(bytes);
        }
        self.large_pkt(i as usize)
    }

    /// The view of large buffer `i` (an index past the ordinary ones).
    #[inline(never)]
    fn large_pkt(&self, i: usize) -> Pkt<'_> {
        assert!(
            self.large_kept && i >= self.offsets.ordinary as usize,
            "buffer {i} is not mapped in this process (another trust domain's)"
        );
        let j = i - self.offsets.ordinary as usize;
        assert!(
            j < self.config.large_buffers as usize,
            "handle from another arena"
        );
        let off = self.offsets.large + j * LARGE_STRIDE;
        debug_assert!(off + LARGE_STRIDE <= self.len);
        // SAFETY: large buffer `j` lies at `offsets.large + j * LARGE_STRIDE`,
        // inside the mapping (`j < large_buffers`, counted in
        // `offsets.total`), and is mapped here (`large_kept`, checked). Exclusivity as for ordinary buffers: the caller
        // holds the buffer's unique `&mut PktHandle` for the borrow, which
        // `pkt` ties to the returned view.
        let bytes =
            unsafe { std::slice::from_raw_parts_mut(self.base.as_ptr().add(off), LARGE_STRIDE) };
        Pkt::over(bytes)
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping created in `create`; no
        // borrows of it outlive `self`.
        let _ = unsafe { rustix::mm::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
