//! Flows held on their route during a rolling upgrade.
//!
//! `sluice rollout` runs an NF's new version beside its old one (see
//! [`crate::naming`]): the chains that pass the NF get a new route through
//! the new version, and the compiler keeps their old route, retired, as
//! *held* ([`crate::plan::Route::held`]) while the old version drains.
//! [`Held`] is a worker's record of which flows stay on it:
//!
//! - When a plan is installed in which a chain's route moved away from a
//!   route that is now held, every flow of that chain that is live on the
//!   worker at that moment is *kept*: its packets (both directions) keep
//!   taking the held route of the chain they arrive on, so they reach the
//!   old version, which holds their state, in order behind the ones
//!   already inside. Nothing drains for this (`diff.rs`).
//! - A flow that starts later is not kept and takes the chain's route.
//! - A kept flow stops being kept when its slot is released (its end
//!   marker reached the output port, or it idled out), or when its held
//!   route is no longer held (the old version was removed, say at the
//!   rollout's deadline): then it takes the chain's route like any other.
//!
//! [`Held::count`] is what the control plane waits on: the old version
//! retires when no worker keeps a flow.
//!
//! Cost: one branch per packet while no flow is kept; a byte per flow id,
//! allocated at an install that keeps flows and freed at the one that
//! keeps none.

/// No held route.
const NONE: u16 = u16::MAX;

/// One worker's kept flows.
#[derive(Debug, Default)]
pub struct Held {
    /// By chain id: the held route its kept flows take, or [`NONE`].
    routes: Vec<u16>,
    /// By flow id: whether the flow is kept (empty while none is).
    kept: Box<[bool]>,
    /// Flows kept.
    count: u32,
}

/// The chain routes of one plan, and which routes it holds.
pub struct Routes<'p> {
    /// By chain id: the chain's route, if the chain exists.
    pub of_chain: &'p [Option<u16>],
    /// Whether route `r` is held.
    pub held: &'p dyn Fn(u16) -> bool,
}

impl Held {
    /// Takes a new plan: chains whose route moved off a route `now` holds
    /// keep their live flows (`active`: id and chain of every active flow
    /// on this worker, from a table of `capacity` ids) on it; flows on a
    /// route `now` no longer holds are let go.
    pub fn install(
        &mut self,
        before: &[Option<u16>],
        now: &Routes<'_>,
        active: impl Iterator<Item = (u32, u16)>,
        capacity: u32,
    ) {
        let mut routes = vec![NONE; now.of_chain.len()];
        let mut newly = vec![false; now.of_chain.len()];
        for (c, current) in now.of_chain.iter().enumerate() {
            let Some(current) = *current else { continue };
            let kept = self.routes.get(c).copied().unwrap_or(NONE);
            if kept != NONE && (now.held)(kept) {
                // Still draining: its kept flows stay (a flow that started
                // since took the route of its time, which is not held).
                routes[c] = kept;
            } else if let Some(old) = before.get(c).copied().flatten() {
                if old != current && (now.held)(old) {
                    routes[c] = old;
                    newly[c] = true;
                }
            }
        }
        if routes.iter().all(|&r| r == NONE) {
            *self = Held::default();
            return;
        }
        if self.kept.len() != capacity as usize {
            self.kept = vec![false; capacity as usize].into_boxed_slice();
            self.count = 0;
        }
        for (id, chain) in active {
            let Some(slot) = self.kept.get_mut(id as usize) else {
                continue;
            };
            let route = routes.get(chain as usize).copied().unwrap_or(NONE);
            let newly = newly.get(chain as usize).copied().unwrap_or(false);
            let keep = route != NONE && (*slot || newly);
            if keep != *slot {
                *slot = keep;
                if keep {
                    self.count += 1;
                } else {
                    self.count -= 1;
                }
            }
        }
        self.routes = routes;
    }

    /// The route a packet of flow `flow` that arrived on chain `chain`
    /// takes, if the flow is kept on a held route; `None`: the chain's.
    #[inline]
    pub fn route(&self, chain: u16, flow: u32) -> Option<u16> {
        if self.count == 0 || !self.kept.get(flow as usize).copied().unwrap_or(false) {
            return None;
        }
        match self.routes.get(chain as usize).copied() {
            Some(NONE) | None => None,
            r => r,
        }
    }

