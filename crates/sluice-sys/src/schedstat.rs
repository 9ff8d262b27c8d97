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
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicUsize, Ordering};

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
    let (mut times, mut stat) = ([0u8; 128], [0u8; 1024]);
    let times = read_proc(pid, "schedstat", &mut times)?;
    let stat = read_proc(pid, "stat", &mut stat)?;
    parse(times, stat).ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad /proc line"))
}

/// How long `pid` has run on a CPU, ns, and how many times it was put on
/// one: what CPU accounting needs, from `/proc/PID/schedstat` alone.
/// [`sched_times`] also reads the state from `/proc/PID/stat`, which the
/// kernel formats from some fifty fields (the memory ones walk the
/// process's address space): most of a look's cost, read a few times a
/// millisecond by a worker for its NFs' accounting.
pub fn cpu_times(pid: Pid) -> io::Result<(u64, u64)> {
    let mut buf = [0u8; 128];
    let (on_cpu_ns, _, timeslices) = parse_times(read_proc(pid, "schedstat", &mut buf)?)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad /proc line"))?;
    Ok((on_cpu_ns, timeslices))
}

/// `/proc/PID/schedstat` held open, so that a look at a process's CPU
/// time is one `pread` (~0.6 µs) instead of a path walk, an open, a read
/// and a close (~5 µs; 2 vCPU AMD EPYC, 2026-11-29): most of what a
/// report over 1,000 process NFs and a worker's turn-taking reads of them
/// cost. The file is the process's, not its number's: once
/// the process is gone a read fails (ESRCH) even if another process took
/// its pid.
///
/// Each one holds a descriptor; at most half the soft `RLIMIT_NOFILE` are
/// held at once (the rest stay for sockets, pipes and NFs), past which
/// [`CpuTimesFile::open`] gives `None` and the caller reads by path
/// ([`cpu_times`]).
#[derive(Debug)]
pub struct CpuTimesFile {
    fd: OwnedFd,
}

/// Descriptors held by [`CpuTimesFile`]s in this process. A bound, not a
/// synchronisation: Relaxed.
static KEPT: AtomicUsize = AtomicUsize::new(0);

impl CpuTimesFile {
    /// Opens `pid`'s file, or `None` when the descriptors this process
    /// may keep for them are all held.
    pub fn open(pid: Pid) -> io::Result<Option<CpuTimesFile>> {
        let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
            .current
            .unwrap_or(u64::MAX);
        let cap = usize::try_from(limit / 2).unwrap_or(usize::MAX);
        if KEPT.fetch_add(1, Ordering::Relaxed) >= cap {
            KEPT.fetch_sub(1, Ordering::Relaxed);
            return Ok(None);
        }
        match open_proc(pid, "schedstat") {
            Ok(fd) => Ok(Some(CpuTimesFile { fd })),
            Err(e) => {
                KEPT.fetch_sub(1, Ordering::Relaxed);
                Err(e)
            }
        }
    }

    /// What [`cpu_times`] reads, now: (ns on a CPU, times put on one).
    pub fn read(&self) -> io::Result<(u64, u64)> {
        let mut buf = [0u8; 128];
        let (on_cpu_ns, _, timeslices) = parse_times(read_whole(&self.fd, &mut buf)?)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad /proc line"))?;
        Ok((on_cpu_ns, timeslices))
    }

    /// Descriptors held by this process's files now.
    pub fn held() -> usize {
        KEPT.load(Ordering::Relaxed)
    }
}

impl Drop for CpuTimesFile {
    fn drop(&mut self) {
        KEPT.fetch_sub(1, Ordering::Relaxed);
    }
}

/// `/proc/PID/NAME`, read whole into `buf`, without allocating: a worker
/// reads its NFs' times between packets.
fn read_proc<'b>(pid: Pid, name: &str, buf: &'b mut [u8]) -> io::Result<&'b str> {
    read_whole(&open_proc(pid, name)?, buf)
}

