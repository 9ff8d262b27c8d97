//! Tiny deterministic PRNGs (no external dependency, no allocation).

/// SplitMix64: used to derive well-mixed values from a seed (flow tuples).
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform value in `0..n` (`n > 0`), by multiply-high (Lemire), bias
    /// below 2^-32 for the small ranges used here.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// xorshift64*: the per-packet size-class draw.  One multiply and three
/// shifts; state must be non-zero.
#[derive(Debug, Clone)]
pub(crate) struct XorShift64Star(u64);

impl XorShift64Star {
    pub(crate) fn new(seed: u64) -> Self {
        // Never zero: mix the seed and force a set bit.
        Self(SplitMix64::new(seed).next_u64() | 1)
    }

    #[inline(always)]
    pub(crate) fn next_u32(&mut self) -> u32 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_in_range() {
        let mut a = SplitMix64::new(7);
        let mut b = SplitMix64::new(7);
        for _ in 0..1000 {
            let x = a.below(10);
            assert_eq!(x, b.below(10));
            assert!(x < 10);
        }
        let mut x = XorShift64Star::new(0);
        let v: Vec<u32> = (0..4).map(|_| x.next_u32()).collect();
        assert!(v.iter().any(|&v| v != 0));
    }
}
