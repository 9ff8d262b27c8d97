//! A cheap clock for charging time to NFs batch by batch.
//!
//! `clock_gettime` costs ≈ 20 ns through the vDSO on this VM and the
//! platform read it twice per NF batch, which was 7 % of a 3-NF inline
//! chain (perf, `bench chain --length 3 --isolation inline`). The TSC
//! (`rdtsc`, invariant where the kernel's clocksource is `tsc`) costs a few
//! ns; cycles are converted to ns with a factor calibrated once against the
//! monotonic clock.

use std::sync::OnceLock;

/// Current cycle count (x86-64: the TSC; elsewhere: monotonic ns).
#[inline]
pub fn cycles() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC reads a counter; it has no memory effects and is
        // available on every x86-64 CPU (user mode unless CR4.TSD, which
        // Linux does not set for ordinary processes).
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        crate::monotonic_ns()
    }
}

static NS_PER_CYCLE_Q32: OnceLock<u64> = OnceLock::new();

/// Measures the cycle clock against the monotonic clock (≈ 2 ms, once per
/// process; forked children inherit the result). Call before the packet
/// path starts; [`cycles_to_ns`] calibrates on first use otherwise.
pub fn calibrate_cycles() {
    NS_PER_CYCLE_Q32.get_or_init(|| {
        let (t0, c0) = (crate::monotonic_ns(), cycles());
        std::thread::sleep(std::time::Duration::from_millis(2));
        let (t1, c1) = (crate::monotonic_ns(), cycles());
        let dc = c1.saturating_sub(c0).max(1);
        // ns per cycle in 32.32 fixed point.
        (((t1 - t0) as u128) << 32).div_euclid(u128::from(dc)) as u64
    });
}

/// The calibration, to hand to a process that did not inherit it (an
/// exec'd NF template): ns per cycle in 32.32 fixed point.
pub fn cycles_calibration() -> u64 {
    calibrate_cycles();
    NS_PER_CYCLE_Q32.get().copied().unwrap_or(1 << 32)
}

/// Adopts a calibration measured by another process (see
/// [`cycles_calibration`]), so every process converts cycles alike and
/// none spends 2 ms measuring; ignored if this process calibrated already.
pub fn set_cycles_calibration(q32: u64) {
    let _ = NS_PER_CYCLE_Q32.set(q32.max(1));
}

/// Converts a cycle count from [`cycles`] to nanoseconds.
#[inline]
pub fn cycles_to_ns(c: u64) -> u64 {
    calibrate_cycles();
    let q = NS_PER_CYCLE_Q32.get().copied().unwrap_or(1 << 32);
    ((u128::from(c) * u128::from(q)) >> 32) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cycles_advance_and_convert_to_wall_time() {
        let (t0, c0) = (crate::monotonic_ns(), cycles());
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (t1, c1) = (crate::monotonic_ns(), cycles());
        assert!(c1 > c0);
        let ns = cycles_to_ns(c1 - c0) as f64;
        let wall = (t1 - t0) as f64;
        // Both clocks measured the same interval: within 5 %.
        assert!(
            (ns / wall - 1.0).abs() < 0.05,
            "{ns} ns by cycles vs {wall} ns"
        );
    }
}
