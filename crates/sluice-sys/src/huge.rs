//! Large lookup tables on transparent huge pages.
//!
//! NF tables (conntrack, NAT sessions, LPM) are read at random: at 100 k
//! entries every lookup misses the 4 KiB-page TLB as well as the cache.
//! With THP in `madvise` mode (the common distribution default) memory is
//! only backed by 2 MiB pages where the program asks, before first touch.

/// Huge page size on x86-64 and aarch64 (4 KiB base pages).
pub const HUGE_PAGE: usize = 2 << 20;

/// A vector of `len` copies of `value` whose buffer the kernel is asked to
/// back with transparent huge pages (asked before the first write, so the
/// first faults already get 2 MiB pages). Tables below 2 MiB, or a kernel
/// with THP off, get an ordinary vector: the advice is only a hint.
pub fn vec_on_huge_pages<T: Clone>(len: usize, value: T) -> Vec<T> {
    let mut v: Vec<T> = Vec::with_capacity(len);
    let spare = v.spare_capacity_mut();
    advise_huge_pages(spare.as_ptr() as usize, std::mem::size_of_val(spare));
    v.resize(len, value);
    v
}

/// A copy of `items` in a vector backed like [`vec_on_huge_pages`]: for
/// tables built by pushing, once their size is known.
pub fn copy_to_huge_pages<T: Clone>(items: &[T]) -> Vec<T> {
    let mut v: Vec<T> = Vec::with_capacity(items.len());
    let spare = v.spare_capacity_mut();
    advise_huge_pages(spare.as_ptr() as usize, std::mem::size_of_val(spare));
    v.extend_from_slice(items);
    v
}

/// Asks for huge pages on the whole 2 MiB pages inside `[addr, addr + len)`.
pub(crate) fn advise_huge_pages(addr: usize, len: usize) {
    let start = addr.next_multiple_of(HUGE_PAGE);
    let end = (addr + len) & !(HUGE_PAGE - 1);
    if end <= start {
        return;
    }
    // SAFETY: [start, end) lies inside a live allocation owned by the
    // caller's vector; MADV_HUGEPAGE only changes how future faults are
    // backed, never the contents or the validity of the mapping. Errors
    // (THP compiled out, EINVAL on exotic mappings) leave 4 KiB pages,
    // which is correct, only slower, so they are ignored.
    unsafe {
        libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
    }
}

/// Moves this process's private anonymous memory (heap and large
/// allocations) onto 2 MiB pages where whole aligned 2 MiB ranges of it
/// are in use, at once (`MADV_COLLAPSE`, Linux 6.1), and keeps later faults
/// there (`MADV_HUGEPAGE`); returns the bytes of the regions it asked for.
///
/// For a process that forks often, such as the NF template holding built
/// NFs: `fork` copies one page-table entry per 4 KiB page of private
/// memory (about 1 ms for the realistic chain's ~50 MB on 4 KiB pages)
/// but one per 2 MiB page. Shared mappings (the arena) are skipped: fork
/// copies none of their entries. A kernel without `MADV_COLLAPSE`, or
/// short of huge pages, leaves 4 KiB pages: slower forks, nothing wrong.
pub fn collapse_private_memory() -> usize {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return 0;
    };
    let mut asked = 0;
    for line in maps.lines() {
        let mut f = line.split_ascii_whitespace();
        let (Some(range), Some(perms)) = (f.next(), f.next()) else {
            continue;
        };
        // Anonymous (no path) or the brk heap; readable, writable, private.
        let path = f.nth(3).unwrap_or("");
        if perms != "rw-p" || !(path.is_empty() || path == "[heap]") {
            continue;
        }
        let Some((a, b)) = range.split_once('-') else {
            continue;
        };
        let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) else {
            continue;
        };
        let start = a.next_multiple_of(HUGE_PAGE);
        let end = b & !(HUGE_PAGE - 1);
        if end <= start {
            continue;
        }
        // SAFETY: [start, end) lay inside a private anonymous mapping of
        // this process when its maps were read just now. Both advices keep
        // contents and validity: MADV_HUGEPAGE changes how future faults
        // are backed, MADV_COLLAPSE copies resident 4 KiB pages into huge
        // pages with the same contents (holes read as zeroes, as they
        // did). Should another thread unmap the range meanwhile, madvise
        // fails (ENOMEM), and a new mapping there gets the same harmless
        // advice. Errors leave 4 KiB pages and are ignored.
        unsafe {
            let p = start as *mut libc::c_void;
            libc::madvise(p, end - start, libc::MADV_HUGEPAGE);
            libc::madvise(p, end - start, libc::MADV_COLLAPSE);
        }
        asked += end - start;
    }
    asked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collapsing_keeps_contents_and_covers_large_private_memory() {
        let mut v: Vec<u64> = Vec::with_capacity(4 * HUGE_PAGE / 8);
        v.extend((0..4 * HUGE_PAGE as u64 / 8).map(|i| i.wrapping_mul(0x9e37_79b9)));
        let asked = collapse_private_memory();
        // The vector's aligned middle is at least one whole 2 MiB page.
        assert!(asked >= HUGE_PAGE, "{asked}");
        assert!(v
            .iter()
            .enumerate()
            .all(|(i, &x)| x == (i as u64).wrapping_mul(0x9e37_79b9)));
    }

    #[test]
    fn gives_an_ordinary_initialised_vector() {
        let v = vec_on_huge_pages(3 * HUGE_PAGE / 8, 7u64);
        assert_eq!(v.len(), 3 * HUGE_PAGE / 8);
        assert!(v.iter().all(|&x| x == 7));
        assert_eq!(copy_to_huge_pages(&v), v);
        let small = vec_on_huge_pages(5, 1u8);
        assert_eq!(small, vec![1; 5]);
        assert!(vec_on_huge_pages(0, 0u32).is_empty());
    }

    #[test]
    fn large_tables_are_backed_by_huge_pages_when_thp_allows() {
        let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .unwrap_or_default();
        if !(thp.contains("[madvise]") || thp.contains("[always]")) {
            eprintln!("skipping: transparent huge pages are off ({})", thp.trim());
            return;
        }
        let anon_huge_kb = || {
            std::fs::read_to_string("/proc/self/smaps_rollup")
                .unwrap_or_default()
                .lines()
                .find_map(|l| l.strip_prefix("AnonHugePages:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .unwrap_or(0)
        };
        let before = anon_huge_kb();
        let v = vec_on_huge_pages(16 * HUGE_PAGE, 1u8);
        let after = anon_huge_kb();
        // At least some of the 32 MiB must be on 2 MiB pages (all of it
        // unless memory is too fragmented to compact).
        assert!(
            after >= before + 2048,
            "AnonHugePages {before} → {after} kB"
        );
        drop(v);
    }
}
