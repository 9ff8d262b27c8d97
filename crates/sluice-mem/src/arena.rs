//! The shared packet arena: one memfd mapping holding packet buffers,
//! descriptor rings, NF control blocks and worker wake words.
//!
//! The platform creates the arena before it forks its NF template process,
//! so every NF process inherits the mapping at the same address and shared
//! structures can be reached from the base by offset. Only indices and
//! offsets are ever stored in shared memory, never pointers.
//!
//! With `hugepages: true` the memfd is created with `MFD_HUGETLB |
//! MFD_HUGE_2MB`; when the kernel has no free 2 MiB pages the arena falls back
//! to normal pages and says so in [`Arena::backing`].

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::AtomicU32;

use rustix::fs::{ftruncate, memfd_create, MemfdFlags};
use rustix::mm::{mmap, munmap, MapFlags, ProtFlags};

use crate::buffer::{Pkt, PktHandle, BUF_STRIDE, LARGE_STRIDE};
use crate::control::NfControl;
use crate::doorbell::BellWord;
use crate::ring::{RingRef, RingShared};
use crate::turn::CoreTurn;
use crate::wake::WakeWord;

const HUGE_PAGE: usize = 2 << 20;
const PAGE: usize = 4096;
const LINE: usize = 128;

/// CPUs with a turn word (the kernel's own `CPU_SETSIZE`).
pub const MAX_CORES: usize = 1024;

/// Sizes of everything the arena holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArenaConfig {
    /// Packet buffers (ordinary, 2 KiB of data room each).
    pub buffers: u32,
    /// Large packet buffers for GSO/GRO super-packets (64 KiB of data room
    /// each), indexed after the ordinary ones; 0 when no port takes
    /// offloads.
    pub large_buffers: u32,
    /// Slots per descriptor ring (power of two).
    pub ring_size: u32,
    /// NF slots (each gets a control block, a receive and a transmit ring).
    pub nf_slots: u32,
    /// Platform workers (each gets a wake word).
    pub workers: u32,
    /// Ask for 2 MiB huge pages.
    pub hugepages: bool,
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

#[derive(Debug, Clone, Copy)]
struct Offsets {
    wakes: usize,
    cores: usize,
    bells: usize,
    controls: usize,
    control_size: usize,
    rings: usize,
    ring_bytes: usize,
    buffers: usize,
    large: usize,
    total: usize,
}

/// Bell words for `nf_slots` slots.
fn bell_words(nf_slots: u32) -> usize {
    nf_slots.div_ceil(crate::doorbell::BELLS_PER_WORD) as usize
}

fn align(x: usize, a: usize) -> usize {
    x.div_ceil(a) * a
}

impl Offsets {
    fn compute(c: &ArenaConfig) -> Offsets {
        let wakes = PAGE;
        let cores = align(wakes + c.workers as usize * LINE, PAGE);
        let bells = align(cores + MAX_CORES * LINE, PAGE);
        let controls = align(bells + bell_words(c.nf_slots) * 8, PAGE);
        let control_size = align(std::mem::size_of::<NfControl>(), LINE);
        let rings = align(controls + c.nf_slots as usize * control_size, PAGE);
        let ring_bytes = align(
            std::mem::size_of::<RingShared>() + c.ring_size as usize * 4,
            LINE,
        );
        let buffers = align(rings + 2 * c.nf_slots as usize * ring_bytes, PAGE);
        let large = align(buffers + c.buffers as usize * BUF_STRIDE, PAGE);
        let total = large + c.large_buffers as usize * LARGE_STRIDE;
        Offsets {
            wakes,
            cores,
            bells,
            controls,
            control_size,
            rings,
            ring_bytes,
            buffers,
            large,
            total,
        }
    }
}

