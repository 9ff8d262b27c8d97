//! A lower bound on the room of the NF rings an input port feeds, so that
//! reading the port does not look at each of them on every pass.
//!
//! Under `backpressure: hold` a port is read for at most as many packets
//! as the tightest first NF of its chains can take (`ingress_budget`).
//! Looking at every one of those NFs on every pass cost the worker most
//! of its time at 1,000 chains on one port (69 % of its samples: each
//! NF's state and ring, a cache miss or more apiece, before every read).
//!
//! The bound: only the worker puts anything into an NF's receive ring or
//! raises what the NF holds (packets, spares, events: each one unit of
//! one ring's room), and an NF only ever gives room back. So if the
//! least room among a port's rings was `floor` when they were looked at,
//! and the worker has handed out `spent` units since, to whichever rings,
//! every one of them still has at least `floor - spent`. While that is a
//! whole batch the port is read without looking; when it is not, the
//! rings are looked at again.
//!
//! What the argument does not cover is forgotten (`RoomFloor::forget`),
//! so the rings are looked at again: a change of plan or anything a
//! command does (new rings, new chains), and each maintenance tick, where
//! NFs are restarted and come back holding what they held (an NF that
//! was down was counted as taking anything).

/// See the module docs.
#[derive(Debug, Default)]
pub(super) struct RoomFloor {
    /// Units of room handed to any NF since the worker started.
    spent: u64,
    /// Per input port: the least room its rings had when looked at, and
    /// `spent` then; `None`: look.
    ports: Vec<Option<(usize, u64)>>,
    /// Per input port: the least room found the last time, kept when
    /// forgotten (see [`RoomFloor::want`]).
    last: Vec<usize>,
}

impl RoomFloor {
    /// `n` units of some NF ring's room were handed out.
    #[inline]
    pub(super) fn spend(&mut self, n: usize) {
        self.spent += n as u64;
    }

    /// The least room port `port`'s rings can have now, if known.
    #[inline]
    pub(super) fn bound(&self, port: u16) -> Option<usize> {
        let (floor, at) = (*self.ports.get(usize::from(port))?)?;
        let since = usize::try_from(self.spent - at).unwrap_or(usize::MAX);
        Some(floor.saturating_sub(since))
    }

    /// Port `port`'s rings were looked at: the least room was `floor`.
    pub(super) fn found(&mut self, port: u16, floor: usize) {
        let p = usize::from(port);
        if self.ports.len() <= p {
            self.ports.resize(p + 1, None);
            self.last.resize(p + 1, usize::MAX);
        }
        self.ports[p] = Some((floor, self.spent));
        self.last[p] = floor;
    }

    /// How much room to ask each of port `port`'s rings for when they are
    /// looked at: `far` while the port's rings last had room to spare, so
    /// that the floor lasts; a `batch` once one of them had less, as a
    /// ring that is nearly full stays so, and asking it for more than a
    /// batch would read its index (a cache line its NF writes) for a floor
    /// that would not last anyway.
    pub(super) fn want(&self, port: u16, batch: usize, far: usize) -> usize {
        match self.last.get(usize::from(port)) {
            Some(&last) if last < far => batch,
            _ => far,
        }
    }

    /// Every bound is unknown: the rings are looked at again.
    pub(super) fn forget(&mut self) {
        self.ports.iter_mut().for_each(|p| *p = None);
    }
}

#[cfg(test)]
mod tests {
    use super::RoomFloor;

    #[test]
    fn a_floor_shrinks_by_every_unit_handed_out_to_any_ring() {
        let mut f = RoomFloor::default();
        assert_eq!(f.bound(0), None, "never looked");
        f.found(0, 100);
        f.spend(30);
        assert_eq!(f.bound(0), Some(70));
        f.found(2, 50);
        assert_eq!(f.bound(1), None);
        assert_eq!(f.bound(2), Some(50), "what was spent before it is not its");
        f.spend(80);
        assert_eq!(f.bound(0), Some(0), "never below nothing");
        assert_eq!(f.bound(2), Some(0));
    }

    #[test]
    fn a_port_whose_rings_ran_short_asks_them_for_a_batch_only() {
        let mut f = RoomFloor::default();
        assert_eq!(f.want(0, 32, 256), 256, "never looked");
        f.found(0, 300);
        assert_eq!(f.want(0, 32, 256), 256);
        f.found(0, 100);
        f.forget();
        assert_eq!(f.want(0, 32, 256), 32, "kept across a forget");
        f.found(0, 256);
        assert_eq!(f.want(0, 32, 256), 256);
    }

    #[test]
    fn forgotten_floors_are_looked_at_again() {
        let mut f = RoomFloor::default();
        f.found(0, 100);
        f.found(1, 100);
        f.forget();
        assert_eq!((f.bound(0), f.bound(1)), (None, None));
        f.found(1, 10);
        assert_eq!(f.bound(1), Some(10));
    }
}
