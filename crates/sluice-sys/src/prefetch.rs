//! Software prefetch: start loading a cache line that will be needed soon,
//! without waiting for it.
//!
//! Tables with 100 k entries do not fit in L2, so an NF that looks up one
//! random entry per packet misses the cache on every packet. Issuing the
//! prefetches of a whole batch first lets those misses overlap; unlike a
//! plain read used as a "touch", a prefetch does not hold up retirement
//! while the line is on its way.

/// Hints the CPU to bring the cache line holding `*value` into all cache
/// levels. Has no effect on program state; a no-op off x86-64.
#[inline(always)]
pub fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: PREFETCHT0 is part of SSE, which every x86-64 CPU has; it
        // only hints the cache and never faults or writes, and `value` is a
        // valid reference anyway.
        unsafe { _mm_prefetch::<_MM_HINT_T0>((value as *const T).cast::<i8>()) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = value;
    }
}

#[cfg(test)]
mod tests {
    use super::prefetch;

    #[test]
    fn prefetch_leaves_values_unchanged() {
        let table: Vec<u64> = (0..1024).collect();
        for entry in table.iter().step_by(8) {
            prefetch(entry);
        }
        assert_eq!(table.iter().sum::<u64>(), 1023 * 1024 / 2);
    }
}
