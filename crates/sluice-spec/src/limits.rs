//! The numeric limits of the schema, shared by the decoder (which reports
//! them at the offending value) and the validator (for specs built by code).

/// An inclusive range of allowed integer values, optionally powers of two only.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limit {
    pub lo: u64,
    pub hi: u64,
    pub pow2: bool,
}

const fn range(lo: u64, hi: u64) -> Limit {
    Limit {
        lo,
        hi,
        pow2: false,
    }
}

const fn pow2(lo: u64, hi: u64) -> Limit {
    Limit { lo, hi, pow2: true }
}

/// `settings.buffers`.
pub(crate) const BUFFERS: Limit = range(1024, 4_194_304);
/// `settings.domains[].buffers`.
pub(crate) const DOMAIN_BUFFERS: Limit = range(256, 1 << 24);
/// `settings.ring_size`.
pub(crate) const RING_SIZE: Limit = pow2(64, 65_536);
/// `settings.batch`.
pub(crate) const BATCH: Limit = range(1, 256);
/// `settings.workers`.
pub(crate) const WORKERS: Limit = range(1, 64);
/// `settings.restart.max_restarts`.
pub(crate) const MAX_RESTARTS: Limit = range(0, 1_000_000);
/// `settings.restart.backoff_ms`.
pub(crate) const BACKOFF_MS: Limit = range(0, u64::MAX);
/// `settings.restart.hold_ms`.
pub(crate) const HOLD_MS: Limit = range(0, 3_600_000);
/// `settings.flow_table.capacity`.
pub(crate) const FLOW_CAPACITY: Limit = pow2(1024, 16_777_216);
/// `settings.flow_table.idle_timeout_ms`: at most a year. The flow table
/// keeps deadlines in nanoseconds of the monotonic clock, where a timeout
/// of about 584 years or more overflows (a worker panicked on it).
pub(crate) const IDLE_TIMEOUT_MS: Limit = range(1, 31_536_000_000);
/// `settings.flow_table.close_timeout_ms` (Linux's TIME_WAIT is 120 s).
pub(crate) const CLOSE_TIMEOUT_MS: Limit = range(0, 120_000);
/// `settings.wakeup.max_batch`.
pub(crate) const WAKE_MAX_BATCH: Limit = range(1, 256);
/// `settings.wakeup.timeout_us`.
pub(crate) const WAKE_TIMEOUT_US: Limit = range(1, 100_000);
/// `wakeup.short_flow_packets`.
pub(crate) const SHORT_FLOW_PACKETS: Limit = range(0, 1_000_000);
/// `settings.wakeup.busy_poll_us`.
pub(crate) const BUSY_POLL_US: Limit = range(0, 1_000_000);
/// `settings.backpressure.watermark_pct`.
pub(crate) const WATERMARK_PCT: Limit = range(1, 100);
/// `settings.backpressure.red_min_pct`.
pub(crate) const RED_MIN_PCT: Limit = range(0, 99);
/// `nfs[].cpu_weight` (cgroup v2's `cpu.weight` range).
pub(crate) const CPU_WEIGHT: Limit = range(1, 10_000);
/// `nfs[].replicas`, a pool's `min` and `max`: a replica number fits a
/// pin of the steering tables (16 bits; [`crate::MAX_REPLICAS`]).
pub(crate) const REPLICAS: Limit = range(1, crate::MAX_REPLICAS as u64);
/// `nfs[].class.prefix`: an IPv6 prefix length (IPv4 uses at most 32).
pub(crate) const CLASS_PREFIX: Limit = range(0, 128);
/// `nfs[].generation` and `nfs[].draining.generation`: a rollout a
/// second for 30 years fits.
pub(crate) const GENERATION: Limit = range(0, 1_000_000_000);
/// `nfs[].sandbox.memory_max_mib` (1 MiB to 1 TiB).
pub(crate) const MEMORY_MAX_MIB: Limit = range(1, 1 << 20);
/// `nfs[].sandbox.pids_max` (the kernel's `pid_max` ceiling).
pub(crate) const PIDS_MAX: Limit = range(1, 4_194_304);
/// `settings.scheduler.slice_us`.
pub(crate) const SLICE_US: Limit = range(1, 100_000);
/// `settings.scheduler.yield_every` (batches).
pub(crate) const YIELD_EVERY: Limit = range(0, 1024);
/// Generator `flows`.
pub(crate) const FLOWS: Limit = range(1, 1_000_000);
/// Generator fixed `size` (frame bytes).
pub(crate) const FRAME_SIZE: Limit = range(60, 2048);
/// Generator `rate_pps`.
pub(crate) const RATE_PPS: Limit = range(1, u64::MAX);
/// Generator `count`.
pub(crate) const COUNT: Limit = range(0, u64::MAX);
/// Generator `packets_per_flow`.
pub(crate) const PACKETS_PER_FLOW: Limit = range(3, u32::MAX as u64);
/// pcap_out `snaplen`.
pub(crate) const SNAPLEN: Limit = range(1, 262_144);
/// pcap_in `loops`.
pub(crate) const LOOPS: Limit = range(0, u32::MAX as u64);
/// Port numbers.
pub(crate) const PORT: Limit = range(0, 65_535);
/// Match `proto`.
pub(crate) const PROTO: Limit = range(0, 255);
/// Maximum length of a port, NF or chain name.
pub(crate) const NAME_MAX: usize = 32;

impl Limit {
    /// `Ok` if `v` is allowed, otherwise the message saying what is.
    pub(crate) fn check(&self, v: u64) -> Result<(), String> {
        if v < self.lo || v > self.hi {
            return Err(format!("{}, got {v}", self.describe()));
        }
        if self.pow2 && !v.is_power_of_two() {
            let below = 1u64 << (63 - v.leading_zeros());
            return Err(format!(
                "{}, got {v} (nearest: {} or {})",
                self.describe(),
                below,
                below * 2
            ));
        }
        Ok(())
    }

    /// `must be ...` in words.
    pub(crate) fn describe(&self) -> String {
        let what = if self.pow2 {
            "a power of two"
        } else {
            "an integer"
        };
        if self.hi == u64::MAX {
            format!("must be {what} of at least {}", self.lo)
        } else {
            format!("must be {what} between {} and {}", self.lo, self.hi)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages() {
        assert_eq!(
            RING_SIZE.check(1000).unwrap_err(),
            "must be a power of two between 64 and 65536, got 1000 (nearest: 512 or 1024)"
        );
        assert_eq!(
            BATCH.check(0).unwrap_err(),
            "must be an integer between 1 and 256, got 0"
        );
        assert_eq!(
            RATE_PPS.check(0).unwrap_err(),
            "must be an integer of at least 1, got 0"
        );
        assert!(RING_SIZE.check(1024).is_ok());
    }
}