/// The mapped arena.
pub struct Arena {
    base: NonNull<u8>,
    /// The first packet buffer (`base` + `offsets.buffers`), so a handle's
    /// buffer is one multiply and add away.
    bufs: NonNull<[u8; BUF_STRIDE]>,
    len: usize,
    fd: OwnedFd,
    config: ArenaConfig,
    offsets: Offsets,
    backing: Backing,
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
        if !config.ring_size.is_power_of_two() || config.ring_size < 2 {
            return Err(ArenaError::Config(format!(
                "ring_size {} is not a power of two ≥ 2",
                config.ring_size
            )));
        }
        if config.buffers == 0 || config.buffers > (1 << 30) {
            return Err(ArenaError::Config(format!(
                "buffers {} out of range",
                config.buffers
            )));
        }
        if config.large_buffers > (1 << 16) {
            return Err(ArenaError::Config(format!(
                "large_buffers {} out of range (at most 65536)",
                config.large_buffers
            )));
        }
        let offsets = Offsets::compute(&config);
        let (fd, len, backing) = if config.hugepages {
            match Self::map_fd(offsets.total, true) {
                Ok((fd, len)) => (fd, len, Backing::HugePages),
                Err(e) => {
                    let (fd, len) = Self::map_fd(offsets.total, false).map_err(ArenaError::Os)?;
                    let why = format!(
                        "no 2 MiB huge pages available ({e}); using normal pages. Reserve some with \
                         `echo {} > /proc/sys/vm/nr_hugepages` as root",
                        offsets.total.div_ceil(HUGE_PAGE) + 8
                    );
                    (fd, len, Backing::NormalPagesFallback(why))
                }
            }
        } else {
            let (fd, len) = Self::map_fd(offsets.total, false).map_err(ArenaError::Os)?;
            (fd, len, Backing::NormalPages)
        };
        // SAFETY: mapping a memfd we just sized to `len` bytes, shared, at a
        // kernel-chosen address; MAP_POPULATE pre-faults it so the packet path
        // takes no page faults.
        let base = unsafe {
            mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED | MapFlags::POPULATE,
                &fd,
                0,
            )
        };
        let base = match base {
            Ok(p) => p,
            Err(e) if matches!(backing, Backing::HugePages) => {
                // Reserved but not populatable: retry on normal pages.
                let mut cfg = config;
                cfg.hugepages = false;
                let mut arena = Self::create(cfg)?;
                arena.backing = Backing::NormalPagesFallback(format!(
                    "huge pages could not be mapped ({e}); using normal pages"
                ));
                return Ok(arena);
            }
            Err(e) => return Err(ArenaError::Os(e.into())),
        };
        let base = NonNull::new(base.cast::<u8>())
            .ok_or_else(|| ArenaError::Config("null mapping".into()))?;
        // SAFETY: `offsets.buffers` < `offsets.total` <= `len`: inside the
        // mapping (byte arrays need no alignment).
        let bufs = unsafe { base.add(offsets.buffers) }.cast::<[u8; BUF_STRIDE]>();
        Ok(Arena {
            base,
            bufs,
            len,
            fd,
            config,
            offsets,
            backing,
        })
    }

    /// Maps an arena another process created (its memfd, received over a
    /// socket by an exec'd NF template), with the same `config` and so
    /// the same layout; `len` is the creator's [`Arena::size`]. Only
    /// offsets are stored in shared memory, so the mapping address may
    /// differ from the creator's. Pages are not pre-faulted: the
    /// attaching process touches only the slots of the NFs it starts.
    pub fn attach(
        fd: OwnedFd,
        config: ArenaConfig,
        len: usize,
        huge: bool,
    ) -> Result<Arena, ArenaError> {
        let offsets = Offsets::compute(&config);
        let stat = rustix::fs::fstat(&fd).map_err(|e| ArenaError::Os(e.into()))?;
        if len < offsets.total || (stat.st_size as u64) < len as u64 {
            return Err(ArenaError::Config(format!(
                "the arena descriptor holds {} bytes, the layout needs {}",
                stat.st_size, offsets.total
            )));
        }
        // SAFETY: mapping `len` bytes of a memfd that holds at least that
        // many (checked above), shared, at a kernel-chosen address.
        let base = unsafe {
            mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                &fd,
                0,
            )
        }
        .map_err(|e| ArenaError::Os(e.into()))?;
        let base = NonNull::new(base.cast::<u8>())
            .ok_or_else(|| ArenaError::Config("null mapping".into()))?;
        // SAFETY: `offsets.buffers` < `offsets.total` <= `len`: inside the
        // mapping.
        let bufs = unsafe { base.add(offsets.buffers) }.cast::<[u8; BUF_STRIDE]>();
        Ok(Arena {
            base,
            bufs,
            len,
            fd,
            config,
            offsets,
            backing: if huge {
                Backing::HugePages
            } else {
                Backing::NormalPages
            },
        })
    }

    /// The memfd behind the arena, to hand to a process that attaches
    /// with [`Arena::attach`].
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    fn map_fd(total: usize, huge: bool) -> std::io::Result<(OwnedFd, usize)> {
        let mut flags = MemfdFlags::CLOEXEC;
        let len = if huge {
            flags |= MemfdFlags::HUGETLB | MemfdFlags::HUGE_2MB;
            align(total, HUGE_PAGE)
        } else {
            align(total, PAGE)
        };
        let fd = memfd_create("sluice-arena", flags)?;
        ftruncate(&fd, len as u64)?;
        if huge {
            // hugetlbfs reserves at mmap time; probe now so the fallback
            // decision is made here rather than by a SIGBUS later.
            // SAFETY: temporary mapping of the fd we own, unmapped right away.
            let p = unsafe {
                mmap(
                    std::ptr::null_mut(),
                    len,
                    ProtFlags::READ | ProtFlags::WRITE,
                    MapFlags::SHARED,
                    &fd,
                    0,
                )
            }?;
            // SAFETY: `p` is the mapping of `len` bytes created just above.
            unsafe { munmap(p, len) }?;
        }
        Ok((fd, len))
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

    /// Number of ordinary packet buffers (indices `0..buffers()`).
    pub fn buffers(&self) -> u32 {
        self.config.buffers
    }

    /// Number of large packet buffers (indices `buffers()..total_buffers()`).
    pub fn large_buffers(&self) -> u32 {
        self.config.large_buffers
    }

    /// Every buffer, ordinary and large.
    pub fn total_buffers(&self) -> u32 {
        self.config.buffers + self.config.large_buffers
    }

    /// A typed reference to a `T` at byte `offset`.
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

    /// Turn word of CPU `core` (NF processes sharing that core take turns
    /// through it; see [`crate::turn`]).
    pub fn core_turn(&self, core: u32) -> &CoreTurn {
        assert!((core as usize) < MAX_CORES, "core {core} out of range");
        self.at(self.offsets.cores + core as usize * LINE)
    }

    /// Bell word `i` of the NF slots' doorbells (see [`crate::doorbell`]);
    /// slot `s` rings bit `s % 64` of word `s / 64`.
    pub fn bell_word(&self, i: usize) -> &BellWord {
        assert!(
            i < bell_words(self.config.nf_slots),
            "bell word {i} out of range"
        );
        self.at(self.offsets.bells + i * std::mem::size_of::<BellWord>())
    }

    /// How many bell words the NF slots' doorbells take.
    pub fn nf_slots_bells(&self) -> usize {
        bell_words(self.config.nf_slots)
    }

    /// Control block of NF slot `slot`.
    pub fn nf_control(&self, slot: u32) -> &NfControl {
        assert!(slot < self.config.nf_slots, "NF slot {slot} out of range");
        self.at(self.offsets.controls + slot as usize * self.offsets.control_size)
    }

    fn ring(&self, index: usize) -> RingRef<'_> {
        let off = self.offsets.rings + index * self.offsets.ring_bytes;
        let shared: &RingShared = self.at(off);
        let slots_off = off + std::mem::size_of::<RingShared>();
        let n = self.config.ring_size as usize;
        assert!(slots_off + n * 4 <= self.len);
        // SAFETY: `n` AtomicU32 slots lie in bounds (checked) at a 4-aligned
        // offset inside the mapping, which outlives the returned borrow.
        let slots = unsafe {
            std::slice::from_raw_parts(self.base.as_ptr().add(slots_off).cast::<AtomicU32>(), n)
        };
        RingRef::new(shared, slots).expect("ring_size validated as a power of two")
    }

    /// Receive ring of NF slot `slot` (platform → NF).
    pub fn nf_rx_ring(&self, slot: u32) -> RingRef<'_> {
        assert!(slot < self.config.nf_slots);
        self.ring(2 * slot as usize)
    }

    /// Transmit ring of NF slot `slot` (NF → platform).
    pub fn nf_tx_ring(&self, slot: u32) -> RingRef<'_> {
        assert!(slot < self.config.nf_slots);
        self.ring(2 * slot as usize + 1)
    }

    /// The buffer a handle owns, as a packet view.
    #[inline]
    pub fn pkt<'h>(&'h self, h: &'h mut PktHandle) -> Pkt<'h> {
        let i = h.index() as usize;
        if i < self.config.buffers as usize {
            // SAFETY: in bounds (buffer `i` of `config.buffers`, which start
            // at `bufs` and end within the mapping); `PktHandle` is unique
            // per buffer (issued by the pool, re-issued only after ownership
            // validation), so holding `&mut PktHandle` gives exclusive access
            // to these bytes in this process for the borrow's lifetime.
            let bytes = unsafe { &mut *self.bufs.as_ptr().add(i) };
            return Pkt::new(bytes);
        }
        self.large_pkt(i)
    }

    /// The view of large buffer `i` (an index past the ordinary ones).
    #[inline(never)]
    fn large_pkt(&self, i: usize) -> Pkt<'_> {
        let j = i - self.config.buffers as usize;
        assert!(
            j < self.config.large_buffers as usize,
            "handle from another arena"
        );
        let off = self.offsets.large + j * LARGE_STRIDE;
        debug_assert!(off + LARGE_STRIDE <= self.len);
        // SAFETY: large buffer `j` lies at `offsets.large + j * LARGE_STRIDE`,
        // inside the mapping (`j < large_buffers`, counted in
        // `offsets.total`). Exclusivity as for ordinary buffers: the caller
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
        let _ = unsafe { munmap(self.base.as_ptr().cast(), self.len) };
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn small() -> ArenaConfig {
        ArenaConfig {
            buffers: 256,
            ring_size: 64,
            nf_slots: 3,
            workers: 1,
            hugepages: false,
            large_buffers: 0,
        }
    }

    #[test]
    fn large_buffers_follow_the_ordinary_ones_and_do_not_overlap() {
        let mut c = small();
        c.large_buffers = 3;
        let a = Arena::create(c).unwrap();
        assert_eq!(a.total_buffers(), 259);
        let pool = crate::pool::BufferPool::for_arena(&a);
        let mut cache = crate::pool::PoolCache::new(&pool, 8);
        let mut last = cache.alloc().unwrap();
        let mut big: Vec<_> = (0..3).map(|_| cache.alloc_large().unwrap()).collect();
        assert!(cache.alloc_large().is_none());
        let mut ends = Vec::new();
        for h in big.iter_mut() {
            assert!(h.index() >= 256);
            let i = h.index() as u8;
            let mut p = a.pkt(h);
            assert!(p.is_large());
            p.reset(65_000);
            p.data_mut().fill(i);
            ends.push((p.data().as_ptr() as usize, p.data().len()));
        }
        // The last ordinary buffer ends before the first large one starts.
        let mut p = a.pkt(&mut last);
        p.reset(2048);
        p.data_mut().fill(0xee);
        for h in big.iter_mut() {
            let i = h.index() as u8;
            assert!(a.pkt(h).data().iter().all(|&b| b == i));
        }
        ends.sort();
        for w in ends.windows(2) {
            assert!(w[0].0 + w[0].1 <= w[1].0);
        }
        assert!(a.size() >= 256 * BUF_STRIDE + 3 * LARGE_STRIDE);
        for h in big {
            cache.free(h);
        }
        cache.free(last);
        drop(cache);
        assert_eq!(pool.audit().free, 259);
    }

    #[test]
    fn regions_do_not_overlap() {
        let a = Arena::create(small()).unwrap();
        let base = a.base.as_ptr() as usize;
        let ctl = |s| a.nf_control(s) as *const _ as usize - base;
        assert!(ctl(1) - ctl(0) >= std::mem::size_of::<NfControl>());
        assert!(a.worker_wake(0) as *const _ as usize - base < ctl(0));
        let bells = a.nf_slots_bells();
        let last_bell = a.bell_word(bells - 1) as *const _ as usize - base;
        assert!(
            a.bell_word(0) as *const _ as usize - base > a.core_turn(0) as *const _ as usize - base
        );
        assert!(last_bell + 8 <= ctl(0));
        assert_eq!(a.backing(), &Backing::NormalPages);
        assert!(a.size() >= 256 * BUF_STRIDE);
    }

    #[test]
    fn hugepages_fall_back_with_a_reason_when_unavailable() {
        let mut c = small();
        c.hugepages = true;
        let a = Arena::create(c).unwrap();
        match a.backing() {
            Backing::HugePages => {}
            Backing::NormalPagesFallback(why) => assert!(why.contains("huge pages")),
            Backing::NormalPages => panic!("asked for huge pages, got a silent normal-page arena"),
        }
    }

    #[test]
    fn an_attached_arena_sees_the_same_memory_at_the_same_offsets() {
        use std::sync::atomic::Ordering;
        let a = Arena::create(small()).unwrap();
        let fd = a.fd().try_clone_to_owned().unwrap();
        let b = Arena::attach(fd, small(), a.size(), false).unwrap();
        a.nf_control(2).pid.store(4242, Ordering::Relaxed);
        assert_eq!(b.nf_control(2).pid.load(Ordering::Relaxed), 4242);
        let mut cfg = small();
        cfg.buffers *= 4;
        let fd = a.fd().try_clone_to_owned().unwrap();
        assert!(matches!(
            Arena::attach(fd, cfg, a.size(), false),
            Err(ArenaError::Config(_))
        ));
    }

    #[test]
    fn bad_config_is_an_error() {
        let mut c = small();
        c.ring_size = 100;
        assert!(matches!(Arena::create(c), Err(ArenaError::Config(_))));
    }
}
