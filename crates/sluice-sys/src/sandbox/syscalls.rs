//! The two system call lists of an NF's sandbox, each entry with why, and
//! their compilation into seccomp programs (by `seccompiler`, the filter
//! compiler Firecracker uses).
//!
//! The run-phase list is what the NF loop and an NF's `process`, `tick`
//! and `stop` need: memory for the allocator, the futex and yield of the
//! wake-word protocol, clocks, writing logs and to handles opened before
//! the sandbox closed, and ending. Kept short on purpose: each entry is
//! kernel attack surface an NF can reach.

use std::collections::BTreeMap;
use std::io;

use seccompiler::{
    SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op, SeccompCondition as Cond,
    SeccompFilter, SeccompRule, TargetArch,
};

/// `prctl(PR_GET_AUXV)` (Linux 6.4; not in every libc).
const PR_GET_AUXV: u64 = 0x4155_5856;

/// A compiled seccomp program.
pub(super) type Program = Vec<seccompiler::sock_filter>;

/// A system call and why it is on its list.
pub struct Entry {
    /// `libc`'s constant for it (`SYS_write`).
    constant: &'static str,
    /// Its number on this architecture.
    pub nr: libc::c_long,
    /// Why.
    pub why: &'static str,
}

impl Entry {
    /// Its name, as in `man 2` (`write`).
    pub fn name(&self) -> &'static str {
        self.constant.trim_start_matches("SYS_")
    }
}

/// `entries! { SYS_write => "why", ... }`: the number comes from `libc`,
/// the name from the constant, so the two cannot disagree.
macro_rules! entries {
    ($( $sys:ident => $why:literal, )*) => {
        &[$( Entry { constant: stringify!($sys), nr: libc::$sys, why: $why }, )*]
    };
}

/// What an NF may do once it runs. Anything else kills it (`SIGSYS`).
/// `mmap` and `mprotect` are allowed without `PROT_EXEC` only, `tgkill`
/// and `tkill` only at the NF itself, `prctl` only to read the auxiliary
/// vector, `fcntl` only to read flags (see [`run_filter`]).
pub const RUN_ALLOWED: &[Entry] = entries! {
    SYS_write => "log lines (its stderr is a pipe to the template) and records to handles opened before the sandbox closed",
    SYS_writev => "vectored writes of the same",
    SYS_read => "reading what it was handed; no handle to read is opened after the sandbox closes",
    SYS_close => "dropping a handle it holds",
    SYS_fcntl => "F_GETFD and F_GETFL only: std checks a descriptor is open before it closes it (debug builds)",
    SYS_fstat => "the size of a handle it holds",
    SYS_lseek => "positioning in a file it holds",
    SYS_fsync => "flushing a capture or alert file at stop",
    SYS_fdatasync => "same",
    SYS_sendto => "IPFIX export on the socket opened at build",
    SYS_sendmsg => "same",
    SYS_mmap => "the allocator (never executable)",
    SYS_mprotect => "the allocator's arenas (never executable)",
    SYS_munmap => "the allocator",
    SYS_mremap => "the allocator (growing vectors)",
    SYS_madvise => "the allocator returning memory",
    SYS_brk => "the allocator's main heap",
    SYS_futex => "the wake-word protocol: sleeping on its slot and waking its worker",
    SYS_sched_yield => "giving its core to the next NF after a batch",
    SYS_sched_getaffinity => "std's view of the CPUs it may run on",
    SYS_clock_gettime => "CLOCK_THREAD_CPUTIME_ID for its own CPU time (the monotonic clock is in the vDSO)",
    SYS_clock_getres => "same",
    SYS_clock_nanosleep => "sleeping until a tick",
    SYS_nanosleep => "same",
    SYS_gettimeofday => "the vDSO's fallback",
    SYS_getrandom => "hash-table seeds",
    SYS_getpid => "its own pid",
    SYS_gettid => "its own thread id",
    SYS_rt_sigreturn => "returning from a signal handler",
    SYS_rt_sigprocmask => "abort() and panics mask signals",
    SYS_rt_sigaction => "abort() resets SIGABRT's handler",
    SYS_sigaltstack => "the guard stack std sets up",
    SYS_restart_syscall => "a sleep interrupted by a stop/continue",
    SYS_tgkill => "abort() signals itself",
    SYS_tkill => "same, older libcs",
    SYS_prctl => "PR_GET_AUXV only: std's CPU feature detection reads the auxiliary vector on first use",
    SYS_exit => "ending",
    SYS_exit_group => "ending",
};