    /// Flow `flow`'s slot was released; returns whether it was kept.
    pub fn release(&mut self, flow: u32) -> bool {
        match self.kept.get_mut(flow as usize) {
            Some(k) if *k => {
                *k = false;
                self.count -= 1;
                true
            }
            _ => false,
        }
    }

    /// The held route chain `chain`'s kept flows take, if it has one.
    pub fn route_of_chain(&self, chain: u16) -> Option<u16> {
        self.routes
            .get(chain as usize)
            .copied()
            .filter(|&r| r != NONE)
    }

    /// Flows kept on held routes.
    pub fn count(&self) -> u32 {
        self.count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Chains 0 and 1 on routes 10 and 11; a rollout moves chain 0 to
    /// route 20 and holds 10.
    fn rollout(h: &mut Held, active: &[(u32, u16)]) {
        let held = |r: u16| r == 10;
        let now = Routes {
            of_chain: &[Some(20), Some(11)],
            held: &held,
        };
        h.install(&[Some(10), Some(11)], &now, active.iter().copied(), 64);
    }

    #[test]
    fn live_flows_of_a_chain_moved_off_a_held_route_stay_on_it() {
        let mut h = Held::default();
        rollout(&mut h, &[(1, 0), (2, 0), (3, 1)]);
        assert_eq!(h.count(), 2);
        assert_eq!(h.route(0, 1), Some(10));
        assert_eq!(h.route(0, 2), Some(10));
        // Another chain's flow, and a flow that starts later: the chain's.
        assert_eq!(h.route(1, 3), None);
        assert_eq!(h.route(0, 4), None);
        // The other direction of a kept flow arrives on a chain with no
        // held route: its chain's.
        assert_eq!(h.route(1, 1), None);
    }

    #[test]
    fn a_released_flow_is_let_go_and_its_id_is_new() {
        let mut h = Held::default();
        rollout(&mut h, &[(1, 0), (2, 0)]);
        assert!(h.release(1));
        assert!(!h.release(1), "counted once");
        assert!(!h.release(9), "never kept");
        assert_eq!(h.count(), 1);
        assert_eq!(h.route(0, 1), None, "the id's next flow is new");
    }

    #[test]
    fn a_later_install_keeps_kept_flows_while_the_route_is_held_and_not_new_ones() {
        let mut h = Held::default();
        rollout(&mut h, &[(1, 0)]);
        // Another apply while draining: flow 5 started since.
        rollout(&mut h, &[(1, 0), (5, 0)]);
        assert_eq!(h.count(), 1);
        assert_eq!(h.route(0, 1), Some(10));
        assert_eq!(h.route(0, 5), None);
    }

    #[test]
    fn flows_are_let_go_when_their_route_is_no_longer_held() {
        let mut h = Held::default();
        rollout(&mut h, &[(1, 0), (2, 0)]);
        let held = |_: u16| false;
        let now = Routes {
            of_chain: &[Some(20), Some(11)],
            held: &held,
        };
        h.install(
            &[Some(20), Some(11)],
            &now,
            [(1, 0), (2, 0)].into_iter(),
            64,
        );
        assert_eq!(h.count(), 0);
        assert_eq!(h.route(0, 1), None);
        assert!(h.kept.is_empty(), "the table is freed");
    }

    #[test]
    fn an_ordinary_route_change_keeps_nothing() {
        let mut h = Held::default();
        let held = |_: u16| false;
        let now = Routes {
            of_chain: &[Some(20)],
            held: &held,
        };
        h.install(&[Some(10)], &now, [(1, 0)].into_iter(), 64);
        assert_eq!((h.count(), h.route(0, 1)), (0, None));
    }

    #[test]
    fn out_of_range_ids_and_chains_are_ignored() {
        let mut h = Held::default();
        rollout(&mut h, &[(1, 0), (500, 0), (2, 9)]);
        assert_eq!(h.count(), 1);
        assert_eq!(h.route(7, 1), None);
        assert_eq!(h.route(0, u32::MAX), None);
    }
}
