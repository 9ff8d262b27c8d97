//! Standbys: an NF instance made ready ahead of its start, so a restart
//! is a hand-over, not a fork (the lifecycle issue's warm pool, for the
//! one instance a shared NF has; the isolation issue's restart goal).
//!
//! Without one, a restart waits for the template to fork the shell, then
//! for the child to enter its trust domain, take its NF, open its handles
//! and close its sandbox (namespaces, uid, capabilities, the allow-list):
//! about 1.3 ms in the soak, most of it before the first packet could
//! flow. A standby has done all of that while the instance it stands in
//! for was still running, and waits, blocked in `read` on its standard
//! input (a pipe from the template), costing no CPU.
//!
//! The protocol, template side:
//!
//! - **Made** ([`Standbys::due`]) a little after each start of a request
//!   with `standby` (never during a burst of starts, which it would slow),
//!   for the request's slot, from the request itself: same recipe, shell,
//!   trust domain, sandbox and loop. Only for NFs with a shell whose build
//!   does not depend on the restart count (the standby is built before it
//!   knows which start it serves).
//! - **Taken** ([`Standbys::take`]) by the next start of the same slot
//!   whose [`SpawnRequest::standby_key`] matches; the template writes the
//!   [`Start`] (generation, restart count, CPU) to its pipe. A standby
//!   that does not match is killed and the start forks as without one.
//! - **Dropped** when the platform releases the slot (the NF is gone or
//!   will not restart), and with the template (its parent-death signal).
//! - **Lost**: a standby that exits before it is taken is not the
//!   platform's business (it never served): the template logs it and
//!   makes no other standby for the slot until the slot's next start, so
//!   a recipe that cannot stand by does not fork in a loop.
//!
//! Its memory limits hold from the fork, in limit groups of its own (a
//! slot's instance and standby are two processes, each with the NF's
//! `pids_max`), so nothing it touches is charged to the template.
//!
//! Child side ([`wait_for_start`]): the standby reads exactly one
//! [`Start`], checks it is for its slot, records its pid in the slot's
//! control block and enters the NF loop. Until then it has not touched the
//! slot, where the instance it stands in for may still run.

use std::collections::HashMap;
use std::os::fd::OwnedFd;

use super::proto::SpawnRequest;

/// How long after the last start the template makes standbys (ns): a
/// fork at once would take the CPU from the instance just started, and a
/// burst of creations would pay a second fork each.
pub const REFILL_DELAY_NS: u64 = 2_000_000;

/// What the template hands a standby: the start it serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Start {
    /// The slot (checked: a standby serves only its own).
    pub slot: u32,
    /// The generation it runs as.
    pub generation: u32,
    /// Instances of the NF that ran before in this slot.
    pub restarts: u32,
    /// The CPU it runs on (the template has pinned it there).
    pub cpu: u32,
}

impl Start {
    /// Its length on the pipe: one write, well under `PIPE_BUF`, so the
    /// standby reads it whole.
    pub const LEN: usize = 16;

    /// Its bytes (little-endian words).
    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        for (i, w) in [self.slot, self.generation, self.restarts, self.cpu]
            .iter()
            .enumerate()
        {
            b[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
        }
        b
    }

    /// Reads one back.
    pub fn decode(b: &[u8; Self::LEN]) -> Start {
        let w = |i: usize| u32::from_le_bytes([b[i * 4], b[i * 4 + 1], b[i * 4 + 2], b[i * 4 + 3]]);
        Start {
            slot: w(0),
            generation: w(1),
            restarts: w(2),
            cpu: w(3),
        }
    }

    /// Whether it is a start of `req`'s slot.
    pub fn check(&self, req: &SpawnRequest) -> Result<(), String> {
        if self.slot != req.slot {
            return Err(format!(
                "handed a start of slot {} while standing by for slot {}",
                self.slot, req.slot
            ));
        }
        Ok(())
    }
}

