//! The few operating-system primitives sluice needs beyond std: forking
//! NF processes from a template, tying their lifetime to their parent,
//! reaping them, ignoring terminal signals, naming and pinning threads,
//! putting large lookup tables on huge pages, reading the cycle counter,
//! prefetching cache lines and checking write access to a path.
//!
//! `fork` is only offered when the calling process is single-threaded
//! ([`fork_single_threaded`] checks `/proc/self/status`): after a fork only
//! the calling thread exists in the child, so forking a multi-threaded
//! process could leave locks held forever. sluice forks its template before
//! it starts any thread, and the template never starts one.
#![allow(unsafe_code)]

use std::io;

mod cgroup;
mod child;
mod cycles;
mod huge;
mod net;
mod prefetch;
pub mod sandbox;
mod sched_class;
mod schedstat;
mod zeroed;
pub use cgroup::{
    CpuGroups, Flavor as CgroupFlavor, LimitGroups, Limits, DEFAULT_WEIGHT, WEIGHTS as CPU_WEIGHTS,
};
pub use child::{
    close_fds_from, isolate_child_stdio, output_pipe, process_gone, raise_nofile_limit, ChildExits,
};
pub use cycles::{
    calibrate_cycles, cycles, cycles_calibration, cycles_to_ns, set_cycles_calibration,
};
pub use huge::{collapse_private_memory, copy_to_huge_pages, vec_on_huge_pages, HUGE_PAGE};
pub use net::{enter_netns, send_copies};
pub use prefetch::prefetch;
pub use zeroed::ZeroedTable;

pub use rustix::process::Pid;

/// Clock ticks per second of the kernel's process times (`/proc/PID/stat`
/// `utime`/`stime`; `sysconf(_SC_CLK_TCK)`).
pub fn clock_ticks_per_second() -> u64 {
    rustix::param::clock_ticks_per_second()
}

/// Which side of a fork we are on.
#[derive(Debug, PartialEq, Eq)]
pub enum Forked {
    /// The parent, with the child's pid.
    Parent(Pid),
    /// The child.
    Child,
}

/// Number of threads in this process: the link count of
/// `/proc/self/task` is two plus its threads (one `stat`; reading
/// `/proc/self/status`, which the kernel formats whole, took ~28 µs of
/// each NF fork), else the `Threads:` line of `/proc/self/status`.
pub fn thread_count() -> io::Result<usize> {
    if let Ok(st) = rustix::fs::stat("/proc/self/task") {
        if st.st_nlink >= 3 {
            return Ok((st.st_nlink - 2) as usize);
        }
    }
    threads_in_status()
}

/// The `Threads:` line of `/proc/self/status`.
fn threads_in_status() -> io::Result<usize> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| io::Error::other("no Threads: line in /proc/self/status"))
}

/// The calling thread's id (a pid of `/proc` for this thread alone).
pub fn gettid() -> Pid {
    rustix::thread::gettid()
}

/// Forks the calling process, which must be single-threaded.
pub fn fork_single_threaded() -> io::Result<Forked> {
    let threads = thread_count()?;
    if threads != 1 {
        return Err(io::Error::other(format!(
            "refusing to fork a process with {threads} threads (locks held by other threads would never be released in the child)"
        )));
    }
    // SAFETY: the process has exactly one thread (checked above), so the
    // child inherits a consistent state: no lock can be held by a thread
    // that does not exist in the child.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(Forked::Child),
        p => Pid::from_raw(p)
            .map(Forked::Parent)
            .ok_or_else(|| io::Error::other("fork returned an invalid pid")),
    }
}

/// Asks the kernel to SIGKILL this process when its parent dies, and
/// closes the race where the parent already died before the call.
pub fn die_with_parent(expected_parent: Pid) -> io::Result<()> {
    rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
    if rustix::process::getppid() != Some(expected_parent) {
        std::process::exit(1);
    }
    Ok(())
}

/// This process's id.
pub fn getpid() -> Pid {
    rustix::process::getpid()
}

