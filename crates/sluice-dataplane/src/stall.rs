//! Stall detection for polling loops.
//!
//! A loop that polls without sleeping comes back to its clock read every
//! few microseconds, plus the time its NFs spend on packets; a longer gap
//! means something else held its core: a kernel thread, interrupts, the
//! hypervisor, another task, or an NF sharing the core. The data plane
//! cannot prevent these, but packets queue behind them (up to a ring's worth
//! each time), so the report counts them next to the latency they cause.
//! On the 2-vCPU development VM the NFs' core loses 1–2 % of its time this
//! way, in pieces of up to several milliseconds (`docs/benchmarks.md`,
//! "Stalls").

/// Gap between two polls, beyond the NF work done in between, that counts
/// as a stall.
pub const STALL_NS: u64 = 50_000;

/// Watches the gaps between a loop's polls.
#[derive(Debug, Default, Clone, Copy)]
pub struct StallMeter {
    last_ns: u64,
    last_busy_ns: u64,
}

impl StallMeter {
    /// Records a poll at `now_ns`, where `busy_ns` is the running total of
    /// time spent in NF handlers (their own work, not a stall); returns the
    /// time the loop was held off its core since the previous poll if that
    /// was a stall. The first poll, and the first after
    /// [`StallMeter::slept`], have no previous poll.
    #[inline]
    pub fn poll(&mut self, now_ns: u64, busy_ns: u64) -> Option<u64> {
        let last = std::mem::replace(&mut self.last_ns, now_ns);
        let worked = busy_ns.saturating_sub(std::mem::replace(&mut self.last_busy_ns, busy_ns));
        let off = now_ns.saturating_sub(last).saturating_sub(worked);
        (last != 0 && off > STALL_NS).then_some(off)
    }

    /// The loop is about to sleep on purpose: the gap until its next poll
    /// is not a stall.
    #[inline]
    pub fn slept(&mut self) {
        self.last_ns = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_above_the_threshold_are_stalls() {
        let mut m = StallMeter::default();
        assert_eq!(m.poll(1_000, 0), None, "first poll has no gap");
        assert_eq!(m.poll(1_000 + STALL_NS, 0), None, "exactly the threshold");
        assert_eq!(m.poll(1_000 + 3 * STALL_NS, 0), Some(2 * STALL_NS));
        assert_eq!(m.poll(1_000 + 3 * STALL_NS + 10, 0), None);
    }

    #[test]
    fn nf_work_between_polls_is_not_a_stall() {
        let mut m = StallMeter::default();
        m.poll(1_000, 500);
        // 200 µs later, 180 µs of it in an NF handler: 20 µs off the core.
        assert_eq!(m.poll(201_000, 180_500), None);
        // 300 µs later, 100 µs of NF work: 200 µs off the core.
        assert_eq!(m.poll(501_000, 280_500), Some(200_000));
    }

    #[test]
    fn a_sleep_is_not_a_stall() {
        let mut m = StallMeter::default();
        m.poll(5_000, 0);
        m.slept();
        assert_eq!(m.poll(5_000 + 100 * STALL_NS, 0), None);
        assert_eq!(m.poll(5_000 + 102 * STALL_NS, 0), Some(2 * STALL_NS));
    }

    #[test]
    fn a_clock_that_goes_back_is_not_a_stall() {
        let mut m = StallMeter::default();
        m.poll(10 * STALL_NS, 0);
        assert_eq!(m.poll(STALL_NS, 0), None);
    }
}