/// In a standby: blocks until the template hands over a start; `None`
/// when the template let it go (end of file) or the pipe broke.
pub fn wait_for_start() -> Option<Start> {
    let mut b = [0u8; Start::LEN];
    let mut got = 0;
    while got < Start::LEN {
        match rustix::io::read(rustix::stdio::stdin(), &mut b[got..]) {
            Ok(0) => return None,
            Ok(n) => got += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return None,
        }
    }
    Some(Start::decode(&b))
}

/// A parked standby, as its template knows it.
#[derive(Debug)]
pub struct Standby {
    /// Its pid.
    pub pid: i32,
    /// The request it was made for ([`SpawnRequest::standby_key`]).
    key: Vec<u8>,
    /// The CPU it pinned itself to.
    cpu: u32,
    /// The write end of its standard input.
    handover: OwnedFd,
}

/// A template's standbys, one per slot at most, and the slots due one.
#[derive(Debug, Default)]
pub struct Standbys {
    parked: HashMap<u32, Standby>,
    /// Slots due a standby, with the request to make it from.
    due: HashMap<u32, SpawnRequest>,
    /// When the due ones are made (`monotonic_ns`; 0: none due).
    due_at: u64,
}

/// What became of a start offered to [`Standbys::take`].
#[derive(Debug)]
pub enum Taken {
    /// The slot's standby runs it now.
    Handed {
        /// The standby's pid.
        pid: i32,
    },
    /// No standby (or an unusable one, killed): fork.
    Fork,
}

impl Standbys {
    /// Offers a start to the slot's standby. It takes it when it was made
    /// from the same request; otherwise it is killed (it would never
    /// serve) and the caller forks.
    pub fn take(&mut self, req: &SpawnRequest) -> Taken {
        let Some(s) = self.parked.remove(&req.slot) else {
            return Taken::Fork;
        };
        let start = Start {
            slot: req.slot,
            generation: req.generation,
            restarts: req.restarts,
            cpu: req.cpu,
        };
        let pid = sluice_sys::Pid::from_raw(s.pid);
        if s.key == req.standby_key() {
            if let (Some(p), true) = (pid, s.cpu != req.cpu) {
                // Its CPU changed since it was made; it can no longer set
                // it itself (its allow-list).
                let _ = sluice_sys::pin_process_to_cpu(p, req.cpu as usize);
            }
            if rustix::io::write(&s.handover, &start.encode()) == Ok(Start::LEN) {
                return Taken::Handed { pid: s.pid };
            }
        }
        if let Some(p) = pid {
            let _ = sluice_sys::kill(p);
        }
        Taken::Fork
    }

    /// Notes that `req`'s slot should have a standby, made at the next
    /// [`Self::due`] at least [`REFILL_DELAY_NS`] from `now`.
    pub fn want(&mut self, req: &SpawnRequest, now: u64) {
        self.due.insert(req.slot, req.clone());
        self.due_at = now + REFILL_DELAY_NS;
    }

    /// When the next standbys are due (`None`: none are).
    pub fn due_at(&self) -> Option<u64> {
        (!self.due.is_empty()).then_some(self.due_at)
    }

    /// The requests to make standbys from now, if it is time.
    pub fn due(&mut self, now: u64) -> Vec<SpawnRequest> {
        if self.due.is_empty() || now < self.due_at {
            return Vec::new();
        }
        let mut due: Vec<SpawnRequest> = self.due.drain().map(|(_, r)| r).collect();
        due.sort_by_key(|r| r.slot);
        due
    }

    /// Records a standby made for `req`.
    pub fn parked(&mut self, req: &SpawnRequest, pid: i32, handover: OwnedFd) {
        let old = self.parked.insert(
            req.slot,
            Standby {
                pid,
                key: req.standby_key(),
                cpu: req.cpu,
                handover,
            },
        );
        if let Some(p) = old.and_then(|o| sluice_sys::Pid::from_raw(o.pid)) {
            let _ = sluice_sys::kill(p);
        }
    }