/// Ignores SIGINT, SIGTERM and SIGPIPE in this process (inherited by its
/// children): NF processes and the template stop when the platform tells
/// them to, not when the terminal's Ctrl-C reaches the process group.
pub fn ignore_terminal_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGPIPE] {
        // SAFETY: installing SIG_IGN has no handler code and no
        // async-signal-safety requirement.
        unsafe {
            libc::signal(sig, libc::SIG_IGN);
        }
    }
}

/// How a reaped child ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExitStatus {
    /// Exited with this code.
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
    /// Killed by the kernel's OOM killer inside the memory limit of its
    /// control group (a SIGKILL, told apart by the group's `oom_kill`
    /// count).
    OutOfMemory,
}

impl std::fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExitStatus::Code(101) => write!(f, "panicked (exit code 101)"),
            ExitStatus::Signal(libc::SIGSYS) => write!(
                f,
                "killed by its sandbox (signal {} SIGSYS: a system call it may not make)",
                libc::SIGSYS
            ),
            ExitStatus::Code(c) => write!(f, "exited with code {c}"),
            ExitStatus::Signal(s) => write!(f, "killed by signal {s} ({})", signal_name(*s)),
            ExitStatus::OutOfMemory => write!(f, "killed at its memory limit (out of memory)"),
        }
    }
}

fn signal_name(s: i32) -> &'static str {
    match s {
        libc::SIGKILL => "SIGKILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        _ => "signal",
    }
}

