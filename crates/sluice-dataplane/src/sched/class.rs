//! The kernel class of NF processes (`settings.scheduler.kernel_class`):
//! the kernel's fair sharing, or real-time round robin (`SCHED_RR`). The
//! scheduler keeps every process NF of its worker in the class the policy
//! names, through starts, restarts and live changes of the policy.
//!
//! Round robin is mostly a baseline (UNiS, seed 001 §2.4: RR's slice is at
//! least 1 ms, too coarse for NFs; `sluice bench sched`, `chains`), but
//! also an operator's way to have NFs preempt every normal process of
//! their cores. Where the kernel refuses (no `CAP_SYS_NICE`), NFs stay in
//! the normal class, the log says why once, and the report counts the
//! NFs actually in real time (`realtime_nfs`).

use sluice_sys::{set_sched_class, Pid, SchedClass};

use super::Member;

/// One worker's NF classes.
#[derive(Debug)]
pub struct Classes {
    want: SchedClass,
    /// The pid by slot of every NF put in real time (a map: each change
    /// looks up every NF).
    realtime: std::collections::HashMap<u32, i32>,
    /// The kernel refused once: not retried (the host will not change).
    refused: bool,
}

impl Default for Classes {
    fn default() -> Self {
        Classes {
            want: SchedClass::Normal,
            realtime: Default::default(),
            refused: false,
        }
    }
}

impl Classes {
    /// Puts `members` in class `want`: new ones and restarted ones into
    /// real time if it is wanted, every NF back to normal when it no
    /// longer is. Forgets NFs that left.
    pub fn apply(&mut self, want: SchedClass, members: &[Member], pid_of: impl Fn(u32) -> i32) {
        // Only NFs in the real-time class are looked up (usually none:
        // a set of every member per change cost ~30 µs at a thousand).
        if !self.realtime.is_empty() {
            let live: std::collections::HashSet<(u32, i32)> =
                members.iter().map(|m| (m.slot, pid_of(m.slot))).collect();
            self.realtime
                .retain(|&slot, &mut pid| live.contains(&(slot, pid)));
        }
        if want != self.want && want == SchedClass::Normal {
            for (slot, pid) in std::mem::take(&mut self.realtime) {
                if let Some(p) = Pid::from_raw(pid) {
                    // A process gone meanwhile is restarted in the
                    // normal class anyway.
                    if let Err(e) = set_sched_class(p, SchedClass::Normal) {
                        tracing::debug!("NF slot {slot} (pid {pid}) stays real-time: {e}");
                    }
                }
            }
        }
        self.want = want;
        for m in members {
            self.spawned(m.slot, pid_of(m.slot));
        }
    }

    /// NF `slot` runs as process `pid` (a start or a restart): it takes
    /// the class.
    pub fn spawned(&mut self, slot: u32, pid: i32) {
        if self.want != SchedClass::RoundRobin || self.refused {
            return;
        }
        if self.realtime.get(&slot) == Some(&pid) {
            return;
        }
        let Some(p) = Pid::from_raw(pid) else {
            return;
        };
        match set_sched_class(p, SchedClass::RoundRobin) {
            Ok(()) => {
                self.realtime.insert(slot, pid);
            }
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                self.refused = true;
                tracing::warn!(
                    "NFs run in the kernel's normal class: real-time round robin \
                     (scheduler.kernel_class: round_robin) needs CAP_SYS_NICE ({e})"
                );
            }
            // The process may be gone already: it is placed again when it
            // is restarted.
            Err(e) => tracing::debug!("cannot make NF slot {slot} (pid {pid}) real-time: {e}"),
        }
    }

    /// NF processes in real time now.
    pub fn realtime(&self) -> usize {
        self.realtime.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wakeup::IdlePoll;
    use sluice_sys::sched_class;

    fn nf(slot: u32) -> Member {
        Member {
            slot,
            cpu: 1,
            order: (0, slot),
            beside_worker: false,
            weight: None,
            idle: IdlePoll::Always,
            domain: 0,
        }
    }

    /// The pids of `children` by slot (slot `k`: the `k`-th).
    fn pids<'c>(children: &'c [&std::process::Child]) -> impl Fn(u32) -> i32 + 'c {
        move |slot| children.get(slot as usize).map_or(0, |c| c.id() as i32)
    }

    fn class(child: &std::process::Child) -> Option<SchedClass> {
        sched_class(Pid::from_raw(child.id() as i32).unwrap()).unwrap()
    }

    fn sleeper() -> std::process::Child {
        std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap()
    }

    #[test]
    fn nfs_follow_the_class_through_restarts_and_back() {
        let (mut a, mut b, mut b2) = (sleeper(), sleeper(), sleeper());
        let mut c = Classes::default();
        c.apply(SchedClass::Normal, &[nf(0), nf(1)], pids(&[&a, &b]));
        assert_eq!(c.realtime(), 0);
        assert_eq!(class(&a), Some(SchedClass::Normal));
        c.apply(SchedClass::RoundRobin, &[nf(0), nf(1)], pids(&[&a, &b]));
        if c.refused {
            // Not allowed here (no CAP_SYS_NICE): nothing changed, and the
            // report says none is real-time.
            assert_eq!(c.realtime(), 0);
            assert_eq!(class(&a), Some(SchedClass::Normal));
        } else {
            assert_eq!(c.realtime(), 2);
            assert_eq!(class(&a), Some(SchedClass::RoundRobin));
            assert_eq!(class(&b), Some(SchedClass::RoundRobin));
            // NF 1 restarts as another process: the new one takes the
            // class, the old pid is forgotten.
            c.spawned(1, b2.id() as i32);
            assert_eq!(class(&b2), Some(SchedClass::RoundRobin));
            assert_eq!(c.realtime(), 2);
            c.apply(SchedClass::RoundRobin, &[nf(0), nf(1)], pids(&[&a, &b2]));
            assert_eq!(c.realtime(), 2);
            // The policy changes back: every NF returns to normal.
            c.apply(SchedClass::Normal, &[nf(0), nf(1)], pids(&[&a, &b2]));
            assert_eq!(c.realtime(), 0);
            assert_eq!(class(&a), Some(SchedClass::Normal));
            assert_eq!(class(&b2), Some(SchedClass::Normal));
            // A restarted NF under the normal class is left alone.
            c.spawned(1, b.id() as i32);
            assert_eq!(c.realtime(), 0);
        }
        for p in [&mut a, &mut b, &mut b2] {
            let _ = p.kill();
            let _ = p.wait();
        }
    }
}