/// Opens `/proc/PID/NAME` for reading, the path built on the stack.
fn open_proc(pid: Pid, name: &str) -> io::Result<OwnedFd> {
    use std::io::Write;
    let mut path = [0u8; 48];
    let len = {
        let mut w = &mut path[..];
        write!(w, "/proc/{}/{name}\0", pid.as_raw_nonzero())
            .map_err(|_| io::ErrorKind::InvalidInput)?;
        let left = w.len();
        path.len() - left
    };
    let path = std::ffi::CStr::from_bytes_with_nul(&path[..len])
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    Ok(rustix::fs::open(
        path,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?)
}

/// The file from its start, whole, into `buf`: each read from offset 0
/// makes the kernel write the file anew (seq_file). A file that fills
/// `buf` is refused rather than cut (the files read here are a line of
/// numbers).
fn read_whole<'b>(fd: &OwnedFd, buf: &'b mut [u8]) -> io::Result<&'b str> {
    let mut n = 0;
    loop {
        match rustix::io::pread(fd, &mut buf[n..], n as u64)? {
            0 => break,
            k => n += k,
        }
        if n == buf.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "/proc line too long",
            ));
        }
    }
    std::str::from_utf8(&buf[..n]).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))
}

/// Parses "on_cpu_ns runnable_ns timeslices".
fn parse_times(schedstat: &str) -> Option<(u64, u64, u64)> {
    let mut f = schedstat.split_ascii_whitespace().map(str::parse::<u64>);
    Some((f.next()?.ok()?, f.next()?.ok()?, f.next()?.ok()?))
}

/// Parses the times and the state after the command name (which may hold
/// spaces and parentheses: the last `)` ends it).
fn parse(schedstat: &str, stat: &str) -> Option<SchedTimes> {
    let (on_cpu_ns, runnable_ns, timeslices) = parse_times(schedstat)?;
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
    fn cpu_times_are_the_schedstat_ones_and_grow() {
        // This test's thread, not the harness's main thread.
        let me = rustix::thread::gettid();
        let (a, n) = cpu_times(me).unwrap();
        let t = sched_times(me).unwrap();
        assert!(t.on_cpu_ns >= a && t.timeslices >= n);
        let spin = std::time::Instant::now();
        while spin.elapsed() < std::time::Duration::from_millis(30) {}
        let (b, _) = cpu_times(me).unwrap();
        assert!(b > a, "{a} then {b}");
        assert!(cpu_times(Pid::from_raw(i32::MAX - 1).unwrap()).is_err());
    }

    #[test]
    fn a_proc_file_is_read_whole_or_refused() {
        let me = rustix::thread::gettid();
        let mut big = [0u8; 1024];
        let stat = read_proc(me, "stat", &mut big).unwrap();
        assert!(
            stat.starts_with(&format!("{} (", me.as_raw_nonzero())),
            "{stat}"
        );
        assert!(stat.ends_with('\n'), "whole: {stat}");
        let e = read_proc(me, "stat", &mut [0u8; 8]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "cut, not refused");
        assert!(read_proc(me, "no-such-file", &mut big).is_err());
    }

    #[test]
    fn a_kept_file_reads_fresh_times_and_fails_once_its_process_is_gone() {
        let mut kid = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap();
        let pid = Pid::from_raw(kid.id() as i32).unwrap();
        let held = CpuTimesFile::held();
        let file = CpuTimesFile::open(pid).unwrap().expect("under the cap");
        assert_eq!(CpuTimesFile::held(), held + 1);
        let (a, _) = file.read().unwrap();
        let until = crate::monotonic_ns() + 60_000_000;
        let mut b = a;
        while b == a && crate::monotonic_ns() < until {
            std::thread::sleep(std::time::Duration::from_millis(5));
            b = file.read().unwrap().0;
        }
        assert!(
            b > a,
            "the same descriptor reads the time anew: {a} then {b}"
        );
        let (by_path, _) = cpu_times(pid).unwrap();
        assert!(by_path >= b, "{by_path} < {b}");
        kid.kill().unwrap();
        kid.wait().unwrap();
        let e = file.read().unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ESRCH), "{e}");
        drop(file);
        assert_eq!(CpuTimesFile::held(), held);
        assert!(CpuTimesFile::open(pid).is_err(), "a reaped pid has no file");
        assert_eq!(CpuTimesFile::held(), held, "a failed open holds nothing");
    }

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
