//! The flows each member of a `per_flow` pool serves, with the least
//! loaded member at hand: a tournament tree over the loads.
//!
//! A flowless packet at a pool, and a new flow under the `shared`
//! fallback with every member busy, go to the member serving the fewest
//! flows (the lowest numbered of those). A scan of the loads for that is
//! one read per member, on the packet path: with 1,024 members, more than
//! the rest of the packet's trip. Here each inner node of a complete
//! binary tree holds the winner of its two children (fewer flows, then
//! the lower number), so the root is the answer; a load that changes by
//! one replays its leaf's path to the root, ten comparisons at 1,024
//! members. Loads change when a flow takes or leaves a member, which is
//! rarer than packets.
//!
//! Layout: `tree[1]` is the root, the children of `k` are `2k` and
//! `2k + 1`, and the leaves start at `width` (the member count rounded up
//! to a power of two). Leaves past the last member hold [`NOBODY`], which
//! loses to every member.

/// A leaf with no member behind it (members are numbered below
/// `sluice_spec::MAX_REPLICAS`).
const NOBODY: u16 = u16::MAX;

/// Flows per member, and the least loaded member.
#[derive(Debug, Clone, Default)]
pub(crate) struct Loads {
    load: Vec<u32>,
    /// Winners: inner nodes from 1, then the leaves (`width` of them).
    tree: Vec<u16>,
    width: usize,
}

impl Loads {
    /// The loads of members `0..load.len()`.
    pub fn new(load: Vec<u32>) -> Loads {
        debug_assert!(load.len() < usize::from(NOBODY));
        let width = load.len().max(1).next_power_of_two();
        let mut tree = vec![NOBODY; 2 * width];
        for m in 0..load.len() {
            tree[width + m] = m as u16;
        }
        let mut l = Loads { load, tree, width };
        for k in (1..width).rev() {
            l.tree[k] = l.winner(l.tree[2 * k], l.tree[2 * k + 1]);
        }
        l
    }

    /// Flows member `m` serves (0 for a member the pool does not have).
    #[inline]
    pub fn get(&self, m: usize) -> u32 {
        self.load.get(m).copied().unwrap_or(0)
    }

    /// The member serving the fewest flows, the lowest numbered of those;
    /// `None` for a pool of no members.
    #[inline]
    pub fn least(&self) -> Option<usize> {
        // With one member, its leaf is the root.
        match self.tree.get(1).copied() {
            Some(m) if m != NOBODY => Some(usize::from(m)),
            _ => None,
        }
    }

    /// A flow took member `m`.
    pub fn add(&mut self, m: usize) {
        if let Some(l) = self.load.get_mut(m) {
            *l += 1;
            self.replay(m);
        }
    }

    /// A flow left member `m`; its remaining load.
    pub fn sub(&mut self, m: usize) -> u32 {
        let Some(l) = self.load.get_mut(m) else {
            return 0;
        };
        *l = l.saturating_sub(1);
        let left = *l;
        self.replay(m);
        left
    }

    /// Recomputes the winners on leaf `m`'s path to the root. A node
    /// whose winner is another member, and stays so, ends the replay:
    /// every node above compared that member, whose load did not change.
    fn replay(&mut self, m: usize) {
        let mut k = (self.width + m) / 2;
        while k >= 1 {
            let w = self.winner(self.tree[2 * k], self.tree[2 * k + 1]);
            if w == self.tree[k] && usize::from(w) != m {
                return;
            }
            self.tree[k] = w;
            k /= 2;
        }
    }

    /// Of two members, the one serving fewer flows (the lower numbered on
    /// a tie); [`NOBODY`] only against [`NOBODY`].
    #[inline]
    fn winner(&self, a: u16, b: u16) -> u16 {
        let load = |m: u16| self.load.get(usize::from(m)).copied();
        match (load(a), load(b)) {
            (Some(la), Some(lb)) if lb < la || (lb == la && b < a) => b,
            (Some(_), _) => a,
            (None, _) => b,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What the tree replaces: a scan.
    fn scan(load: &[u32]) -> Option<usize> {
        (0..load.len()).min_by_key(|&m| load[m])
    }

    #[test]
    fn the_least_loaded_is_the_lowest_numbered_of_the_fewest() {
        let mut l = Loads::new(vec![2, 1, 1, 3]);
        assert_eq!(l.least(), Some(1));
        l.add(1);
        assert_eq!(l.least(), Some(2));
        assert_eq!(l.sub(0), 1);
        assert_eq!(l.least(), Some(0), "a tie goes to the lower number");
        assert_eq!(l.get(0), 1);
        assert_eq!(l.get(99), 0, "a member the pool lacks serves nothing");
    }

    #[test]
    fn one_member_none_and_the_most() {
        assert_eq!(Loads::new(vec![]).least(), None);
        let mut one = Loads::new(vec![5]);
        assert_eq!(one.least(), Some(0));
        one.add(0);
        assert_eq!(one.least(), Some(0));
        let n = sluice_spec::MAX_REPLICAS as usize;
        let mut most = Loads::new(vec![1; n]);
        most.sub(n - 1);
        assert_eq!(most.least(), Some(n - 1));
        // A change to a member the pool lacks is ignored, not a panic.
        most.add(n);
        assert_eq!(most.sub(n + 7), 0);
        assert_eq!(most.least(), Some(n - 1));
    }

    proptest! {
        /// Any sequence of flows taking and leaving members leaves the
        /// tree agreeing with a scan of the loads.
        #[test]
        fn agrees_with_a_scan(
            start in proptest::collection::vec(0u32..4, 1..70),
            ops in proptest::collection::vec((any::<bool>(), 0usize..80), 0..300),
        ) {
            let mut l = Loads::new(start.clone());
            let mut model = start;
            for (take, m) in ops {
                if take {
                    l.add(m);
                    if let Some(x) = model.get_mut(m) { *x += 1; }
                } else {
                    let left = l.sub(m);
                    if let Some(x) = model.get_mut(m) {
                        *x = x.saturating_sub(1);
                        prop_assert_eq!(left, *x);
                    }
                }
                prop_assert_eq!(l.least(), scan(&model));
            }
        }
    }
}