    /// The slot will not start again: its standby is killed and none is
    /// made. Returns the pid killed.
    pub fn release(&mut self, slot: u32) -> Option<i32> {
        self.due.remove(&slot);
        let s = self.parked.remove(&slot)?;
        if let Some(p) = sluice_sys::Pid::from_raw(s.pid) {
            let _ = sluice_sys::kill(p);
        }
        Some(s.pid)
    }

    /// A parked standby exited (it never served): forget it.
    pub fn lost(&mut self, slot: u32, pid: i32) {
        if self.parked.get(&slot).is_some_and(|s| s.pid == pid) {
            self.parked.remove(&slot);
        }
    }

    /// Standbys parked.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.parked.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_survives_the_pipe() {
        let s = Start {
            slot: 70,
            generation: u32::MAX,
            restarts: 3,
            cpu: 1,
        };
        assert_eq!(Start::decode(&s.encode()), s);
    }

    #[test]
    fn due_waits_for_the_delay_and_keeps_one_request_per_slot() {
        let mut st = Standbys::default();
        let mut req = SpawnRequest::test_request(5);
        st.want(&req, 1_000);
        req.restarts = 1;
        st.want(&req, 2_000);
        assert_eq!(st.due_at(), Some(2_000 + REFILL_DELAY_NS));
        assert!(st.due(2_000 + REFILL_DELAY_NS - 1).is_empty());
        let due = st.due(2_000 + REFILL_DELAY_NS);
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].restarts, 1);
        assert_eq!(st.due_at(), None);
        // Released before it was made: never made.
        st.want(&req, 0);
        assert_eq!(st.release(5), None);
        assert!(st.due(u64::MAX).is_empty());
    }

    #[test]
    fn the_key_ignores_what_a_start_decides_and_nothing_else() {
        let a = SpawnRequest::test_request(5);
        let mut b = a.clone();
        b.generation = 9;
        b.restarts = 4;
        b.cpu = 1;
        assert_eq!(a.standby_key(), b.standby_key());
        let mut c = a.clone();
        c.domain = 1;
        assert_ne!(a.standby_key(), c.standby_key());
        let mut d = a.clone();
        d.sandbox.seccomp = !d.sandbox.seccomp;
        assert_ne!(a.standby_key(), d.standby_key());
        let mut e = a.clone();
        e.recipe.name = "other".into();
        assert_ne!(a.standby_key(), e.standby_key());
    }

    #[test]
    fn a_start_goes_to_a_matching_standby_only() {
        let mut st = Standbys::default();
        let req = SpawnRequest::test_request(5);
        // No standby parked.
        assert!(matches!(st.take(&req), Taken::Fork));
        // A parked "standby" whose pipe we read: a start of the same
        // request goes down the pipe whole.
        let (r, w) = rustix::pipe::pipe().expect("pipe");
        // Above any pid the kernel hands out: nothing is signalled or
        // pinned by mistake. Same CPU: the start writes to the pipe only.
        let nobody = 0x3fff_fff0;
        st.parked(&req, nobody, w);
        assert_eq!(st.len(), 1);
        let mut start = req.clone();
        start.generation = 7;
        start.restarts = 2;
        assert!(matches!(st.take(&start), Taken::Handed { pid } if pid == nobody));
        let mut b = [0u8; Start::LEN];
        assert_eq!(rustix::io::read(&r, &mut b), Ok(Start::LEN));
        let got = Start::decode(&b);
        assert_eq!((got.slot, got.generation, got.restarts), (5, 7, 2));
        assert_eq!(st.len(), 0);
        // One made for another request is not handed the start.
        let (_r, w) = rustix::pipe::pipe().expect("pipe");
        st.parked(&req, nobody, w);
        let mut other = req.clone();
        other.recipe.name = "other".into();
        assert!(matches!(st.take(&other), Taken::Fork));
        assert_eq!(st.len(), 0);
    }
}
