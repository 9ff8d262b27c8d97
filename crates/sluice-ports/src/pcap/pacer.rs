//! Replay pacing at the capture's inter-packet gaps.

/// Maps capture timestamps to release times so that a replay reproduces the
/// capture's inter-packet gaps, divided by a speed factor.
///
/// The first packet given to [`Pacer::due_at`] anchors the mapping: it is
/// due at once, and a packet captured `d` ns after it is due `d / speed` ns
/// after the anchor's wall time.  Timestamps that go backwards (common in
/// real captures) are due immediately rather than early-in-the-past
/// arithmetic errors.  The caller passes its own clock (`now_ns`), so the
/// pacer is testable with synthetic time and never sleeps.
#[derive(Debug, Clone)]
pub struct Pacer {
    /// Nanoseconds of wall time per nanosecond of capture time, `None` when
    /// unpaced.
    scale: Option<f64>,
    anchor: Option<(u64, u64)>,
}

impl Pacer {
    /// A pacer replaying `speed` times faster than captured (`1.0` = original
    /// rate, `2.0` = twice as fast).  A non-finite or non-positive speed
    /// gives an unpaced pacer, like [`Pacer::unpaced`].
    pub fn new(speed: f64) -> Pacer {
        let scale = (speed.is_finite() && speed > 0.0).then(|| 1.0 / speed);
        Pacer {
            scale,
            anchor: None,
        }
    }

    /// A pacer for which every packet is due immediately (top speed).
    pub fn unpaced() -> Pacer {
        Pacer {
            scale: None,
            anchor: None,
        }
    }

    /// Forgets the anchor: the next packet is due at once and anchors anew.
    pub fn reset(&mut self) {
        self.anchor = None;
    }

    /// Wall time (same clock as `now_ns`) at which the packet captured at
    /// `capture_ts_ns` is due.
    pub fn due_at(&mut self, capture_ts_ns: u64, now_ns: u64) -> u64 {
        let Some(scale) = self.scale else {
            return now_ns;
        };
        let (cap0, wall0) = *self.anchor.get_or_insert((capture_ts_ns, now_ns));
        let delta = capture_ts_ns.saturating_sub(cap0);
        // f64 is exact to the nanosecond for deltas up to ~104 days.
        let scaled = (delta as f64 * scale).round();
        wall0.saturating_add(if scaled >= u64::MAX as f64 {
            u64::MAX
        } else {
            scaled as u64
        })
    }

    /// True if the packet captured at `capture_ts_ns` may be sent at
    /// `now_ns`.
    pub fn is_due(&mut self, capture_ts_ns: u64, now_ns: u64) -> bool {
        self.due_at(capture_ts_ns, now_ns) <= now_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn original_speed_reproduces_gaps() {
        let mut p = Pacer::new(1.0);
        assert_eq!(p.due_at(5_000, 100), 100);
        assert_eq!(p.due_at(6_000, 100), 1_100);
        assert!(!p.is_due(6_000, 1_099));
        assert!(p.is_due(6_000, 1_100));
    }

    #[test]
    fn speed_factor_scales_gaps() {
        let mut p = Pacer::new(4.0);
        assert_eq!(p.due_at(0, 1_000), 1_000);
        assert_eq!(p.due_at(4_000, 1_000), 2_000);
        let mut slow = Pacer::new(0.5);
        assert_eq!(slow.due_at(0, 0), 0);
        assert_eq!(slow.due_at(10, 0), 20);
    }

    #[test]
    fn backwards_and_unpaced() {
        let mut p = Pacer::new(1.0);
        p.due_at(10_000, 50);
        assert_eq!(p.due_at(9_000, 60), 50);
        let mut u = Pacer::unpaced();
        assert_eq!(u.due_at(1 << 40, 7), 7);
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let mut b = Pacer::new(bad);
            assert!(b.is_due(0, 0) && b.is_due(u64::MAX, 0));
        }
        p.reset();
        assert_eq!(p.due_at(1, 999), 999);
    }
}
