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
use crate::polling::LoopConfig;

/// How long after the last start the template makes standbys (ns): a
/// fork at once would take the CPU from the instance just started, and a
/// burst of creations would pay a second fork each.
pub const REFILL_DELAY_NS: u64 = 2_000_000;

/// What the template hands a standby: the start it serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Start {
    /// The slot (checked: a standby serves only its own).
    pub slot: u32,
    /// The generation it runs as.
    pub generation: u32,
    /// Instances of the NF that ran before in this slot.
    pub restarts: u32,
    /// The CPU it runs on (the template has pinned it there).
    pub cpu: u32,
    /// How its loop shares its core until the scheduler publishes its
    /// budget (a spare was made before the NFs on its core were counted).
    pub loop_cfg: LoopConfig,
    /// The instance's name: a spare made for another NF's recipe, whose
    /// build did not read the name, runs as the NF that takes it.
    pub name: String,
}

impl Start {
    /// The words before the name: slot, generation, restarts, CPU, the
    /// loop's batch, yield rule, busy-poll window (two words) and yield
    /// while polling, and the name's length.
    const HEADER: usize = 40;
    /// The longest name handed over: the whole start stays one write
    /// under `PIPE_BUF`, so the standby reads it whole.
    pub const NAME_MAX: usize = 2048;

    /// Its bytes (little-endian words, then the name); `None` when the
    /// name is longer than [`Self::NAME_MAX`].
    pub fn encode(&self) -> Option<Vec<u8>> {
        if self.name.len() > Self::NAME_MAX {
            return None;
        }
        let mut b = Vec::with_capacity(Self::HEADER + self.name.len());
        let c = &self.loop_cfg;
        let words = [
            self.slot,
            self.generation,
            self.restarts,
            self.cpu,
            c.batch as u32,
            c.yield_every,
            c.busy_poll_ns as u32,
            (c.busy_poll_ns >> 32) as u32,
            u32::from(c.yield_while_polling),
            self.name.len() as u32,
        ];
        for w in words {
            b.extend_from_slice(&w.to_le_bytes());
        }
        b.extend_from_slice(self.name.as_bytes());
        Some(b)
    }