/// Reaps one exited child without blocking.
pub fn reap_any() -> io::Result<Option<(Pid, ExitStatus)>> {
    match rustix::process::waitpid(None, rustix::process::WaitOptions::NOHANG) {
        Ok(Some((pid, st))) => {
            let status = if let Some(sig) = st.terminating_signal() {
                ExitStatus::Signal(sig)
            } else {
                ExitStatus::Code(st.exit_status().unwrap_or(-1))
            };
            Ok(Some((pid, status)))
        }
        Ok(None) => Ok(None),
        Err(rustix::io::Errno::CHILD) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Waits for a specific child to exit (blocking).
pub fn wait_for(pid: Pid) -> io::Result<ExitStatus> {
    loop {
        match rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty()) {
            Ok(Some((_, st))) => {
                return Ok(match st.terminating_signal() {
                    Some(sig) => ExitStatus::Signal(sig),
                    None => ExitStatus::Code(st.exit_status().unwrap_or(-1)),
                })
            }
            Ok(None) => continue,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Sends SIGKILL to `pid`.
pub fn kill(pid: Pid) -> io::Result<()> {
    Ok(rustix::process::kill_process(
        pid,
        rustix::process::Signal::KILL,
    )?)
}

/// Sends SIGTERM to `pid` (asks it to stop).
pub fn terminate(pid: Pid) -> io::Result<()> {
    Ok(rustix::process::kill_process(
        pid,
        rustix::process::Signal::TERM,
    )?)
}

/// Checks, without opening it, that this process may write the existing
/// file `path` or, for a directory, create files in it (write and search
/// permission): `faccessat(2)` with the effective uid and gid
/// (`AT_EACCESS`). A read-only file system fails with `EROFS`.
pub fn check_writable(path: &std::path::Path) -> io::Result<()> {
    use rustix::fs::{Access, AtFlags};
    let mut access = Access::WRITE_OK;
    if path.is_dir() {
        access |= Access::EXEC_OK;
    }
    Ok(rustix::fs::accessat(
        rustix::fs::CWD,
        path,
        access,
        AtFlags::EACCESS,
    )?)
}

/// Sets the calling thread's name (shown by `ps`/`top` for the process's
/// main thread; at most 15 bytes are kept).
pub fn set_thread_name(name: &str) {
    let mut n: Vec<u8> = name.bytes().filter(|&b| b != 0).take(15).collect();
    n.push(0);
    if let Ok(c) = std::ffi::CStr::from_bytes_with_nul(&n) {
        let _ = rustix::thread::set_name(c);
    }
}

/// Pins the calling thread to `cpu`.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    Ok(rustix::thread::sched_setaffinity(None, &set)?)
}

/// Pins process (main thread) `pid` to CPU `cpu`.
pub fn pin_process_to_cpu(pid: Pid, cpu: usize) -> io::Result<()> {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    Ok(rustix::thread::sched_setaffinity(Some(pid), &set)?)
}

/// Gives process `pid` the lowest CPU priority (nice 19): against NFs at
/// the default it gets about 1.5 % of a core it shares with them. For a
/// process that keeps its core without yielding (the scheduler's
/// containment of a hog).
pub fn deprioritize(pid: Pid) -> io::Result<()> {
    Ok(rustix::process::setpriority_process(Some(pid), 19)?)
}

/// This process's nice value (`None` if the kernel will not say).
pub fn own_nice() -> Option<i32> {
    rustix::process::getpriority_process(None).ok()
}

/// Sets this process's nice value (negative needs `CAP_SYS_NICE`).
pub fn set_own_nice(nice: i32) -> io::Result<()> {
    Ok(rustix::process::setpriority_process(None, nice)?)
}

pub use sched_class::{rr_timeslice_ms, sched_class, set_sched_class, SchedClass};
pub use schedstat::{cpu_times, sched_times, CpuTimesFile, SchedTimes};

/// CPUs this process may run on, ascending.
pub fn allowed_cpus() -> Vec<usize> {
    match rustix::thread::sched_getaffinity(None) {
        Ok(set) => (0..rustix::thread::CpuSet::MAX_CPU)
            .filter(|&c| set.is_set(c))
            .collect(),
        Err(_) => vec![0],
    }
}

/// Where the platform worker and each NF process run: the worker gets the
/// first allowed CPU and NF processes share the others round-robin, so the
/// worker never competes with an NF for its core (on a 2-core machine all
/// NFs share the second core). With one CPU everything shares it.
#[derive(Debug, Clone)]
pub struct Placement {
    cpus: Vec<usize>,
}

impl Placement {
    /// The placement over this process's allowed CPUs.
    pub fn current() -> Placement {
        let mut cpus = allowed_cpus();
        if cpus.is_empty() {
            cpus.push(0);
        }
        Placement { cpus }
    }

    /// CPU of the platform worker.
    pub fn worker_cpu(&self) -> usize {
        self.cpus[0]
    }

    /// CPU of worker `w` when several workers share out the flows: one
    /// worker per allowed CPU, wrapping around.
    pub fn shard_cpu(&self, w: usize) -> usize {
        self.cpus[w % self.cpus.len()]
    }

    /// CPU of the NF template of worker `w`, which forks every NF: where
    /// its first NF runs (one worker) or its shard's CPU (several), never
    /// a single worker's busy core, where each fork would wait for the
    /// kernel to preempt the worker.
    pub fn template_cpu(&self, w: usize, workers: usize) -> usize {
        if workers > 1 {
            self.shard_cpu(w)
        } else {
            self.nf_cpu(0)
        }
    }

    /// CPU of the `i`-th process NF.
    pub fn nf_cpu(&self, i: usize) -> usize {
        if self.cpus.len() == 1 {
            self.cpus[0]
        } else {
            self.cpus[1 + i % (self.cpus.len() - 1)]
        }
    }
}

/// Gives the CPU to another runnable thread, if any.
#[inline]
pub fn yield_now() {
    rustix::thread::sched_yield();
}

/// Waits up to `timeout_ms` for `fd` to become readable.
pub fn wait_readable(fd: std::os::fd::BorrowedFd<'_>, timeout_ms: i32) -> io::Result<bool> {
    wait_any_readable(&[fd], timeout_ms).map(|n| n > 0)
}

/// Waits up to `timeout_ms` for any of `fds` to become readable (or hung
/// up); returns how many are. An interrupted wait returns 0.
pub fn wait_any_readable(
    fds: &[std::os::fd::BorrowedFd<'_>],
    timeout_ms: i32,
) -> io::Result<usize> {
    use rustix::event::{poll, PollFd, PollFlags};
    let mut set: Vec<PollFd<'_>> = fds
        .iter()
        .map(|fd| PollFd::new(fd, PollFlags::IN))
        .collect();
    let ts = rustix::time::Timespec {
        tv_sec: (timeout_ms / 1000) as i64,
        tv_nsec: ((timeout_ms % 1000) as i64 * 1_000_000) as _,
    };
    match poll(&mut set, Some(&ts)) {
        Ok(n) => Ok(n),
        Err(rustix::io::Errno::INTR) => Ok(0),
        Err(e) => Err(e.into()),
    }
}

/// A descriptor that becomes readable when child `pid` exits (Linux 5.3+),
/// so a supervisor can sleep until something happens instead of polling
/// `waitpid` on a timer.
pub fn pidfd_open(pid: Pid) -> io::Result<std::os::fd::OwnedFd> {
    Ok(rustix::process::pidfd_open(
        pid,
        rustix::process::PidfdFlags::empty(),
    )?)
}

/// Duplicates descriptors `fds` of process `pid` into this one
/// (`pidfd_getfd(2)`, Linux 5.6+): each copy shares the open file
/// description with the original, as after `dup`, so a tap queue or a
/// socket keeps every frame waiting in it. The caller needs ptrace access
/// to `pid` (root, or `CAP_SYS_PTRACE`; under Yama's `ptrace_scope` 1 a
/// same-user process that is not an ancestor is refused with `EPERM`).
pub fn take_fds(pid: Pid, fds: &[i32]) -> io::Result<Vec<std::os::fd::OwnedFd>> {
    let pidfd = pidfd_open(pid)?;
    fds.iter()
        .map(|&fd| take_fd(std::os::fd::AsFd::as_fd(&pidfd), fd))
        .collect()
}

/// Duplicates descriptor `fd` of the process `pidfd` refers to, as
/// [`take_fds`] does (for a caller that keeps the pidfd).
pub fn take_fd(pidfd: std::os::fd::BorrowedFd<'_>, fd: i32) -> io::Result<std::os::fd::OwnedFd> {
    Ok(rustix::process::pidfd_getfd(
        pidfd,
        fd,
        rustix::process::PidfdGetfdFlags::empty(),
    )?)
}

/// CLOCK_MONOTONIC in nanoseconds (vDSO, no syscall).
#[inline]
pub fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// CPU time consumed by the calling thread, in nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_thread_count_from_the_task_directory_is_the_status_line() {
        // Other tests start and end threads meanwhile: a count is compared
        // only when the status line said the same just before and after.
        let agrees = || {
            (0..1000).any(|_| {
                let before = super::threads_in_status().unwrap();
                let counted = super::thread_count().unwrap();
                let after = super::threads_in_status().unwrap();
                before == after && {
                    assert_eq!(counted, before);
                    true
                }
            })
        };
        let (stop, wait) = std::sync::mpsc::channel::<()>();
        let wait = std::sync::Arc::new(std::sync::Mutex::new(wait));
        let mut threads = Vec::new();
        for _ in 0..3 {
            assert!(agrees(), "the thread count never held still");
            let w = wait.clone();
            threads.push(std::thread::spawn(move || {
                let _ = w.lock().unwrap().recv();
            }));
        }
        assert!(agrees(), "the thread count never held still");
        drop(stop);
        for t in threads {
            t.join().unwrap();
        }
    }

    use super::*;

    #[test]
    fn fork_is_refused_in_a_multithreaded_process() {
        // The test harness runs tests on worker threads, so there are ≥ 2.
        let _t = std::thread::spawn(|| std::thread::sleep(std::time::Duration::from_millis(200)));
        let err = fork_single_threaded().unwrap_err();
        assert!(err.to_string().contains("threads"), "{err}");
    }

    #[test]
    fn clocks_advance() {
        let a = monotonic_ns();
        let b = monotonic_ns();
        assert!(b >= a);
        assert!(thread_cpu_ns() > 0);
    }
}
