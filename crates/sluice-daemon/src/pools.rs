//! Sizing `per_flow` pools (`nfs[].pool: { min, max }`) to their load.
//!
//! The instances a per-flow NF needs are its flows' arrival rate times
//! their lifetime (Little's law), and that product is what the pool shows
//! directly: its busy instances. So the control thread, at most every
//! [`EVERY`] between requests, reads each pool from the report and keeps
//! `replicas` (the pool's size, in the desired state) at
//!
//! `busy + max(1, busy / 4)` idle ones for the next arrivals, doubled
//! when new flows were refused (`nf_pool_exhausted` grew) since the last
//! look, within `min..=max`.
//!
//! Growing applies at once and moves no flow (new instances start idle;
//! `diff.rs` needs no drain). Shrinking waits until the smaller size has
//! been enough for [`SHRINK_AFTER`], and removes only instances past the
//! last busy one (the pool hands out its lowest instances first, so under
//! a lighter load the last ones are the idle ones): no flow loses its
//! instance.
//! Each resize is a change of the desired state (a new version), logged.

use std::time::{Duration, Instant};

use sluice_dataplane::naming::instance_of;
use sluice_dataplane::report::RunReport;
use sluice_dataplane::CpuRead;

use crate::control::State as Ctl;

/// How often pools are looked at.
const EVERY: Duration = Duration::from_millis(100);
/// How long a smaller pool must have been enough before it shrinks.
const SHRINK_AFTER: Duration = Duration::from_secs(2);

/// A pool as the report shows it: its instances' flows, by replica.
fn pool_of(r: &RunReport, nf: &str, generation: u32) -> Vec<u64> {
    let mut rows: Vec<(u32, u64)> = r
        .nfs
        .iter()
        .filter_map(|n| {
            let i = instance_of(&n.name);
            (i.nf == nf && i.generation == generation).then_some((i.replica, n.pool_flows?))
        })
        .collect();
    rows.sort_unstable();
    rows.into_iter().map(|(_, f)| f).collect()
}

/// The size a pool of `size` instances with `busy` of them serving should
/// have within `min..=max` (see the module).
pub fn target(size: u32, busy: u32, refused: bool, min: u32, max: u32) -> u32 {
    let mut want = busy + (busy / 4).max(1);
    if refused {
        want = want.max(size.saturating_mul(2));
    }
    want.clamp(min, max)
}

impl Ctl {
    /// Resizes every `per_flow` pool with bounds to its load (see the
    /// module). Cheap when no pool has bounds.
    pub fn tick_pools(&mut self) {
        let Some(desired) = self.desired.as_deref() else {
            return;
        };
        if !desired.nfs.iter().any(|n| n.pool.is_some()) {
            return;
        }
        let now = Instant::now();
        if self.sizer.last.is_some_and(|t| now < t + EVERY) {
            return;
        }
        self.sizer.last = Some(now);
        // Pool sizing reads flows and drops, not the NFs' CPU time.
        let report = self.rt.report_reading(CpuRead::None);
        let refused_now = report.drops.get("nf_pool_exhausted").copied().unwrap_or(0);
        let refused = refused_now > self.sizer.refused;
        self.sizer.refused = refused_now;
        let mut spec = desired.clone();
        let mut resized = Vec::new();
        for n in spec.nfs.iter_mut() {
            let Some(b) = n.pool else { continue };
            let flows = pool_of(&report, &n.name, n.generation);
            if flows.len() != n.replicas as usize {
                continue; // the report has not caught up with the plan
            }
            let busy = flows.iter().filter(|&&f| f > 0).count() as u32;
            let want = target(n.replicas, busy, refused, b.min, b.max);
            let next = if want > n.replicas {
                self.sizer.shrink_since.remove(&n.name);
                want
            } else if want < n.replicas {
                let since = *self.sizer.shrink_since.entry(n.name.clone()).or_insert(now);
                let last_busy = flows
                    .iter()
                    .rposition(|&f| f > 0)
                    .map_or(0, |i| i as u32 + 1);
                let step = want.max(last_busy);
                if now.duration_since(since) >= SHRINK_AFTER && step < n.replicas {
                    self.sizer.shrink_since.remove(&n.name);
                    step
                } else {
                    n.replicas
                }
            } else {
                self.sizer.shrink_since.remove(&n.name);
                n.replicas
            };
            if next != n.replicas {
                resized.push((n.name.clone(), n.replicas, next, busy));
                n.replicas = next;
            }
        }
        if resized.is_empty() {
            return;
        }
        match self.change(spec, None, false) {
            Ok(c) => {
                for (nf, from, to, busy) in resized {
                    tracing::info!(
                        "pool of {nf}: {from} → {to} instances ({busy} busy; version {})",
                        c.version
                    );
                }
            }
            Err(e) => tracing::error!("cannot resize pools: {e:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::target;

    #[test]
    fn the_pool_keeps_a_quarter_of_its_busy_instances_idle_within_its_bounds() {
        assert_eq!(target(4, 0, false, 2, 64), 2, "at least min");
        assert_eq!(target(4, 1, false, 2, 64), 2);
        assert_eq!(target(8, 8, false, 2, 64), 10);
        assert_eq!(target(8, 40, false, 2, 16), 16, "at most max");
        assert_eq!(target(8, 8, true, 2, 64), 16, "refused flows double it");
        assert_eq!(target(40, 8, true, 2, 64), 64);
    }
}
