//! The kernel's scheduling view of a process: how long it ran and waited
//! for a CPU (`/proc/PID/schedstat`, Documentation/scheduler/sched-stats.rst)
//! and whether it is runnable now (`/proc/PID/stat`, field 3). Tells a
//! process that keeps its core (a spin loop) from one the host holds off
//! the core (an overcommitted vCPU, other tasks) and from one that blocked.
//!
//! The times of a process running on another CPU advance at that CPU's
//! scheduler ticks and switches, so compare them over windows of several
//! ticks (tens of milliseconds), not less.

use std::io;

use crate::Pid;

/// One look at a process's main thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SchedTimes {
    /// Time it has run on a CPU, ns.
    pub on_cpu_ns: u64,
    /// Time it has been runnable and waited on a run queue, ns.
    pub runnable_ns: u64,
    /// Times it was put on a CPU: its context switches in.
    pub timeslices: u64,
    /// It is running or waiting for a CPU now (state `R`), not asleep,
    /// blocked or stopped.
    pub runnable: bool,
}

/// Looks at `pid` (a process's main thread, or any thread by its id). Needs `CONFIG_SCHED_INFO` (every distribution kernel
/// has it); an error otherwise, or when the process is gone.
pub fn sched_times(pid: Pid) -> io::Result<SchedTimes> {
    let pid = pid.as_raw_nonzero();
    let times = std::fs::read_to_string(format!("/proc/{pid}/schedstat"))?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    parse(&times, &stat).ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad /proc line"))
}

/// Parses "on_cpu_ns runnable_ns timeslices" and the state after the
/// command name (which may hold spaces and parentheses: the last `)`
/// ends it).
fn parse(schedstat: &str, stat: &str) -> Option<SchedTimes> {
    let mut f = schedstat.split_ascii_whitespace().map(str::parse::<u64>);
    let on_cpu_ns = f.next()?.ok()?;
    let runnable_ns = f.next()?.ok()?;
    let timeslices = f.next()?.ok()?;
    let state = stat[stat.rfind(')')? + 1..]
        .split_ascii_whitespace()
        .next()?;
    Some(SchedTimes {
        on_cpu_ns,
        runnable_ns,
        timeslices,
        runnable: state == "R",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_times_and_the_state_and_rejects_anything_else() {
        let t = parse("130265418 3312872 262\n", "42 (a) b) c) S 1 42 42 0 -1");
        assert_eq!(
            t,
            Some(SchedTimes {
                on_cpu_ns: 130_265_418,
                runnable_ns: 3_312_872,
                timeslices: 262,
                runnable: false,
            })
        );
        assert!(parse("1 2 3", "7 (x) R 1").unwrap().runnable);
        for bad in ["", "1 2", "1 x 3", "-1 2 3", "1 2 99999999999999999999"] {
            assert_eq!(parse(bad, "7 (x) R 1"), None, "{bad:?}");
        }
        for bad in ["", "7 (x", "7 (x) "] {
            assert_eq!(parse("1 2 3", bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_spinning_process_is_runnable_and_gains_cpu_time() {
        // This test's thread, not the harness's main thread.
        let me = rustix::thread::gettid();
        let a = sched_times(me).unwrap();
        let until = crate::monotonic_ns() + 50_000_000;
        while crate::monotonic_ns() < until {
            std::hint::spin_loop();
        }
        let b = sched_times(me).unwrap();
        assert!(b.on_cpu_ns > a.on_cpu_ns, "{a:?} {b:?}");
        assert!(b.runnable, "it reads its own state while running");
        // Each sleep ends with a switch back in.
        for _ in 0..5 {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let c = sched_times(me).unwrap();
        assert!(c.timeslices >= b.timeslices + 5, "{b:?} {c:?}");
    }
}
