//! The kernel scheduling class of a process: the default time-sharing
//! class (`SCHED_OTHER`, EEVDF on Linux 6.6+) or round-robin real time
//! (`SCHED_RR`). Real time is one of the baselines the platform's own
//! scheduler is measured against (UNiS, seed 001 §2.4: RR's slice cannot
//! go below 1 ms), and an operator's choice for NFs that must preempt
//! everything else on their core.

use std::io;

use rustix::process::Pid;

/// A kernel scheduling class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchedClass {
    /// `SCHED_OTHER`: the kernel's fair time sharing.
    Normal,
    /// `SCHED_RR` at the lowest real-time priority (1): runs before every
    /// normal process of its CPU, round-robin with others of its priority
    /// every `sched_rr_timeslice_ms`. The kernel's real-time throttling
    /// (`sched_rt_runtime_us`) still leaves normal processes their share.
    RoundRobin,
}

/// Puts process `pid` (its main thread) in `class`. Needs `CAP_SYS_NICE`
/// for [`SchedClass::RoundRobin`].
pub fn set_sched_class(pid: Pid, class: SchedClass) -> io::Result<()> {
    let (policy, priority) = match class {
        SchedClass::Normal => (libc::SCHED_OTHER, 0),
        SchedClass::RoundRobin => (libc::SCHED_RR, 1),
    };
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `param` is a valid, initialised `sched_param` that outlives
    // the call; the kernel only reads it. An unknown pid is an error
    // return (ESRCH), not undefined behaviour.
    let r = unsafe { libc::sched_setscheduler(pid.as_raw_nonzero().get(), policy, &param) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The class process `pid` runs in (`None`: another class, e.g. FIFO).
pub fn sched_class(pid: Pid) -> io::Result<Option<SchedClass>> {
    // SAFETY: takes a pid by value and touches no memory of ours.
    let r = unsafe { libc::sched_getscheduler(pid.as_raw_nonzero().get()) };
    match r {
        -1 => Err(io::Error::last_os_error()),
        libc::SCHED_OTHER => Ok(Some(SchedClass::Normal)),
        libc::SCHED_RR => Ok(Some(SchedClass::RoundRobin)),
        _ => Ok(None),
    }
}

/// The kernel's round-robin slice, ms (`/proc/sys/kernel/sched_rr_timeslice_ms`).
pub fn rr_timeslice_ms() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/kernel/sched_rr_timeslice_ms")
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_moves_between_classes_where_allowed() {
        let me = crate::getpid();
        assert_eq!(sched_class(me).unwrap(), Some(SchedClass::Normal));
        // A child of ours, so the test never changes its own class.
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let pid = Pid::from_raw(child.id() as i32).unwrap();
        match set_sched_class(pid, SchedClass::RoundRobin) {
            Ok(()) => {
                assert_eq!(sched_class(pid).unwrap(), Some(SchedClass::RoundRobin));
                set_sched_class(pid, SchedClass::Normal).unwrap();
                assert_eq!(sched_class(pid).unwrap(), Some(SchedClass::Normal));
            }
            // Without CAP_SYS_NICE the kernel refuses, and says so.
            Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{e}"),
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    #[test]
    fn a_process_that_is_gone_is_an_error_not_a_crash() {
        // pid_max is at most 2^22: this pid cannot exist.
        let gone = Pid::from_raw(4_194_304 + 7).unwrap();
        assert!(set_sched_class(gone, SchedClass::RoundRobin).is_err());
        assert!(sched_class(gone).is_err());
    }
}
