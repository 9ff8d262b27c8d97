//! Backing and mapping the arena's regions: one memfd per region, all
//! mapped side by side in one reserved range of addresses, so that
//! offsets from the base reach every region and a process can withdraw
//! one region (another trust domain's buffers) without touching the others.

use std::ops::Range;
use std::os::fd::OwnedFd;
use std::ptr::NonNull;

use rustix::fs::{fstat, ftruncate, memfd_create, MemfdFlags};
use rustix::mm::{mmap, mmap_anonymous, munmap, MapFlags, ProtFlags};

use super::layout::{Layout, HUGE_PAGE, PAGE};

/// The regions of `l` that each get a memfd, in address order: the
/// platform words, each domain's slots, each domain's buffers, then the
/// large buffers (if any).
pub(super) fn regions(l: &Layout) -> Vec<Range<usize>> {
    let mut r = Vec::with_capacity(2 * l.domains.len() + 2);
    r.push(0..l.slot_regions.first().map_or(l.buffers, |s| s.bytes.start));
    r.extend(l.slot_regions.iter().map(|s| s.bytes.clone()));
    r.extend(l.domains.iter().map(|d| d.bytes.clone()));
    if l.total > l.large {
        r.push(l.large..l.total);
    }
    r
}

/// Region alignment for huge or normal pages.
pub(super) fn page(huge: bool) -> usize {
    if huge {
        HUGE_PAGE
    } else {
        PAGE
    }
}

/// A sized memfd for each region.
pub(super) fn create_fds(regions: &[Range<usize>], huge: bool) -> std::io::Result<Vec<OwnedFd>> {
    let mut flags = MemfdFlags::CLOEXEC;
    if huge {
        flags |= MemfdFlags::HUGETLB | MemfdFlags::HUGE_2MB;
    }
    regions
        .iter()
        .map(|r| {
            let fd = memfd_create("sluice-arena", flags)?;
            ftruncate(&fd, r.len() as u64)?;
            Ok(fd)
        })
        .collect()
}

/// Checks that every descriptor holds its region (an attaching process
/// trusts nothing it was sent).
pub(super) fn check_fds(regions: &[Range<usize>], fds: &[OwnedFd]) -> Result<(), String> {
    if regions.len() != fds.len() {
        return Err(format!(
            "the arena has {} regions but {} descriptors came",
            regions.len(),
            fds.len()
        ));
    }
    for (r, fd) in regions.iter().zip(fds) {
        let size = fstat(fd).map_err(|e| e.to_string())?.st_size;
        if (size as u64) < r.len() as u64 {
            return Err(format!(
                "an arena descriptor holds {size} bytes, its region needs {}",
                r.len()
            ));
        }
    }
    Ok(())
}

/// Maps every region at its offset in one range of `total` bytes,
/// aligned to `page`; `populate` pre-faults them (the platform does, so
/// the packet path takes no page faults).
pub(super) fn map(
    regions: &[Range<usize>],
    fds: &[OwnedFd],
    total: usize,
    page: usize,
    populate: bool,
) -> std::io::Result<NonNull<u8>> {
    // Reserve `total` bytes at a `page`-aligned address first, so the
    // regions land side by side and nothing else can take the gaps.
    // SAFETY: a fresh private anonymous mapping that nothing references.
    let raw = unsafe {
        mmap_anonymous(
            std::ptr::null_mut(),
            total + page,
            ProtFlags::empty(),
            MapFlags::PRIVATE | MapFlags::NORESERVE,
        )
    }?;
    let start = super::layout::align(raw as usize, page);
    let (head, tail) = (start - raw as usize, page - (start - raw as usize));
    // SAFETY: the slack before and after the aligned range, inside the
    // reservation just made.
    unsafe {
        if head > 0 {
            munmap(raw, head)?;
        }
        munmap((start + total) as *mut _, tail)?;
    }
    let mut flags = MapFlags::SHARED | MapFlags::FIXED;
    if populate {
        flags |= MapFlags::POPULATE;
    }
    for (r, fd) in regions.iter().zip(fds) {
        // SAFETY: MAP_FIXED over our own reservation (`start..start +
        // total` covers every region); each fd holds its region's bytes.
        let mapped = unsafe {
            mmap(
                (start + r.start) as *mut _,
                r.len(),
                ProtFlags::READ | ProtFlags::WRITE,
                flags,
                fd,
                0,
            )
        };
        if let Err(e) = mapped {
            // SAFETY: our reservation and what was mapped over it.
            let _ = unsafe { munmap(start as *mut _, total) };
            return Err(e.into());
        }
    }
    NonNull::new(start as *mut u8).ok_or_else(|| std::io::Error::other("null mapping"))
}

/// Takes `range` (offsets from `base`) out of this process's view of the
/// arena: the shared pages are replaced, in one step, by inaccessible
/// private ones. Not simply unmapped, so the addresses stay reserved: a
/// stray read there faults, rather than landing in whatever the process
/// maps next (its allocator would happily reuse the gap).
///
/// # Safety
///
/// Nothing in this process may use those bytes as the arena's afterwards.
pub(super) unsafe fn withdraw(base: NonNull<u8>, range: Range<usize>) -> std::io::Result<()> {
    // SAFETY: MAP_FIXED over a range of the arena's own mapping, which
    // the caller no longer uses.
    unsafe {
        mmap_anonymous(
            base.as_ptr().add(range.start).cast(),
            range.len(),
            ProtFlags::empty(),
            MapFlags::PRIVATE | MapFlags::FIXED | MapFlags::NORESERVE,
        )
    }?;
    Ok(())
}
