//! Per-packet size-class choice.

use super::config::{SizeSpec, DATACENTER_FRAME_LENS, IMIX_FRAME_LENS};
use crate::rng::XorShift64Star;

/// Most size classes any [`SizeSpec`] uses.
pub(crate) const MAX_CLASSES: usize = 8;

/// Draws a size class per packet: constant for fixed sizes, one
/// xorshift64* draw and a multiply-shift otherwise.
#[derive(Debug, Clone)]
pub(crate) struct SizeModel {
    spec: SizeSpec,
    rng: XorShift64Star,
}

impl SizeModel {
    pub(crate) fn new(spec: SizeSpec, seed: u64) -> Self {
        SizeModel {
            spec,
            rng: XorShift64Star::new(seed ^ 0x73_697a_6573),
        }
    }

    /// Nominal frame lengths of the classes (before raising to the header
    /// or stamp minimum).
    pub(crate) fn class_lens(spec: SizeSpec) -> Vec<u16> {
        match spec {
            SizeSpec::Fixed(n) => vec![n],
            SizeSpec::Imix => IMIX_FRAME_LENS.iter().map(|&(l, _)| l).collect(),
            SizeSpec::Datacenter => DATACENTER_FRAME_LENS.to_vec(),
        }
    }

    /// The class of the next packet.
    #[inline(always)]
    pub(crate) fn pick(&mut self) -> usize {
        match self.spec {
            SizeSpec::Fixed(_) => 0,
            SizeSpec::Imix => {
                // Weights 7:4:1 out of 12.
                let r = (u64::from(self.rng.next_u32()) * 12) >> 32;
                usize::from(r >= 7) + usize::from(r >= 11)
            }
            SizeSpec::Datacenter => (self.rng.next_u32() >> 29) as usize,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imix_weights() {
        let mut m = SizeModel::new(SizeSpec::Imix, 1);
        let mut c = [0u32; 3];
        for _ in 0..120_000 {
            c[m.pick()] += 1;
        }
        for (got, want) in c.iter().zip([70_000.0, 40_000.0, 10_000.0]) {
            assert!((f64::from(*got) - want).abs() < want * 0.03, "{c:?}");
        }
        let mut d = SizeModel::new(SizeSpec::Datacenter, 1);
        assert!((0..1000).all(|_| d.pick() < MAX_CLASSES));
    }
}
