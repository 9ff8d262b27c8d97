//! The worker's side of backpressure at chains' entries
//! (`crate::backpressure`): how full each chain is, read once per route per
//! ingress pass, and whether a new packet of the chain is let in.

use std::rc::Rc;

use super::Worker;

/// What the worker keeps for entry decisions.
#[derive(Debug, Default)]
pub(crate) struct EntryState {
    /// Ingress passes so far (stamps `fills`).
    pass: u64,
    /// Per route: (pass it was read in, fill in basis points).
    fills: Vec<(u64, u32)>,
    dice: crate::backpressure::Dice,
    /// NF visits spent on packets the platform dropped afterwards.
    wasted_visits: u64,
}

impl EntryState {
    /// A new ingress pass: fills read before are stale.
    pub(crate) fn next_pass(&mut self) {
        self.pass = self.pass.wrapping_add(1);
    }
}

impl Worker<'_> {
    /// Counts the NF visits spent on packets of `b`, which the platform is
    /// dropping: wasted work (`RunReport::wasted_visits`). `pending`: the
    /// packets were on their way to an NF whose visit is already counted.
    pub(super) fn count_wasted(&mut self, b: &mut sluice_mem::HandleBatch, pending: u16) {
        let arena = self.arena;
        for h in b.iter_mut() {
            let v = arena.pkt(h).visits().saturating_sub(pending);
            self.entry.wasted_visits += u64::from(v);
        }
    }

    /// NF visits spent on packets the platform dropped later.
    pub(crate) fn wasted_visits(&self) -> u64 {
        self.entry.wasted_visits
    }

    /// Whether a new packet of `chain` is dropped at its entry because
    /// the chain is congested (never under `hold`).
    pub(super) fn entry_refuses(&mut self, chain: u16) -> bool {
        if self.cfg.entry.holds() {
            return false;
        }
        let Some(route) = self.plan.chain(chain).map(|c| c.route) else {
            return false;
        };
        let fill = self.route_fill(route);
        let chance = self.cfg.entry.drop_chance(fill);
        self.entry.dice.roll(chance)
    }

    /// The fill of route `route`'s fullest process NF, in basis points.
    fn route_fill(&mut self, route: u16) -> u32 {
        let r = usize::from(route);
        if self.entry.fills.len() <= r {
            self.entry.fills.resize(r + 1, (u64::MAX, 0));
        }
        let (stamp, fill) = self.entry.fills[r];
        if stamp == self.entry.pass {
            return fill;
        }
        let held = Rc::clone(&self.plan);
        let plan: &crate::plan::Plan = &held;
        let mut worst = 0;
        let hops = plan.route(route).map_or(&[][..], |rt| &rt.path[..]);
        for &i in hops.iter().flat_map(|h| plan.hop_nfs(h)) {
            let Some(p) = self.nf_mut(i).and_then(|n| n.process()) else {
                continue;
            };
            if p.phase.accepts() {
                // A corrupt ring is found and handled where packets are
                // sent; here it only counts as full.
                worst = worst.max(p.link.fill_bp().unwrap_or(10_000));
            }
        }
        self.entry.fills[r] = (self.entry.pass, worst);
        worst
    }
}
