//! Token bucket for the generator's packet rate.

/// Nano-packets per packet: tokens are kept in units of 1e-9 packet so
/// that refills are exact integers (no drift over long runs).
const UNIT: u128 = 1_000_000_000;

/// Smallest burst (packets) the bucket can hold.
pub const MIN_BURST: u64 = 32;
/// Largest burst (packets) the bucket can hold.
pub const MAX_BURST: u64 = 4096;

/// Token bucket: `rate` packets per second, holding at most `burst`
/// packets (1 ms worth of the rate, clamped to
/// [`MIN_BURST`]..=[`MAX_BURST`]).  Starts with one packet's worth so the
/// first packet goes out at once.
#[derive(Debug, Clone)]
pub(crate) struct TokenBucket {
    rate: u64,
    cap: u128,
    tokens: u128,
    last: Option<u64>,
}

impl TokenBucket {
    pub(crate) fn new(rate_pps: u64) -> Self {
        let burst = (rate_pps / 1000).clamp(MIN_BURST, MAX_BURST);
        TokenBucket {
            rate: rate_pps,
            cap: u128::from(burst) * UNIT,
            tokens: UNIT,
            last: None,
        }
    }

    /// Adds the tokens accrued up to `now_ns` and returns whole packets
    /// available.  A clock that goes backwards accrues nothing.
    pub(crate) fn available(&mut self, now_ns: u64) -> u64 {
        match self.last {
            None => self.last = Some(now_ns),
            Some(last) if now_ns > last => {
                let add = u128::from(now_ns - last) * u128::from(self.rate);
                self.tokens = (self.tokens + add).min(self.cap);
                self.last = Some(now_ns);
            }
            Some(_) => {}
        }
        (self.tokens / UNIT) as u64
    }

    /// Spends one packet's worth (saturating: sending more than `due`
    /// allowed is the caller's business, not an error).
    #[inline]
    pub(crate) fn take_one(&mut self) {
        self.tokens = self.tokens.saturating_sub(UNIT);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_rate_over_simulated_second() {
        let mut tb = TokenBucket::new(1000);
        let mut sent = 0u64;
        let mut now = 5_000_000_000u64;
        let end = now + 1_000_000_000;
        while now <= end {
            for _ in 0..tb.available(now) {
                tb.take_one();
                sent += 1;
            }
            now += 100_000;
        }
        // One at t=0 plus one per ms for 1 s.
        assert_eq!(sent, 1001);
    }

    #[test]
    fn burst_is_bounded_and_clock_may_go_back() {
        let mut tb = TokenBucket::new(1_000_000);
        tb.available(0);
        assert_eq!(tb.available(10_000_000_000), 1000);
        assert_eq!(tb.available(5), 1000);
        let mut slow = TokenBucket::new(1);
        slow.available(0);
        assert_eq!(slow.available(u64::MAX), MIN_BURST);
        let mut fast = TokenBucket::new(u64::MAX);
        fast.available(0);
        assert_eq!(fast.available(u64::MAX), MAX_BURST);
    }
}
