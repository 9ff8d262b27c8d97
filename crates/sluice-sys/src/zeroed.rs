//! Tables that start all-zero and cost nothing until they are touched.
//!
//! An NF's big tables (the conntrack slab and its TCP window lines, the
//! flow-id cache, hash slots) are sized when it is built, for the
//! platform's flow capacity. Filling them (`vec![T::default(); n]`) writes
//! every byte: ≈ 9 MB and ≈ 5 ms for a firewall at 65 536 flows on the
//! test VM, paid twice per config change (the compiler builds an NF to
//! validate its config, and a process NF builds the instance whose tables
//! `reconfigure` takes). Fresh anonymous memory is zero already and only
//! faulted in where it is touched, so a type whose all-zero bytes are a
//! valid value (`zerocopy::FromZeros`, derived and checked by the
//! compiler) takes it as it comes: building costs one `mmap`, and a table
//! costs memory as it fills. Like [`crate::vec_on_huge_pages`], the
//! mapping asks for transparent huge pages before the first touch.

use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

use zerocopy::FromZeros;

/// A fixed-length table of `T`, all zero at the start (see the module
/// docs). Derefs to a slice.
pub struct ZeroedTable<T: FromZeros> {
    ptr: NonNull<T>,
    len: usize,
    /// Bytes mapped (0: nothing mapped, for an empty table or a
    /// zero-sized `T`).
    mapped: usize,
}

// SAFETY: the table owns its mapping exclusively, like a `Vec<T>`; moving
// or sharing it between threads is as safe as moving or sharing the `T`s.
unsafe impl<T: FromZeros + Send> Send for ZeroedTable<T> {}
// SAFETY: as above; `&ZeroedTable` only hands out `&[T]`.
unsafe impl<T: FromZeros + Sync> Sync for ZeroedTable<T> {}

impl<T: FromZeros> ZeroedTable<T> {
    /// A table of `len` zero values.
    ///
    /// # Panics
    ///
    /// When the kernel refuses the mapping (as `Vec` aborts when the
    /// allocator does), or the size overflows.
    pub fn new(len: usize) -> ZeroedTable<T> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .expect("table size overflows");
        if bytes == 0 {
            return ZeroedTable {
                ptr: NonNull::dangling(),
                len,
                mapped: 0,
            };
        }
        assert!(
            std::mem::align_of::<T>() <= 4096,
            "a mapping is only page-aligned"
        );
        // SAFETY: a fresh private anonymous mapping: no address hint, no
        // file; the kernel picks a page-aligned range nobody else uses.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            panic!(
                "cannot map a table of {bytes} bytes: {}",
                std::io::Error::last_os_error()
            );
        }
        crate::huge::advise_huge_pages(p as usize, bytes);
        ZeroedTable {
            // `mmap` never returns null on success.
            ptr: NonNull::new(p.cast::<T>()).expect("mmap returned null"),
            len,
            mapped: bytes,
        }
    }
}

impl<T: FromZeros> Deref for ZeroedTable<T> {
    type Target = [T];

    #[inline(always)]
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` is aligned (page-aligned mapping, or dangling for a
        // zero-byte table) and covers `len` values that are initialised:
        // the mapping started all-zero, a valid `T` (`FromZeros`), and
        // only `T`s were written since.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: FromZeros> DerefMut for ZeroedTable<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` makes this the only view.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: FromZeros> Drop for ZeroedTable<T> {
    fn drop(&mut self) {
        if self.mapped != 0 {
            // `FromZeros` types may still own resources only if they are
            // not plain data; ours are, but drop them as a Vec would.
            // SAFETY: the slice is valid (see `deref_mut`) and dropped once.
            unsafe { std::ptr::drop_in_place(&mut **self as *mut [T]) };
            // SAFETY: the mapping made in `new`, unmapped once; nothing
            // borrows it (`&mut self`).
            unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.mapped) };
        }
    }
}

impl<T: FromZeros + std::fmt::Debug> std::fmt::Debug for ZeroedTable<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ZeroedTable<{}>[{}]",
            std::any::type_name::<T>(),
            self.len
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default, zerocopy::FromZeros)]
    #[repr(C, align(64))]
    struct Line {
        a: u64,
        b: [u8; 16],
        c: u16,
    }

    #[test]
    fn starts_zero_and_keeps_what_is_written() {
        let mut t = ZeroedTable::<Line>::new(100_000);
        assert_eq!(t.len(), 100_000);
        assert!(t.iter().all(|l| *l == Line::default()));
        assert_eq!(t.as_ptr() as usize % 64, 0);
        t[99_999].a = 7;
        t[3].b[15] = 9;
        assert_eq!(t[99_999].a, 7);
        assert_eq!(t[3].b[15], 9);
        t.fill(Line::default());
        assert!(t.iter().all(|l| *l == Line::default()));
    }

    #[test]
    fn empty_and_zero_sized_tables() {
        assert!(ZeroedTable::<u32>::new(0).is_empty());
        assert_eq!(ZeroedTable::<()>::new(5).len(), 5);
    }

    /// Building a large table touches none of it: its pages come when
    /// they are written.
    #[test]
    fn untouched_pages_cost_no_memory() {
        let rss_kb = || {
            std::fs::read_to_string("/proc/self/status")
                .unwrap_or_default()
                .lines()
                .find_map(|l| l.strip_prefix("RssAnon:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .unwrap_or(0)
        };
        let before = rss_kb();
        let t = ZeroedTable::<u64>::new(64 << 20); // 512 MiB
        let after = rss_kb();
        assert_eq!(t.len(), 64 << 20);
        // Other tests' threads may allocate meanwhile: far below 512 MiB.
        assert!(after < before + (64 << 10), "{before} kB -> {after} kB");
    }
}