/// What an NF may not do even while it is built (kills it): run another
/// program, create a process, reach another process, change the system.
pub const BUILD_DENIED: &[Entry] = entries! {
    SYS_execve => "running another program",
    SYS_execveat => "same",
    SYS_fork => "creating a process (its NF slot is its only process)",
    SYS_vfork => "same",
    SYS_clone => "same, unless it creates a thread (CLONE_THREAD)",
    SYS_ptrace => "reading or changing another process",
    SYS_process_vm_readv => "reading another process's memory",
    SYS_process_vm_writev => "writing another process's memory",
    SYS_pidfd_getfd => "stealing another process's descriptors",
    SYS_pidfd_send_signal => "signalling another process",
    SYS_kill => "signalling another process (tgkill at itself is allowed: abort)",
    SYS_tgkill => "signalling another process",
    SYS_tkill => "same",
    SYS_mount => "changing the host's mounts",
    SYS_umount2 => "same",
    SYS_pivot_root => "same",
    SYS_chroot => "same",
    SYS_setns => "entering another namespace (the platform's network, say)",
    SYS_bpf => "loading eBPF (the platform's XDP programs are its own)",
    SYS_perf_event_open => "watching other processes and the kernel",
    SYS_init_module => "loading kernel code",
    SYS_finit_module => "same",
    SYS_delete_module => "removing kernel code",
    SYS_kexec_load => "replacing the kernel",
    SYS_kexec_file_load => "same",
    SYS_reboot => "rebooting the host",
    SYS_swapon => "changing swap",
    SYS_swapoff => "same",
    SYS_iopl => "raw port I/O",
    SYS_ioperm => "same",
    SYS_keyctl => "the kernel keyrings",
    SYS_add_key => "same",
    SYS_request_key => "same",
    SYS_userfaultfd => "a tool for widening kernel races",
    SYS_io_uring_setup => "io_uring runs operations seccomp does not see",
    SYS_open_by_handle_at => "opening files around path checks",
    SYS_settimeofday => "changing the host's clock",
    SYS_clock_settime => "same",
    SYS_adjtimex => "same",
    SYS_clock_adjtime => "same",
    SYS_sethostname => "renaming the host",
    SYS_setdomainname => "same",
    SYS_acct => "process accounting",
    SYS_quotactl => "disk quotas",
    SYS_fanotify_init => "watching the host's files",
};

fn arch() -> io::Result<TargetArch> {
    TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|e| io::Error::other(format!("no seccomp support for this CPU: {e}")))
}

fn bad(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("seccomp filter: {e}"))
}

fn rule(conds: Vec<Cond>) -> io::Result<SeccompRule> {
    SeccompRule::new(conds).map_err(bad)
}

fn cond(arg: u8, op: Op, value: u64) -> io::Result<Cond> {
    Cond::new(arg, Len::Qword, op, value).map_err(bad)
}

fn compile(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    mismatch: SeccompAction,
    matched: SeccompAction,
) -> io::Result<Program> {
    let filter = SeccompFilter::new(rules, mismatch, matched, arch()?).map_err(bad)?;
    filter.try_into().map_err(bad)
}

/// The run-phase program for process `pid`: allow [`RUN_ALLOWED`] (with
/// the argument rules below), kill on anything else.
pub(super) fn run_filter(pid: u32) -> io::Result<Program> {
    let no_exec = |prot_arg| cond(prot_arg, Op::MaskedEq(libc::PROT_EXEC as u64), 0);
    let mut rules = BTreeMap::new();
    for e in RUN_ALLOWED {
        let r = match e.nr {
            libc::SYS_mmap | libc::SYS_mprotect => vec![rule(vec![no_exec(2)?])?],
            libc::SYS_tgkill | libc::SYS_tkill => {
                vec![rule(vec![cond(0, Op::Eq, u64::from(pid))?])?]
            }
            libc::SYS_prctl => vec![rule(vec![cond(0, Op::Eq, PR_GET_AUXV)?])?],
            libc::SYS_fcntl => vec![
                rule(vec![cond(1, Op::Eq, libc::F_GETFD as u64)?])?,
                rule(vec![cond(1, Op::Eq, libc::F_GETFL as u64)?])?,
            ],
            _ => Vec::new(),
        };
        rules.insert(e.nr, r);
    }
    compile(rules, SeccompAction::KillProcess, SeccompAction::Allow)
}

/// The build-phase programs for process `pid`: the first kills on
/// [`BUILD_DENIED`] (`clone` only without CLONE_THREAD, `tgkill`/`tkill`
/// only at another process) and allows the rest; the second makes
/// `clone3`, whose flags a filter cannot read, fail with ENOSYS, so a
/// thread library falls back to `clone`. Two programs because one has a
/// single action for all its matches; stacked, the strictest answer wins.
pub(super) fn build_filters(pid: u32) -> io::Result<[Program; 2]> {
    let mut rules = BTreeMap::new();
    for e in BUILD_DENIED {
        let r = match e.nr {
            libc::SYS_clone => vec![rule(vec![cond(
                0,
                Op::MaskedEq(libc::CLONE_THREAD as u64),
                0,
            )?])?],
            libc::SYS_tgkill | libc::SYS_tkill => {
                vec![rule(vec![cond(0, Op::Ne, u64::from(pid))?])?]
            }
            _ => Vec::new(),
        };
        rules.insert(e.nr, r);
    }
    let deny = compile(rules, SeccompAction::Allow, SeccompAction::KillProcess)?;
    let clone3 = compile(
        BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
    )?;
    Ok([deny, clone3])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_disjoint_without_repeats_and_compile() {
        for list in [RUN_ALLOWED, BUILD_DENIED] {
            let mut nrs: Vec<_> = list.iter().map(|e| e.nr).collect();
            nrs.sort_unstable();
            nrs.dedup();
            assert_eq!(nrs.len(), list.len(), "a call is listed twice");
            assert!(list
                .iter()
                .all(|e| !e.why.is_empty() && !e.name().starts_with("SYS_")));
        }
        // tgkill and tkill are on both, each with an argument rule: at
        // itself allowed, at others denied. Nothing else may be.
        let both: Vec<&str> = RUN_ALLOWED
            .iter()
            .filter(|a| BUILD_DENIED.iter().any(|d| d.nr == a.nr))
            .map(|e| e.name())
            .collect();
        assert_eq!(both, ["tgkill", "tkill"]);
        assert!(!run_filter(1).unwrap().is_empty());
        assert!(build_filters(1).unwrap().iter().all(|p| !p.is_empty()));
    }
}
