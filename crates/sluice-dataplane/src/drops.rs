//! Drop counters by reason (platform and malformed-packet reasons; NF-local
//! reasons are counted per NF in [`crate::nf_rt::NfRt`]).

use std::collections::BTreeMap;

use sluice_nf::DropReason;

/// Counters indexed by drop-reason code (codes below 128).
#[derive(Debug, Clone)]
pub struct Drops {
    by_code: [u64; 128],
    /// Events (flow-end markers) an NF returned that did not belong to it.
    pub invalid_events: u64,
    /// Ring entries NFs returned that were not buffers they owned
    /// (garbage, duplicates). Not packets, so not drops.
    pub invalid_handles: u64,
}

impl Default for Drops {
    fn default() -> Self {
        Drops {
            by_code: [0; 128],
            invalid_events: 0,
            invalid_handles: 0,
        }
    }
}

impl Drops {
    /// Adds `n` drops under `reason` (a platform or malformed reason).
    #[inline]
    pub fn add(&mut self, reason: DropReason, n: u64) {
        let i = (reason.code() as usize).min(127);
        self.by_code[i] += n;
    }

    /// Total.
    pub fn total(&self) -> u64 {
        self.by_code.iter().sum()
    }

    /// Non-zero counters by reporting name.
    pub fn named(&self) -> BTreeMap<String, u64> {
        self.by_code
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(code, &n)| {
                let name = DropReason::from_code(code as u16)
                    .name()
                    .unwrap_or_else(|| format!("code_{code}"));
                (name, n)
            })
            .collect()
    }
}