    /// Reads one from `input` (the standby's stdin); `None` at its end,
    /// or when what comes is not a start.
    pub fn read(input: impl std::os::fd::AsFd) -> Option<Start> {
        let mut h = [0u8; Self::HEADER];
        super::spare::read_exact(&input, &mut h)?;
        let w = |i: usize| u32::from_le_bytes([h[i * 4], h[i * 4 + 1], h[i * 4 + 2], h[i * 4 + 3]]);
        let len = w(9) as usize;
        if len > Self::NAME_MAX {
            return None;
        }
        let mut name = vec![0u8; len];
        super::spare::read_exact(&input, &mut name)?;
        Some(Start {
            slot: w(0),
            generation: w(1),
            restarts: w(2),
            cpu: w(3),
            loop_cfg: LoopConfig {
                batch: w(4) as usize,
                yield_every: w(5),
                busy_poll_ns: u64::from(w(6)) | (u64::from(w(7)) << 32),
                yield_while_polling: w(8) != 0,
            },
            name: String::from_utf8(name).ok()?,
        })
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
    Start::read(rustix::stdio::stdin())
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
    /// Made as its worker's spare, for the next NF of its recipe whatever
    /// its name (`key` is [`SpawnRequest::spare_key`]).
    spare: bool,
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
        /// It was the worker's spare.
        spare: bool,
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
            loop_cfg: req.loop_cfg,
            name: req.name.clone(),
        };
        let pid = sluice_sys::Pid::from_raw(s.pid);
        let key = if s.spare {
            req.spare_key()
        } else {
            req.standby_key()
        };
        if let (true, Some(bytes)) = (s.key == key, start.encode()) {
            if let (Some(p), true) = (pid, s.cpu != req.cpu) {
                // Its CPU changed since it was made; it can no longer set
                // it itself (its allow-list).
                let _ = sluice_sys::pin_process_to_cpu(p, req.cpu as usize);
            }
            if rustix::io::write(&s.handover, &bytes) == Ok(bytes.len()) {
                return Taken::Handed {
                    pid: s.pid,
                    spare: s.spare,
                };
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

    /// Records a standby made for `req` (as the worker's spare: for the
    /// next NF like it, whatever its name).
    pub fn parked(&mut self, req: &SpawnRequest, pid: i32, handover: OwnedFd, spare: bool) {
        let key = if spare {
            req.spare_key()
        } else {
            req.standby_key()
        };
        let old = self.parked.insert(
            req.slot,
            Standby {
                pid,
                key,
                cpu: req.cpu,
                handover,
                spare,
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

    /// Whether a standby waits in `slot`.
    pub fn has(&self, slot: u32) -> bool {
        self.parked.contains_key(&slot)
    }

    /// Whether a spare made like `like` waits in its slot.
    pub fn spare_for(&self, like: &SpawnRequest) -> bool {
        self.parked
            .get(&like.slot)
            .is_some_and(|s| s.spare && s.key == like.spare_key())
    }

    /// Whether the one in `slot` is the worker's spare.
    pub fn is_spare(&self, slot: u32) -> bool {
        self.parked.get(&slot).is_some_and(|s| s.spare)
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
    fn a_start_survives_the_pipe_and_a_torn_or_garbled_one_is_none() {
        let s = Start {
            slot: 70,
            generation: u32::MAX,
            restarts: 3,
            cpu: 1,
            loop_cfg: LoopConfig::for_sharing(32, 3, Some(123_456_789_000)),
            name: "n58".into(),
        };
        let bytes = s.encode().expect("fits");
        let (r, w) = rustix::pipe::pipe().expect("pipe");
        rustix::io::write(&w, &bytes).expect("write");
        assert_eq!(Start::read(&r), Some(s.clone()));
        // Cut short, then the template let it go.
        rustix::io::write(&w, &bytes[..bytes.len() - 1]).expect("write");
        drop(w);
        assert_eq!(Start::read(&r), None);
        // A name that is not UTF-8, or longer than a start may carry.
        let (r, w) = rustix::pipe::pipe().expect("pipe");
        let mut bad = bytes[..36].to_vec();
        bad.extend_from_slice(&2u32.to_le_bytes());
        bad.extend_from_slice(&[0xff, 0xfe]);
        bad.extend_from_slice(&bytes[..36]);
        bad.extend_from_slice(&u32::MAX.to_le_bytes());
        rustix::io::write(&w, &bad).expect("write");
        assert_eq!(Start::read(&r), None);
        assert_eq!(Start::read(&r), None);
        let long = Start {
            name: "x".repeat(Start::NAME_MAX + 1),
            ..s
        };
        assert!(long.encode().is_none());
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
        st.parked(&req, nobody, w, false);
        assert_eq!(st.len(), 1);
        let mut start = req.clone();
        start.generation = 7;
        start.restarts = 2;
        assert!(matches!(st.take(&start), Taken::Handed { pid, spare: false } if pid == nobody));
        let got = Start::read(&r).expect("a start");
        assert_eq!((got.slot, got.generation, got.restarts), (5, 7, 2));
        assert_eq!(got.name, "a");
        assert_eq!(st.len(), 0);
        // One made for another request is not handed the start.
        let (_r, w) = rustix::pipe::pipe().expect("pipe");
        st.parked(&req, nobody, w, false);
        let mut other = req.clone();
        other.recipe.name = "other".into();
        assert!(matches!(st.take(&other), Taken::Fork));
        assert_eq!(st.len(), 0);
    }

    #[test]
    fn a_spare_serves_the_next_nf_of_its_recipe_whatever_its_name() {
        let mut st = Standbys::default();
        let like = SpawnRequest::test_request(9);
        let (r, w) = rustix::pipe::pipe().expect("pipe");
        let nobody = 0x3fff_fff0;
        st.parked(&like, nobody, w, true);
        assert!(st.has(9) && st.is_spare(9) && st.spare_for(&like));
        let mut next = like.clone();
        next.name = "n58".into();
        next.recipe.name = "n58".into();
        next.standby = true;
        next.generation = 3;
        // Its loop is handed over with the start.
        next.loop_cfg = LoopConfig::for_sharing(8, 5, None);
        assert!(st.spare_for(&next));
        assert!(matches!(st.take(&next), Taken::Handed { spare: true, .. }));
        let got = Start::read(&r).expect("a start");
        assert_eq!((got.slot, got.generation, got.name.as_str()), (9, 3, "n58"));
        assert_eq!(got.loop_cfg, next.loop_cfg);
        // Not an NF of another sandbox or trust domain.
        let (_r, w) = rustix::pipe::pipe().expect("pipe");
        st.parked(&like, nobody, w, true);
        let mut other = next.clone();
        other.sandbox.seccomp = !other.sandbox.seccomp;
        assert!(!st.spare_for(&other));
        assert!(matches!(st.take(&other), Taken::Fork));
        assert!(!st.has(9));
    }
}
